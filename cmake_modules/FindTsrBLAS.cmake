# FindTsrBLAS: the BLAS behind Tessera's CPU tile kernels, chosen by TSR_BLAS.
#   BLIS     -> libblis (Debian: blis-openmp / blis-pthread / blis-serial), native API
#   OpenBLAS -> libopenblas (pkg-config openblas first), CBLAS API
# Defines TsrBLAS::blas and TSR_BLAS_BLIS / TSR_BLAS_OPENBLAS.
set(_arch_dir /usr/lib/${CMAKE_LIBRARY_ARCHITECTURE})
set(_inc_dir /usr/include/${CMAKE_LIBRARY_ARCHITECTURE})
if(TSR_BLAS STREQUAL "BLIS")
  find_package(PkgConfig QUIET)
  if(PKG_CONFIG_FOUND)
    pkg_check_modules(BLIS_PC QUIET blis)
  endif()
  find_path(TsrBLAS_INCLUDE_DIR blis.h
    HINTS ${BLIS_PC_INCLUDE_DIRS}
    PATHS ${_inc_dir}/blis-openmp ${_inc_dir}/blis-pthread ${_inc_dir}/blis-serial /usr/include/blis)
  find_library(TsrBLAS_LIBRARY NAMES blis
    HINTS ${BLIS_PC_LIBRARY_DIRS}
    PATHS ${_arch_dir}/blis-openmp ${_arch_dir}/blis-pthread ${_arch_dir}/blis-serial)
  set(TSR_BLAS_BLIS ON)
  set(TSR_BLAS_OPENBLAS OFF)
elseif(TSR_BLAS STREQUAL "OpenBLAS")
  find_package(PkgConfig QUIET)
  if(PKG_CONFIG_FOUND)
    pkg_check_modules(OPENBLAS_PC QUIET openblas)
  endif()
  find_path(TsrBLAS_INCLUDE_DIR cblas.h
    HINTS ${OPENBLAS_PC_INCLUDE_DIRS}
    PATHS ${_inc_dir}/openblas-pthread ${_inc_dir}/openblas-openmp ${_inc_dir}/openblas-serial /usr/include/openblas
    NO_DEFAULT_PATH)
  find_library(TsrBLAS_LIBRARY NAMES openblas
    HINTS ${OPENBLAS_PC_LIBRARY_DIRS}
    PATHS ${_arch_dir}/openblas-pthread ${_arch_dir}/openblas-openmp ${_arch_dir}/openblas-serial)
  set(TSR_BLAS_BLIS OFF)
  set(TSR_BLAS_OPENBLAS ON)
else()
  message(FATAL_ERROR "TSR_BLAS must be BLIS or OpenBLAS, not '${TSR_BLAS}'")
endif()
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(TsrBLAS REQUIRED_VARS TsrBLAS_LIBRARY TsrBLAS_INCLUDE_DIR)
if(TsrBLAS_FOUND AND NOT TARGET TsrBLAS::blas)
  add_library(TsrBLAS::blas UNKNOWN IMPORTED)
  set_target_properties(TsrBLAS::blas PROPERTIES
    IMPORTED_LOCATION ${TsrBLAS_LIBRARY}
    INTERFACE_INCLUDE_DIRECTORIES ${TsrBLAS_INCLUDE_DIR})
endif()
