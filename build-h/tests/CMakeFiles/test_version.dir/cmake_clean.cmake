file(REMOVE_RECURSE
  "CMakeFiles/test_version.dir/test_version.c.o"
  "CMakeFiles/test_version.dir/test_version.c.o.d"
  "test_version"
  "test_version.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/test_version.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
