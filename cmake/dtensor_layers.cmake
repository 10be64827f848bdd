# The library is built layer by layer (docs/architecture.md): each layer is an
# OBJECT library whose headers are reachable only through the include tree
# this file builds for it, so a file can include a layer's headers only when
# its own layer links that layer. An upward #include therefore fails to
# compile ("No such file"), and `libdtensor` is the union of the layers'
# objects.
#
#   dtensor_layer(rules
#     SOURCES propagation.cc ...
#     HEADERS propagation.h ...
#     DEPENDS placements)
#
# TOOL makes a SHARED library `dtensor_NAME` on top of libdtensor instead of
# objects inside it (the rule verifier).
#
# Header paths are relative to the calling CMakeLists.txt; each becomes
# `<dtensor/PATH>`, PATH its path from the repository root with a leading
# `dtensor/` folder dropped (mesh/device_mesh.h -> <dtensor/mesh/device_mesh.h>,
# dtensor/core/tensor_impl.h -> <dtensor/core/tensor_impl.h>). A layer without
# sources is an INTERFACE library: headers that one layer's sources implement
# (naming it in PRIVATE_DEPENDS) but that only some layers above may see (the
# communicators).
#
# Options of every dtensor target (library, tests, tools, benchmarks) come
# from dtensor_target_warnings().

set(dtensor_layers_root ${PROJECT_BINARY_DIR}/layers)

# -Wall -Wextra on `target`, as errors when DTENSOR_WARNINGS_AS_ERRORS is on.
# g++ 13's -Wdangling-reference flags every `const RedistributePlan& plan =
# plan_redistribute(..temporary..)`: the plan lives in a cache, not in an
# argument. g++ 14 is told so by DTENSOR_RETURNS_NO_ARGUMENT_REFERENCE
# (base/compat.h); g++ 13 has no such attribute, so the warning is off there.
set(dtensor_warning_flags -Wall -Wextra)
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_GREATER_EQUAL 13
   AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 14)
  list(APPEND dtensor_warning_flags -Wno-dangling-reference)
endif()

function(dtensor_target_warnings target)
  target_compile_options(${target} PRIVATE ${dtensor_warning_flags})
  if(DTENSOR_WARNINGS_AS_ERRORS)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
endfunction()

# -Wall -Wextra (as errors with DTENSOR_WARNINGS_AS_ERRORS) on every target
# of the calling directory and below (tests, examples, benchmarks).
macro(dtensor_directory_warnings)
  add_compile_options(${dtensor_warning_flags})
  if(DTENSOR_WARNINGS_AS_ERRORS)
    add_compile_options(-Werror)
  endif()
endmacro()

# The include path `<dtensor/...>` of `header` (relative to the current source dir).
function(dtensor_header_include_path header out)
  file(RELATIVE_PATH path ${PROJECT_SOURCE_DIR} ${CMAKE_CURRENT_SOURCE_DIR}/${header})
  if(NOT path MATCHES "^dtensor/")
    set(path dtensor/${path})
  endif()
  set(${out} ${path} PARENT_SCOPE)
endfunction()

function(dtensor_layer name)
  cmake_parse_arguments(PARSE_ARGV 1 arg "TOOL" "" "SOURCES;HEADERS;DEPENDS;PRIVATE_DEPENDS;LIBRARIES")
  set(target dtensor_layer_${name})
  set(root ${dtensor_layers_root}/${name})
  file(REMOVE_RECURSE ${root})
  foreach(header ${arg_HEADERS})
    dtensor_header_include_path(${header} path)
    get_filename_component(folder ${path} DIRECTORY)
    file(MAKE_DIRECTORY ${root}/${folder})
    file(CREATE_LINK ${CMAKE_CURRENT_SOURCE_DIR}/${header} ${root}/${path} SYMBOLIC)
    install(FILES ${header} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/${folder})
  endforeach()
  set(layer_dependencies)
  foreach(dependency ${arg_DEPENDS})
    list(APPEND layer_dependencies dtensor_layer_${dependency})
  endforeach()
  if(arg_TOOL)
    # A library of its own on top of libdtensor, exported as dtensor::NAME.
    set(target dtensor_${name})
    add_library(${target} SHARED ${arg_SOURCES})
    add_library(dtensor::${name} ALIAS ${target})
    target_include_directories(${target} PUBLIC $<BUILD_INTERFACE:${root}>)
    target_link_libraries(${target} PUBLIC dtensor)
    set_target_properties(${target} PROPERTIES VERSION ${PROJECT_VERSION} SOVERSION 0
      EXPORT_NAME ${name} INSTALL_RPATH_USE_LINK_PATH ON)
    dtensor_target_warnings(${target})
    if(DTENSOR_USE_PCH)
      target_precompile_headers(${target} REUSE_FROM dtensor_pch)
    endif()
    set_property(GLOBAL APPEND PROPERTY dtensor_tool_libraries ${target})
  elseif(arg_SOURCES)
    add_library(${target} OBJECT ${arg_SOURCES})
    target_include_directories(${target} PUBLIC $<BUILD_INTERFACE:${root}>)
    target_link_libraries(${target} PUBLIC ${layer_dependencies} ${arg_LIBRARIES})
    # Headers the layer's sources implement but its own headers must not
    # expose (the mesh's sources implement the communicators).
    foreach(dependency ${arg_PRIVATE_DEPENDS})
      target_include_directories(${target} PRIVATE ${dtensor_layers_root}/${dependency})
    endforeach()
    set_target_properties(${target} PROPERTIES POSITION_INDEPENDENT_CODE ON)
    dtensor_target_warnings(${target})
    if(DTENSOR_USE_PCH)
      target_precompile_headers(${target} REUSE_FROM dtensor_pch)
    endif()
    set_property(GLOBAL APPEND PROPERTY dtensor_object_layers ${target})
  else()
    add_library(${target} INTERFACE)
    target_include_directories(${target} INTERFACE $<BUILD_INTERFACE:${root}>)
    target_link_libraries(${target} INTERFACE ${layer_dependencies} ${arg_LIBRARIES})
  endif()
  if(NOT arg_TOOL)
    set_property(GLOBAL APPEND PROPERTY dtensor_layer_roots ${root})
  endif()
  # What the layering test (tests/layering) checks each file against.
  set(files)
  foreach(file ${arg_SOURCES} ${arg_HEADERS})
    list(APPEND files ${CMAKE_CURRENT_SOURCE_DIR}/${file})
  endforeach()
  set(paths)
  foreach(header ${arg_HEADERS})
    dtensor_header_include_path(${header} path)
    list(APPEND paths ${path})
  endforeach()
  set_property(GLOBAL APPEND PROPERTY dtensor_layer_names ${name})
  set_property(GLOBAL PROPERTY dtensor_layer_${name}_files ${files})
  set_property(GLOBAL PROPERTY dtensor_layer_${name}_headers ${paths})
  set_property(GLOBAL PROPERTY dtensor_layer_${name}_depends ${arg_DEPENDS})
  set_property(GLOBAL PROPERTY dtensor_layer_${name}_private_depends ${arg_PRIVATE_DEPENDS})
endfunction()

# Writes what every layer holds, exposes and may include to `file`, for the
# layering test (tests/layering/check_layering.cmake).
function(dtensor_write_layer_manifest file)
  get_property(names GLOBAL PROPERTY dtensor_layer_names)
  set(text "set(layers ${names})\n")
  foreach(name ${names})
    foreach(what files headers depends private_depends)
      get_property(value GLOBAL PROPERTY dtensor_layer_${name}_${what})
      string(APPEND text "set(layer_${name}_${what} ${value})\n")
    endforeach()
  endforeach()
  file(GENERATE OUTPUT ${file} CONTENT "${text}")
endfunction()

# The shared library `target` made of every layer's objects, exposing every
# layer's headers (<dtensor/...>, under include/ once installed).
function(dtensor_add_library target)
  get_property(layers GLOBAL PROPERTY dtensor_object_layers)
  get_property(roots GLOBAL PROPERTY dtensor_layer_roots)
  foreach(layer ${layers})
    target_sources(${target} PRIVATE $<TARGET_OBJECTS:${layer}>)
  endforeach()
  foreach(root ${roots})
    target_include_directories(${target} PUBLIC $<BUILD_INTERFACE:${root}>)
  endforeach()
  target_include_directories(${target} PUBLIC $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
endfunction()
