file(REMOVE_RECURSE
  "CMakeFiles/scan_timing.dir/bench/scan_timing.c.o"
  "CMakeFiles/scan_timing.dir/bench/scan_timing.c.o.d"
  "scan_timing"
  "scan_timing.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/scan_timing.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
