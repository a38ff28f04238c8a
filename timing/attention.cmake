# time_attention: flash-style causal attention vs a naive materialised one
add_executable(time_attention time_attention.c)
target_link_libraries(time_attention PRIVATE tessera tsr_params m)
target_include_directories(time_attention PRIVATE ${PROJECT_SOURCE_DIR}/compute)
install(TARGETS time_attention RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
