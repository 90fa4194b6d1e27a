file(REMOVE_RECURSE
  "CMakeFiles/test_transformer.dir/test_transformer.c.o"
  "CMakeFiles/test_transformer.dir/test_transformer.c.o.d"
  "test_transformer"
  "test_transformer.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/test_transformer.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
