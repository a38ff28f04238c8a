# FindSTARPU: StarPU 1.4 and StarPU-MPI through pkg-config.
# STARPU_DIR=<prefix> is searched first (then PKG_CONFIG_PATH and the system);
# deps/starpu/build.sh builds the project's StarPU and Tessera's CMakeLists
# points STARPU_DIR at its cached prefix by default. StarPU 1.3 is not
# supported. Defines the imported targets STARPU::starpu and (when present)
# STARPU::starpumpi, and STARPU_FOUND, STARPU_VERSION, STARPU_PKG,
# STARPU_PREFIX, STARPU_MPI_FOUND, STARPU_MPI_PKG, STARPU_HAS_CUDA and
# STARPU_HAS_FXT and STARPU_HAS_SIMGRID (what StarPU itself was built with),
# STARPU_MAXCPUS.
find_package(PkgConfig REQUIRED)
if(STARPU_DIR)
  set(ENV{PKG_CONFIG_PATH} "${STARPU_DIR}/lib/pkgconfig:${STARPU_DIR}/lib64/pkgconfig:$ENV{PKG_CONFIG_PATH}")
endif()
pkg_check_modules(STARPU_PC QUIET IMPORTED_TARGET GLOBAL starpu-1.4)
if(STARPU_PC_FOUND)
  set(STARPU_PKG starpu-1.4)
  set(STARPU_MPI_PKG starpumpi-1.4)
  set(STARPU_VERSION ${STARPU_PC_VERSION})
  pkg_get_variable(STARPU_PREFIX starpu-1.4 prefix)
  if(NOT TARGET STARPU::starpu)
    add_library(STARPU::starpu ALIAS PkgConfig::STARPU_PC)
  endif()
  pkg_check_modules(STARPU_MPI_PC QUIET IMPORTED_TARGET GLOBAL ${STARPU_MPI_PKG})
  set(STARPU_MPI_FOUND ${STARPU_MPI_PC_FOUND})
  if(STARPU_MPI_FOUND AND NOT TARGET STARPU::starpumpi)
    add_library(STARPU::starpumpi ALIAS PkgConfig::STARPU_MPI_PC)
  endif()
  find_file(STARPU_CONFIG_H starpu_config.h PATHS ${STARPU_PC_INCLUDE_DIRS} NO_DEFAULT_PATH NO_CACHE)
  set(STARPU_HAS_CUDA OFF)
  set(STARPU_HAS_FXT OFF)
  set(STARPU_HAS_SIMGRID OFF)
  set(STARPU_MAXCPUS 0)
  if(STARPU_CONFIG_H)
    file(STRINGS ${STARPU_CONFIG_H} _cfg REGEX "^#define STARPU_(USE_CUDA|USE_FXT|SIMGRID|MAXCPUS) ")
    if(_cfg MATCHES "STARPU_USE_CUDA 1")
      set(STARPU_HAS_CUDA ON)
    endif()
    if(_cfg MATCHES "STARPU_USE_FXT 1")
      set(STARPU_HAS_FXT ON)
    endif()
    if(_cfg MATCHES "STARPU_SIMGRID 1")
      set(STARPU_HAS_SIMGRID ON)
    endif()
    if(_cfg MATCHES "STARPU_MAXCPUS ([0-9]+)")
      set(STARPU_MAXCPUS ${CMAKE_MATCH_1})
    endif()
  endif()
endif()
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(STARPU
  REQUIRED_VARS STARPU_PKG
  VERSION_VAR STARPU_VERSION
  FAIL_MESSAGE "StarPU 1.4 not found: build it with deps/starpu/build.sh (cached under ~/.cache/tessera) or pass -DSTARPU_DIR=<prefix of a StarPU 1.4>")
