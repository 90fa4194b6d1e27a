file(REMOVE_RECURSE
  "CMakeFiles/gradkern_nn.dir/src/nn/data.c.o"
  "CMakeFiles/gradkern_nn.dir/src/nn/data.c.o.d"
  "CMakeFiles/gradkern_nn.dir/src/nn/fileio.c.o"
  "CMakeFiles/gradkern_nn.dir/src/nn/fileio.c.o.d"
  "CMakeFiles/gradkern_nn.dir/src/nn/generate.c.o"
  "CMakeFiles/gradkern_nn.dir/src/nn/generate.c.o.d"
  "CMakeFiles/gradkern_nn.dir/src/nn/layers.c.o"
  "CMakeFiles/gradkern_nn.dir/src/nn/layers.c.o.d"
  "CMakeFiles/gradkern_nn.dir/src/nn/llama.c.o"
  "CMakeFiles/gradkern_nn.dir/src/nn/llama.c.o.d"
  "CMakeFiles/gradkern_nn.dir/src/nn/mamba.c.o"
  "CMakeFiles/gradkern_nn.dir/src/nn/mamba.c.o.d"
  "CMakeFiles/gradkern_nn.dir/src/nn/model.c.o"
  "CMakeFiles/gradkern_nn.dir/src/nn/model.c.o.d"
  "CMakeFiles/gradkern_nn.dir/src/nn/plot.c.o"
  "CMakeFiles/gradkern_nn.dir/src/nn/plot.c.o.d"
  "CMakeFiles/gradkern_nn.dir/src/nn/progress.c.o"
  "CMakeFiles/gradkern_nn.dir/src/nn/progress.c.o.d"
  "CMakeFiles/gradkern_nn.dir/src/nn/rng.c.o"
  "CMakeFiles/gradkern_nn.dir/src/nn/rng.c.o.d"
  "CMakeFiles/gradkern_nn.dir/src/nn/safetensors.c.o"
  "CMakeFiles/gradkern_nn.dir/src/nn/safetensors.c.o.d"
  "CMakeFiles/gradkern_nn.dir/src/nn/schedule.c.o"
  "CMakeFiles/gradkern_nn.dir/src/nn/schedule.c.o.d"
  "libgradkern_nn.a"
  "libgradkern_nn.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/gradkern_nn.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
