
# Consider dependencies only in project.
set(CMAKE_DEPENDS_IN_PROJECT_ONLY OFF)

# The set of languages for which implicit dependencies are needed:
set(CMAKE_DEPENDS_LANGUAGES
  )

# The set of dependency files which are needed:
set(CMAKE_DEPENDS_DEPENDENCY_FILES
  "/work/main/src/nn/data.c" "CMakeFiles/gradkern_nn.dir/src/nn/data.c.o" "gcc" "CMakeFiles/gradkern_nn.dir/src/nn/data.c.o.d"
  "/work/main/src/nn/fileio.c" "CMakeFiles/gradkern_nn.dir/src/nn/fileio.c.o" "gcc" "CMakeFiles/gradkern_nn.dir/src/nn/fileio.c.o.d"
  "/work/main/src/nn/generate.c" "CMakeFiles/gradkern_nn.dir/src/nn/generate.c.o" "gcc" "CMakeFiles/gradkern_nn.dir/src/nn/generate.c.o.d"
  "/work/main/src/nn/layers.c" "CMakeFiles/gradkern_nn.dir/src/nn/layers.c.o" "gcc" "CMakeFiles/gradkern_nn.dir/src/nn/layers.c.o.d"
  "/work/main/src/nn/llama.c" "CMakeFiles/gradkern_nn.dir/src/nn/llama.c.o" "gcc" "CMakeFiles/gradkern_nn.dir/src/nn/llama.c.o.d"
  "/work/main/src/nn/mamba.c" "CMakeFiles/gradkern_nn.dir/src/nn/mamba.c.o" "gcc" "CMakeFiles/gradkern_nn.dir/src/nn/mamba.c.o.d"
  "/work/main/src/nn/model.c" "CMakeFiles/gradkern_nn.dir/src/nn/model.c.o" "gcc" "CMakeFiles/gradkern_nn.dir/src/nn/model.c.o.d"
  "/work/main/src/nn/plot.c" "CMakeFiles/gradkern_nn.dir/src/nn/plot.c.o" "gcc" "CMakeFiles/gradkern_nn.dir/src/nn/plot.c.o.d"
  "/work/main/src/nn/progress.c" "CMakeFiles/gradkern_nn.dir/src/nn/progress.c.o" "gcc" "CMakeFiles/gradkern_nn.dir/src/nn/progress.c.o.d"
  "/work/main/src/nn/rng.c" "CMakeFiles/gradkern_nn.dir/src/nn/rng.c.o" "gcc" "CMakeFiles/gradkern_nn.dir/src/nn/rng.c.o.d"
  "/work/main/src/nn/safetensors.c" "CMakeFiles/gradkern_nn.dir/src/nn/safetensors.c.o" "gcc" "CMakeFiles/gradkern_nn.dir/src/nn/safetensors.c.o.d"
  "/work/main/src/nn/schedule.c" "CMakeFiles/gradkern_nn.dir/src/nn/schedule.c.o" "gcc" "CMakeFiles/gradkern_nn.dir/src/nn/schedule.c.o.d"
  )

# Targets to which this target links.
set(CMAKE_TARGET_LINKED_INFO_FILES
  "/work/main/build-h/CMakeFiles/gradkern_static.dir/DependInfo.cmake"
  )

# Fortran module output directory.
set(CMAKE_Fortran_TARGET_MODULE_DIR "")
