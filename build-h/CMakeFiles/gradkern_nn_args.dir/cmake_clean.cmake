file(REMOVE_RECURSE
  "CMakeFiles/gradkern_nn_args.dir/tools/train_args.c.o"
  "CMakeFiles/gradkern_nn_args.dir/tools/train_args.c.o.d"
  "libgradkern_nn_args.a"
  "libgradkern_nn_args.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/gradkern_nn_args.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
