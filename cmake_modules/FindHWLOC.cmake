# FindHWLOC: hwloc through pkg-config; defines HWLOC::hwloc.
find_package(PkgConfig REQUIRED)
pkg_check_modules(HWLOC_PC QUIET IMPORTED_TARGET GLOBAL hwloc)
if(HWLOC_PC_FOUND AND NOT TARGET HWLOC::hwloc)
  add_library(HWLOC::hwloc ALIAS PkgConfig::HWLOC_PC)
endif()
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(HWLOC REQUIRED_VARS HWLOC_PC_FOUND VERSION_VAR HWLOC_PC_VERSION)
