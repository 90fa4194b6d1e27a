
# Consider dependencies only in project.
set(CMAKE_DEPENDS_IN_PROJECT_ONLY OFF)

# The set of languages for which implicit dependencies are needed:
set(CMAKE_DEPENDS_LANGUAGES
  )

# The set of dependency files which are needed:
set(CMAKE_DEPENDS_DEPENDENCY_FILES
  "/work/main/tests/test_train_args.c" "tests/CMakeFiles/test_train_args.dir/test_train_args.c.o" "gcc" "tests/CMakeFiles/test_train_args.dir/test_train_args.c.o.d"
  )

# Targets to which this target links.
set(CMAKE_TARGET_LINKED_INFO_FILES
  "/work/main/build-h/CMakeFiles/gradkern_nn.dir/DependInfo.cmake"
  "/work/main/build-h/CMakeFiles/gradkern_static.dir/DependInfo.cmake"
  "/work/main/build-h/CMakeFiles/gradkern_nn_args.dir/DependInfo.cmake"
  )

# Fortran module output directory.
set(CMAKE_Fortran_TARGET_MODULE_DIR "")
