file(REMOVE_RECURSE
  "CMakeFiles/gradkern_cli.dir/tools/bench.c.o"
  "CMakeFiles/gradkern_cli.dir/tools/bench.c.o.d"
  "CMakeFiles/gradkern_cli.dir/tools/gradkern.c.o"
  "CMakeFiles/gradkern_cli.dir/tools/gradkern.c.o.d"
  "CMakeFiles/gradkern_cli.dir/tools/sample.c.o"
  "CMakeFiles/gradkern_cli.dir/tools/sample.c.o.d"
  "CMakeFiles/gradkern_cli.dir/tools/train.c.o"
  "CMakeFiles/gradkern_cli.dir/tools/train.c.o.d"
  "gradkern"
  "gradkern.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/gradkern_cli.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
