file(REMOVE_RECURSE
  "CMakeFiles/test_optim.dir/test_optim.c.o"
  "CMakeFiles/test_optim.dir/test_optim.c.o.d"
  "test_optim"
  "test_optim.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/test_optim.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
