file(REMOVE_RECURSE
  "CMakeFiles/example_rmsnorm.dir/examples/rmsnorm.c.o"
  "CMakeFiles/example_rmsnorm.dir/examples/rmsnorm.c.o.d"
  "example_rmsnorm"
  "example_rmsnorm.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/example_rmsnorm.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
