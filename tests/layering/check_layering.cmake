# Fails when a file of one layer includes a header of a layer it does not
# build on (docs/architecture.md), includes a dtensor header by a quoted or
# relative path, or when a library source is in no layer.
#
#   cmake -DMANIFEST=build/layer_manifest.cmake -DSOURCE_DIR=. -P check_layering.cmake
#
# MANIFEST (written by cmake/dtensor_layers.cmake) lists each layer's files,
# the headers it exposes and the layers it builds on. EXTRA_FILES, a list of
# "layer=path", adds files to layers (the test that proves the check fails).
cmake_minimum_required(VERSION 3.18)
include(${MANIFEST})

# Which layer exposes each header, and each layer's closure of dependencies.
foreach(layer ${layers})
  foreach(header ${layer_${layer}_headers})
    set(provider_${header} ${layer})
  endforeach()
endforeach()
# A layer may include its own headers, those of the layers it builds on
# (transitively) and those its sources implement (PRIVATE_DEPENDS, not
# passed on).
function(closure layer out)
  set(result ${layer})
  set(pending ${layer_${layer}_depends} ${layer_${layer}_private_depends})
  while(pending)
    list(POP_FRONT pending next)
    if(NOT next IN_LIST result)
      list(APPEND result ${next})
      list(APPEND pending ${layer_${next}_depends})
    endif()
  endwhile()
  set(${out} ${result} PARENT_SCOPE)
endfunction()

foreach(extra ${EXTRA_FILES})
  string(REPLACE "=" ";" pair ${extra})
  list(GET pair 0 layer)
  list(GET pair 1 file)
  list(APPEND layer_${layer}_files ${file})
endforeach()

set(problems)
set(declared)
foreach(layer ${layers})
  closure(${layer} allowed)
  foreach(file ${layer_${layer}_files})
    list(APPEND declared ${file})
    file(RELATIVE_PATH shown ${SOURCE_DIR} ${file})
    file(STRINGS ${file} includes REGEX "^[ \t]*#[ \t]*include[ \t]*[<\"]")
    foreach(line ${includes})
      string(REGEX REPLACE "^[ \t]*#[ \t]*include[ \t]*[<\"]([^>\"]+)[>\"].*" "\\1" path "${line}")
      if(line MATCHES "include[ \t]*\"" AND NOT path MATCHES "^absl/")
        list(APPEND problems "${shown} (${layer}): \"${path}\": expected <dtensor/...>")
      elseif(path MATCHES "^dtensor/")
        set(provider ${provider_${path}})
        if(NOT provider)
          list(APPEND problems "${shown} (${layer}): <${path}>: no layer exposes it")
        elseif(NOT provider IN_LIST allowed)
          list(APPEND problems
            "${shown} (layer ${layer}) includes <${path}> of layer ${provider}; ${layer} may include: ${allowed}")
        endif()
      endif()
    endforeach()
  endforeach()
endforeach()

# Every library source belongs to a layer.
file(GLOB_RECURSE sources ${SOURCE_DIR}/base/*.h ${SOURCE_DIR}/base/*.cc ${SOURCE_DIR}/mesh/*.h
     ${SOURCE_DIR}/mesh/*.cc ${SOURCE_DIR}/placements/*.h ${SOURCE_DIR}/placements/*.cc
     ${SOURCE_DIR}/rules/*.h ${SOURCE_DIR}/rules/*.cc ${SOURCE_DIR}/dtensor/*.h
     ${SOURCE_DIR}/dtensor/*.cc)
foreach(file ${sources})
  if(NOT file IN_LIST declared)
    file(RELATIVE_PATH shown ${SOURCE_DIR} ${file})
    # The NCCL backend is declared only where it is built.
    if(NOT shown STREQUAL "mesh/nccl_communicator.cc")
      list(APPEND problems "${shown}: in no layer (add it to its folder's dtensor_layer)")
    endif()
  endif()
endforeach()

if(problems)
  foreach(problem ${problems})
    message(NOTICE "layering: ${problem}")
  endforeach()
  list(LENGTH problems count)
  message(FATAL_ERROR "layering: ${count} problems")
endif()
list(LENGTH declared count)
message(STATUS "layering: ${count} files, every include within its layer or below")
