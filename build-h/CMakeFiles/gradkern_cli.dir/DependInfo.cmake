
# Consider dependencies only in project.
set(CMAKE_DEPENDS_IN_PROJECT_ONLY OFF)

# The set of languages for which implicit dependencies are needed:
set(CMAKE_DEPENDS_LANGUAGES
  )

# The set of dependency files which are needed:
set(CMAKE_DEPENDS_DEPENDENCY_FILES
  "/work/main/tools/bench.c" "CMakeFiles/gradkern_cli.dir/tools/bench.c.o" "gcc" "CMakeFiles/gradkern_cli.dir/tools/bench.c.o.d"
  "/work/main/tools/gradkern.c" "CMakeFiles/gradkern_cli.dir/tools/gradkern.c.o" "gcc" "CMakeFiles/gradkern_cli.dir/tools/gradkern.c.o.d"
  "/work/main/tools/sample.c" "CMakeFiles/gradkern_cli.dir/tools/sample.c.o" "gcc" "CMakeFiles/gradkern_cli.dir/tools/sample.c.o.d"
  "/work/main/tools/train.c" "CMakeFiles/gradkern_cli.dir/tools/train.c.o" "gcc" "CMakeFiles/gradkern_cli.dir/tools/train.c.o.d"
  )

# Targets to which this target links.
set(CMAKE_TARGET_LINKED_INFO_FILES
  "/work/main/build-h/CMakeFiles/gradkern_nn_args.dir/DependInfo.cmake"
  "/work/main/build-h/CMakeFiles/gradkern_nn.dir/DependInfo.cmake"
  "/work/main/build-h/CMakeFiles/gradkern_static.dir/DependInfo.cmake"
  )

# Fortran module output directory.
set(CMAKE_Fortran_TARGET_MODULE_DIR "")
