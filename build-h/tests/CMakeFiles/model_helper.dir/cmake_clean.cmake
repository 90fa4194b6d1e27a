file(REMOVE_RECURSE
  "CMakeFiles/model_helper.dir/model_helper.c.o"
  "CMakeFiles/model_helper.dir/model_helper.c.o.d"
  "model_helper"
  "model_helper.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/model_helper.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
