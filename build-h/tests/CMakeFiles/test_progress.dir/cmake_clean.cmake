file(REMOVE_RECURSE
  "CMakeFiles/test_progress.dir/test_progress.c.o"
  "CMakeFiles/test_progress.dir/test_progress.c.o.d"
  "test_progress"
  "test_progress.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/test_progress.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
