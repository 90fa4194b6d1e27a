file(REMOVE_RECURSE
  "CMakeFiles/test_data.dir/test_data.c.o"
  "CMakeFiles/test_data.dir/test_data.c.o.d"
  "test_data"
  "test_data.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/test_data.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
