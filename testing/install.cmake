# the installed package: a program built with pkg-config's flags alone starts
tsr_add_test(install_pkgconfig bash ${CMAKE_CURRENT_SOURCE_DIR}/check_pkgconfig.sh ${PROJECT_BINARY_DIR}
             ${PROJECT_SOURCE_DIR})
