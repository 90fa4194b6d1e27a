file(REMOVE_RECURSE
  "CMakeFiles/test_math.dir/test_math.c.o"
  "CMakeFiles/test_math.dir/test_math.c.o.d"
  "test_math"
  "test_math.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/test_math.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
