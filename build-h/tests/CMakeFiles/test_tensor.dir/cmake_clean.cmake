file(REMOVE_RECURSE
  "CMakeFiles/test_tensor.dir/test_tensor.c.o"
  "CMakeFiles/test_tensor.dir/test_tensor.c.o.d"
  "test_tensor"
  "test_tensor.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/test_tensor.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
