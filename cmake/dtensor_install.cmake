# `cmake --install` puts every public header under include/dtensor/ (each
# layer's headers at their <dtensor/...> path; cmake/dtensor_layers.cmake
# installs them), the libraries under lib/, and exports dtensor::dtensor
# (and dtensor::tools) for find_package(dtensor). Consumers put include/ on
# their path and write `#include <dtensor/mesh/device_mesh.h>`.
include(CMakePackageConfigHelpers)

get_property(dtensor_tool_libraries GLOBAL PROPERTY dtensor_tool_libraries)
install(TARGETS dtensor ${dtensor_tool_libraries} EXPORT dtensorTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
if(DTENSOR_HAVE_NCCL)
  install(TARGETS dtensor_nccl_lib EXPORT dtensorTargets)
endif()

set(dtensor_config_dir ${CMAKE_INSTALL_LIBDIR}/cmake/dtensor)
install(EXPORT dtensorTargets NAMESPACE dtensor:: DESTINATION ${dtensor_config_dir})
configure_package_config_file(${CMAKE_CURRENT_SOURCE_DIR}/cmake/dtensorConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/dtensorConfig.cmake INSTALL_DESTINATION ${dtensor_config_dir})
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/dtensorConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/dtensorConfig.cmake
  ${CMAKE_CURRENT_BINARY_DIR}/dtensorConfigVersion.cmake DESTINATION ${dtensor_config_dir})
