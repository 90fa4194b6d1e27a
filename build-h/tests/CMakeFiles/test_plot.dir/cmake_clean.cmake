file(REMOVE_RECURSE
  "CMakeFiles/test_plot.dir/test_plot.c.o"
  "CMakeFiles/test_plot.dir/test_plot.c.o.d"
  "test_plot"
  "test_plot.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/test_plot.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
