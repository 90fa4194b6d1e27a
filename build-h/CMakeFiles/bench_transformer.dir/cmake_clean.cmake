file(REMOVE_RECURSE
  "CMakeFiles/bench_transformer.dir/bench/bench_transformer.c.o"
  "CMakeFiles/bench_transformer.dir/bench/bench_transformer.c.o.d"
  "bench_transformer"
  "bench_transformer.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/bench_transformer.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
