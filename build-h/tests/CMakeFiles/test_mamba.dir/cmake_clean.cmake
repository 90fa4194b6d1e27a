file(REMOVE_RECURSE
  "CMakeFiles/test_mamba.dir/test_mamba.c.o"
  "CMakeFiles/test_mamba.dir/test_mamba.c.o.d"
  "test_mamba"
  "test_mamba.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/test_mamba.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
