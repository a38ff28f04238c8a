# time_fusion: fused vs unfused Linear+bias+GeLU and Linear+bias+reshape (CSV)
add_executable(time_fusion time_fusion.c)
target_link_libraries(time_fusion PRIVATE tessera tsr_params m)
install(TARGETS time_fusion RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
