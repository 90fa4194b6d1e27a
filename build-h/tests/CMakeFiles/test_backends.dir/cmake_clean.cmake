file(REMOVE_RECURSE
  "CMakeFiles/test_backends.dir/test_backends.c.o"
  "CMakeFiles/test_backends.dir/test_backends.c.o.d"
  "test_backends"
  "test_backends.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/test_backends.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
