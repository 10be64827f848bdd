# Compile check of the NCCL backend where it cannot be built: the CUDA
# toolkit and NCCL are present but libtorch has no CUDA (Debian's CPU build),
# so DTENSOR_HAVE_NCCL is OFF. OBJECT libraries, built by default and never
# linked, compile mesh/nccl_communicator.cc (and the NCCL tests when GoogleTest
# is found) against the CPU libtorch, the CUDA runtime headers and nccl.h, so
# that a break shows up on every build instead of only on a GPU machine.
#
# Include after the `dtensor` target exists (it provides the include paths of
# libtorch, MPI and Abseil); needs the variables dtensor_dependencies.cmake
# sets: CUDAToolkit_FOUND, NCCL_INCLUDE_DIR, TORCH_INCLUDE_DIRS.
if(DTENSOR_HAVE_NCCL OR NOT CUDAToolkit_FOUND OR NOT NCCL_INCLUDE_DIR)
  return()
endif()

function(dtensor_add_nccl_compile_check name)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "" "SOURCES;DEFINITIONS;INCLUDES;LIBRARIES")
  add_library(${name} OBJECT ${arg_SOURCES})
  target_include_directories(${name} PRIVATE ${arg_INCLUDES} ${PROJECT_SOURCE_DIR}
    $<TARGET_PROPERTY:dtensor,INTERFACE_INCLUDE_DIRECTORIES> ${NCCL_INCLUDE_DIR})
  target_compile_definitions(${name} PRIVATE ${arg_DEFINITIONS})
  # Object libraries take only the usage requirements (include paths,
  # definitions) of what they "link"; nothing is linked. dtensor's own
  # dependencies are named rather than dtensor, so that the check does not
  # wait for the library to be built.
  target_link_libraries(${name} PRIVATE
    $<TARGET_PROPERTY:dtensor,INTERFACE_LINK_LIBRARIES> CUDA::cudart ${arg_LIBRARIES})
  dtensor_target_warnings(${name})
endfunction()

set(dtensor_nccl_check_sources ${PROJECT_SOURCE_DIR}/mesh/nccl_communicator.cc)
set(dtensor_nccl_check_libraries)
find_package(GTest QUIET)
if(DTENSOR_BUILD_TESTS AND TARGET GTest::gtest)
  list(APPEND dtensor_nccl_check_sources ${PROJECT_SOURCE_DIR}/tests/nccl/nccl_communicator_test.cc
       ${PROJECT_SOURCE_DIR}/tests/nccl/nccl_dtensor_test.cc)
  list(APPEND dtensor_nccl_check_libraries GTest::gtest)
endif()
dtensor_add_nccl_compile_check(dtensor_nccl_compile_check
  SOURCES ${dtensor_nccl_check_sources}
  LIBRARIES ${dtensor_nccl_check_libraries})

# The code behind DTENSOR_TORCH_HAS_CUDA (torch's current stream, the caching
# allocator) too, when libtorch ships the c10/cuda headers without their
# generated cuda_cmake_macros.h (Debian does): an empty stand-in is enough
# for a syntax check, since that header only defines build switches.
find_path(dtensor_c10_cuda_include c10/cuda/CUDAStream.h HINTS ${TORCH_INCLUDE_DIRS} NO_CACHE)
if(dtensor_c10_cuda_include)
  set(stand_in ${CMAKE_CURRENT_BINARY_DIR}/dtensor_nccl_compile_check_include)
  if(NOT EXISTS ${dtensor_c10_cuda_include}/c10/cuda/impl/cuda_cmake_macros.h)
    file(WRITE ${stand_in}/c10/cuda/impl/cuda_cmake_macros.h
         "// Stand-in for a CUDA libtorch's generated header (compile check only).\n#pragma once\n")
  endif()
  dtensor_add_nccl_compile_check(dtensor_nccl_compile_check_torch_cuda
    SOURCES ${PROJECT_SOURCE_DIR}/mesh/nccl_communicator.cc
            ${PROJECT_SOURCE_DIR}/dtensor/redistribute/async_redistribute.cc
    DEFINITIONS DTENSOR_TORCH_HAS_CUDA=1
    INCLUDES ${stand_in})
endif()
