# strata_header_check(<target> <extension> <headers...>): an object library of one generated
# translation unit per header (.cu: compiled by nvcc; .cpp: by the C++ compiler), so every
# header is proven to compile on its own (CUTLASS's way). The caller links what the headers
# need and adds any definitions.
function(strata_header_check target extension)
  set(tus)
  foreach(header IN LISTS ARGN)
    file(RELATIVE_PATH relative "${PROJECT_SOURCE_DIR}/include" "${header}")
    string(MAKE_C_IDENTIFIER "${relative}" name)
    set(tu "${PROJECT_BINARY_DIR}/header_check/${target}/${name}.${extension}")
    file(CONFIGURE OUTPUT "${tu}" CONTENT "#include <${relative}>\n")
    list(APPEND tus "${tu}")
  endforeach()
  add_library(${target} OBJECT ${tus})
  target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra>
                                           $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall,-Wextra>)
endfunction()
