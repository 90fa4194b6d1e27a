file(REMOVE_RECURSE
  "CMakeFiles/test_ops.dir/test_ops.c.o"
  "CMakeFiles/test_ops.dir/test_ops.c.o.d"
  "test_ops"
  "test_ops.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/test_ops.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
