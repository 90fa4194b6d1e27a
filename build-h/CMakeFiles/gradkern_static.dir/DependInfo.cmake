
# Consider dependencies only in project.
set(CMAKE_DEPENDS_IN_PROJECT_ONLY OFF)

# The set of languages for which implicit dependencies are needed:
set(CMAKE_DEPENDS_LANGUAGES
  )

# The set of dependency files which are needed:
set(CMAKE_DEPENDS_DEPENDENCY_FILES
  "/work/main/src/core/backend.c" "CMakeFiles/gradkern_static.dir/src/core/backend.c.o" "gcc" "CMakeFiles/gradkern_static.dir/src/core/backend.c.o.d"
  "/work/main/src/core/buffer.c" "CMakeFiles/gradkern_static.dir/src/core/buffer.c.o" "gcc" "CMakeFiles/gradkern_static.dir/src/core/buffer.c.o.d"
  "/work/main/src/core/dtype.c" "CMakeFiles/gradkern_static.dir/src/core/dtype.c.o" "gcc" "CMakeFiles/gradkern_static.dir/src/core/dtype.c.o.d"
  "/work/main/src/core/error.c" "CMakeFiles/gradkern_static.dir/src/core/error.c.o" "gcc" "CMakeFiles/gradkern_static.dir/src/core/error.c.o.d"
  "/work/main/src/core/isa.c" "CMakeFiles/gradkern_static.dir/src/core/isa.c.o" "gcc" "CMakeFiles/gradkern_static.dir/src/core/isa.c.o.d"
  "/work/main/src/core/plan.c" "CMakeFiles/gradkern_static.dir/src/core/plan.c.o" "gcc" "CMakeFiles/gradkern_static.dir/src/core/plan.c.o.d"
  "/work/main/src/core/tensor.c" "CMakeFiles/gradkern_static.dir/src/core/tensor.c.o" "gcc" "CMakeFiles/gradkern_static.dir/src/core/tensor.c.o.d"
  "/work/main/src/core/threads.c" "CMakeFiles/gradkern_static.dir/src/core/threads.c.o" "gcc" "CMakeFiles/gradkern_static.dir/src/core/threads.c.o.d"
  "/work/main/src/cpu/activation.c" "CMakeFiles/gradkern_static.dir/src/cpu/activation.c.o" "gcc" "CMakeFiles/gradkern_static.dir/src/cpu/activation.c.o.d"
  "/work/main/src/cpu/attention.c" "CMakeFiles/gradkern_static.dir/src/cpu/attention.c.o" "gcc" "CMakeFiles/gradkern_static.dir/src/cpu/attention.c.o.d"
  "/work/main/src/cpu/backend.c" "CMakeFiles/gradkern_static.dir/src/cpu/backend.c.o" "gcc" "CMakeFiles/gradkern_static.dir/src/cpu/backend.c.o.d"
  "/work/main/src/cpu/binary.c" "CMakeFiles/gradkern_static.dir/src/cpu/binary.c.o" "gcc" "CMakeFiles/gradkern_static.dir/src/cpu/binary.c.o.d"
  "/work/main/src/cpu/conv1d.c" "CMakeFiles/gradkern_static.dir/src/cpu/conv1d.c.o" "gcc" "CMakeFiles/gradkern_static.dir/src/cpu/conv1d.c.o.d"
  "/work/main/src/cpu/cross_entropy.c" "CMakeFiles/gradkern_static.dir/src/cpu/cross_entropy.c.o" "gcc" "CMakeFiles/gradkern_static.dir/src/cpu/cross_entropy.c.o.d"
  "/work/main/src/cpu/embedding.c" "CMakeFiles/gradkern_static.dir/src/cpu/embedding.c.o" "gcc" "CMakeFiles/gradkern_static.dir/src/cpu/embedding.c.o.d"
  "/work/main/src/cpu/gemm.c" "CMakeFiles/gradkern_static.dir/src/cpu/gemm.c.o" "gcc" "CMakeFiles/gradkern_static.dir/src/cpu/gemm.c.o.d"
  "/work/main/src/cpu/linear.c" "CMakeFiles/gradkern_static.dir/src/cpu/linear.c.o" "gcc" "CMakeFiles/gradkern_static.dir/src/cpu/linear.c.o.d"
  "/work/main/src/cpu/norm.c" "CMakeFiles/gradkern_static.dir/src/cpu/norm.c.o" "gcc" "CMakeFiles/gradkern_static.dir/src/cpu/norm.c.o.d"
  "/work/main/src/cpu/rope.c" "CMakeFiles/gradkern_static.dir/src/cpu/rope.c.o" "gcc" "CMakeFiles/gradkern_static.dir/src/cpu/rope.c.o.d"
  "/work/main/src/cpu/scan.c" "CMakeFiles/gradkern_static.dir/src/cpu/scan.c.o" "gcc" "CMakeFiles/gradkern_static.dir/src/cpu/scan.c.o.d"
  "/work/main/src/cpu/softmax.c" "CMakeFiles/gradkern_static.dir/src/cpu/softmax.c.o" "gcc" "CMakeFiles/gradkern_static.dir/src/cpu/softmax.c.o.d"
  "/work/main/src/ops/activation.c" "CMakeFiles/gradkern_static.dir/src/ops/activation.c.o" "gcc" "CMakeFiles/gradkern_static.dir/src/ops/activation.c.o.d"
  "/work/main/src/ops/attention.c" "CMakeFiles/gradkern_static.dir/src/ops/attention.c.o" "gcc" "CMakeFiles/gradkern_static.dir/src/ops/attention.c.o.d"
  "/work/main/src/ops/binary.c" "CMakeFiles/gradkern_static.dir/src/ops/binary.c.o" "gcc" "CMakeFiles/gradkern_static.dir/src/ops/binary.c.o.d"
  "/work/main/src/ops/conv1d.c" "CMakeFiles/gradkern_static.dir/src/ops/conv1d.c.o" "gcc" "CMakeFiles/gradkern_static.dir/src/ops/conv1d.c.o.d"
  "/work/main/src/ops/cross_entropy.c" "CMakeFiles/gradkern_static.dir/src/ops/cross_entropy.c.o" "gcc" "CMakeFiles/gradkern_static.dir/src/ops/cross_entropy.c.o.d"
  "/work/main/src/ops/embedding.c" "CMakeFiles/gradkern_static.dir/src/ops/embedding.c.o" "gcc" "CMakeFiles/gradkern_static.dir/src/ops/embedding.c.o.d"
  "/work/main/src/ops/linear.c" "CMakeFiles/gradkern_static.dir/src/ops/linear.c.o" "gcc" "CMakeFiles/gradkern_static.dir/src/ops/linear.c.o.d"
  "/work/main/src/ops/norm.c" "CMakeFiles/gradkern_static.dir/src/ops/norm.c.o" "gcc" "CMakeFiles/gradkern_static.dir/src/ops/norm.c.o.d"
  "/work/main/src/ops/rope.c" "CMakeFiles/gradkern_static.dir/src/ops/rope.c.o" "gcc" "CMakeFiles/gradkern_static.dir/src/ops/rope.c.o.d"
  "/work/main/src/ops/scan.c" "CMakeFiles/gradkern_static.dir/src/ops/scan.c.o" "gcc" "CMakeFiles/gradkern_static.dir/src/ops/scan.c.o.d"
  "/work/main/src/ops/softmax.c" "CMakeFiles/gradkern_static.dir/src/ops/softmax.c.o" "gcc" "CMakeFiles/gradkern_static.dir/src/ops/softmax.c.o.d"
  "/work/main/src/optim/optim.c" "CMakeFiles/gradkern_static.dir/src/optim/optim.c.o" "gcc" "CMakeFiles/gradkern_static.dir/src/optim/optim.c.o.d"
  "/work/main/src/ref/activation.c" "CMakeFiles/gradkern_static.dir/src/ref/activation.c.o" "gcc" "CMakeFiles/gradkern_static.dir/src/ref/activation.c.o.d"
  "/work/main/src/ref/attention.c" "CMakeFiles/gradkern_static.dir/src/ref/attention.c.o" "gcc" "CMakeFiles/gradkern_static.dir/src/ref/attention.c.o.d"
  "/work/main/src/ref/backend.c" "CMakeFiles/gradkern_static.dir/src/ref/backend.c.o" "gcc" "CMakeFiles/gradkern_static.dir/src/ref/backend.c.o.d"
  "/work/main/src/ref/binary.c" "CMakeFiles/gradkern_static.dir/src/ref/binary.c.o" "gcc" "CMakeFiles/gradkern_static.dir/src/ref/binary.c.o.d"
  "/work/main/src/ref/conv1d.c" "CMakeFiles/gradkern_static.dir/src/ref/conv1d.c.o" "gcc" "CMakeFiles/gradkern_static.dir/src/ref/conv1d.c.o.d"
  "/work/main/src/ref/cross_entropy.c" "CMakeFiles/gradkern_static.dir/src/ref/cross_entropy.c.o" "gcc" "CMakeFiles/gradkern_static.dir/src/ref/cross_entropy.c.o.d"
  "/work/main/src/ref/embedding.c" "CMakeFiles/gradkern_static.dir/src/ref/embedding.c.o" "gcc" "CMakeFiles/gradkern_static.dir/src/ref/embedding.c.o.d"
  "/work/main/src/ref/linear.c" "CMakeFiles/gradkern_static.dir/src/ref/linear.c.o" "gcc" "CMakeFiles/gradkern_static.dir/src/ref/linear.c.o.d"
  "/work/main/src/ref/norm.c" "CMakeFiles/gradkern_static.dir/src/ref/norm.c.o" "gcc" "CMakeFiles/gradkern_static.dir/src/ref/norm.c.o.d"
  "/work/main/src/ref/rope.c" "CMakeFiles/gradkern_static.dir/src/ref/rope.c.o" "gcc" "CMakeFiles/gradkern_static.dir/src/ref/rope.c.o.d"
  "/work/main/src/ref/scan.c" "CMakeFiles/gradkern_static.dir/src/ref/scan.c.o" "gcc" "CMakeFiles/gradkern_static.dir/src/ref/scan.c.o.d"
  "/work/main/src/ref/softmax.c" "CMakeFiles/gradkern_static.dir/src/ref/softmax.c.o" "gcc" "CMakeFiles/gradkern_static.dir/src/ref/softmax.c.o.d"
  )

# Targets to which this target links.
set(CMAKE_TARGET_LINKED_INFO_FILES
  )

# Fortran module output directory.
set(CMAKE_Fortran_TARGET_MODULE_DIR "")
