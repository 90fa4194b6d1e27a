file(REMOVE_RECURSE
  "CMakeFiles/test_schedule.dir/test_schedule.c.o"
  "CMakeFiles/test_schedule.dir/test_schedule.c.o.d"
  "test_schedule"
  "test_schedule.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/test_schedule.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
