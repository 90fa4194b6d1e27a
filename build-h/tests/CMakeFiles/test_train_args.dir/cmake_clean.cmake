file(REMOVE_RECURSE
  "CMakeFiles/test_train_args.dir/test_train_args.c.o"
  "CMakeFiles/test_train_args.dir/test_train_args.c.o.d"
  "test_train_args"
  "test_train_args.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/test_train_args.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
