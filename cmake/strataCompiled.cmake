# strata_add_compiled_library(<name>): a static library holding strata's non-template code
# (strata/impl/src.hpp), compiled once instead of in every translation unit that includes
# strata; whatever links it is compiled with STRATA_SEPARATE_COMPILATION (see config.hpp).
# Link it into a program's executable (or one library of it), not into several.
function(strata_add_compiled_library name)
  set(source "${CMAKE_CURRENT_BINARY_DIR}/${name}_strata_src.cpp")
  file(CONFIGURE OUTPUT "${source}" CONTENT "#include <strata/impl/src.hpp>\n")
  add_library(${name} STATIC "${source}")
  target_compile_definitions(${name} PUBLIC STRATA_SEPARATE_COMPILATION)
  target_link_libraries(${name} PUBLIC strata::strata)
endfunction()
