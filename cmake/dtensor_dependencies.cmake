# Finds what dtensor builds against and decides whether the NCCL backend is on.
include(GNUInstallDirs)

find_package(Torch REQUIRED)
# libtorch 2.14+ refuses standards before C++20 (ATen.h); its CMake config
# names the standard it needs on the torch target.
get_target_property(dtensor_torch_cxx_standard torch CXX_STANDARD)
if(dtensor_torch_cxx_standard GREATER CMAKE_CXX_STANDARD)
  set(CMAKE_CXX_STANDARD ${dtensor_torch_cxx_standard})
endif()
# The C API is all dtensor uses; skip the deprecated C++ bindings.
set(MPI_CXX_SKIP_MPICXX ON)
find_package(MPI REQUIRED COMPONENTS CXX)
find_package(absl REQUIRED)
find_package(nlohmann_json 3 REQUIRED)

set(DTENSOR_HAVE_NCCL OFF)
if(NOT DTENSOR_WITH_NCCL STREQUAL "OFF")
  find_package(CUDAToolkit QUIET)
  find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS} /usr/include)
  find_library(NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR} /usr/lib/x86_64-linux-gnu)
  # A CUDA libtorch defines the c10_cuda target; Debian's CPU build does not.
  if(TARGET c10_cuda OR TARGET torch_cuda)
    set(dtensor_torch_has_cuda ON)
  else()
    set(dtensor_torch_has_cuda OFF)
  endif()
  if(CUDAToolkit_FOUND AND NCCL_INCLUDE_DIR AND NCCL_LIBRARY AND dtensor_torch_has_cuda)
    set(DTENSOR_HAVE_NCCL ON)
  elseif(DTENSOR_WITH_NCCL STREQUAL "ON")
    message(FATAL_ERROR "DTENSOR_WITH_NCCL=ON needs the CUDA toolkit (found: ${CUDAToolkit_FOUND}), "
      "nccl.h (found: ${NCCL_INCLUDE_DIR}), libnccl (found: ${NCCL_LIBRARY}) and a CUDA "
      "libtorch (found: ${dtensor_torch_has_cuda})")
  endif()
endif()
if(DTENSOR_HAVE_NCCL)
  add_library(dtensor_nccl_lib INTERFACE)
  target_include_directories(dtensor_nccl_lib INTERFACE ${NCCL_INCLUDE_DIR})
  target_link_libraries(dtensor_nccl_lib INTERFACE ${NCCL_LIBRARY})
endif()
message(STATUS "dtensor: libtorch ${Torch_VERSION}, NCCL backend ${DTENSOR_HAVE_NCCL}")
