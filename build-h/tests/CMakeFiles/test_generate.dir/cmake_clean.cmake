file(REMOVE_RECURSE
  "CMakeFiles/test_generate.dir/test_generate.c.o"
  "CMakeFiles/test_generate.dir/test_generate.c.o.d"
  "test_generate"
  "test_generate.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/test_generate.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
