file(REMOVE_RECURSE
  "CMakeFiles/nn_helper.dir/nn_helper.c.o"
  "CMakeFiles/nn_helper.dir/nn_helper.c.o.d"
  "nn_helper"
  "nn_helper.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/nn_helper.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
