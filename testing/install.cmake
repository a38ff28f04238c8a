# the installed package: a program built with pkg-config's flags alone starts
# (not in a sanitizer build: its library needs the sanitizer runtime first)
if(NOT CMAKE_C_FLAGS MATCHES "sanitize")
  tsr_add_test(install_pkgconfig bash ${CMAKE_CURRENT_SOURCE_DIR}/check_pkgconfig.sh ${PROJECT_BINARY_DIR}
               ${PROJECT_SOURCE_DIR})
endif()
