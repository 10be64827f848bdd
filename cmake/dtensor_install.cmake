# `cmake --install` lays out headers under include/dtensor/ (folders kept, so
# `#include "dtensor/dtensor.h"` works the same in and out of the tree) and
# exports dtensor::dtensor for find_package(dtensor).
include(CMakePackageConfigHelpers)

install(TARGETS dtensor EXPORT dtensorTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
if(DTENSOR_HAVE_NCCL)
  install(TARGETS dtensor_nccl_lib EXPORT dtensorTargets)
endif()
foreach(folder dtensor mesh placements rules)
  install(DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR}/${folder}
    DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/dtensor FILES_MATCHING PATTERN "*.h")
endforeach()

set(dtensor_config_dir ${CMAKE_INSTALL_LIBDIR}/cmake/dtensor)
install(EXPORT dtensorTargets NAMESPACE dtensor:: DESTINATION ${dtensor_config_dir})
configure_package_config_file(${CMAKE_CURRENT_SOURCE_DIR}/cmake/dtensorConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/dtensorConfig.cmake INSTALL_DESTINATION ${dtensor_config_dir})
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/dtensorConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/dtensorConfig.cmake
  ${CMAKE_CURRENT_BINARY_DIR}/dtensorConfigVersion.cmake DESTINATION ${dtensor_config_dir})
