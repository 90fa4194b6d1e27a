file(REMOVE_RECURSE
  "CMakeFiles/test_bad_input_mamba.dir/test_bad_input_mamba.c.o"
  "CMakeFiles/test_bad_input_mamba.dir/test_bad_input_mamba.c.o.d"
  "test_bad_input_mamba"
  "test_bad_input_mamba.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/test_bad_input_mamba.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
