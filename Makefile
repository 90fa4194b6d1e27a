# gradkern: the two commands are `make train` and `make test`.
BUILD ?= build
JOBS ?= 2
PREFIX ?= /usr/local

.PHONY: all build deps test-deps bench-deps fuzz-deps wasm-deps train test fuzz info bench bench-torch bench-wasm bench-webgpu wasm clean install uninstall paper

all: build

deps:
	@scripts/install-deps.sh build

test-deps:
	@scripts/install-deps.sh test

bench-deps:
	@scripts/install-deps.sh bench

fuzz-deps:
	@scripts/install-deps.sh fuzz

wasm-deps:
	@scripts/install-deps.sh wasm

# The library (shared and static) and the gradkern command only; make test
# builds the rest (tests, sanitizer builds, examples, timing programs).
build: deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release >/dev/null
	@cmake --build $(BUILD) -j $(JOBS) --target gradkern gradkern_static gradkern_cli

# WebAssembly (clang's wasm32-wasi target, cmake/wasm32-wasi.cmake): the
# library and the training code as static archives (libgradkern.a,
# libgradkern_nn.a, libgradkern_nn_args.a) and the modules, in $(BUILD)/wasm,
# with WebAssembly SIMD; then gradkern-plain.wasm, the same without SIMD,
# built in $(BUILD)/wasm-plain, gradkern-threads.wasm, the SIMD build with
# shared memory and a thread pool, in $(BUILD)/wasm-threads, and the two SIMD
# modules again with relaxed SIMD (clang 16), gradkern-relaxed.wasm and
# gradkern-relaxed-threads.wasm, in $(BUILD)/wasm-relaxed and
# $(BUILD)/wasm-relaxed-threads.
wasm: wasm-deps
	@cmake -S . -B $(BUILD)/wasm -DCMAKE_TOOLCHAIN_FILE=cmake/wasm32-wasi.cmake -DCMAKE_BUILD_TYPE=Release >/dev/null
	@cmake --build $(BUILD)/wasm -j $(JOBS)
	@cmake -S . -B $(BUILD)/wasm-plain -DCMAKE_TOOLCHAIN_FILE=cmake/wasm32-wasi.cmake -DCMAKE_BUILD_TYPE=Release \
	  -DGK_WASM_SIMD=OFF -DGK_WASM_OUT=$(abspath $(BUILD)/wasm) >/dev/null
	@cmake --build $(BUILD)/wasm-plain -j $(JOBS) --target gradkern_wasm
	@cmake -S . -B $(BUILD)/wasm-threads -DCMAKE_TOOLCHAIN_FILE=cmake/wasm32-wasi.cmake -DCMAKE_BUILD_TYPE=Release \
	  -DGK_WASM_THREADS=ON -DGK_WASM_OUT=$(abspath $(BUILD)/wasm) >/dev/null
	@cmake --build $(BUILD)/wasm-threads -j $(JOBS) --target gradkern_wasm
	@cmake -S . -B $(BUILD)/wasm-relaxed -DCMAKE_TOOLCHAIN_FILE=cmake/wasm32-wasi.cmake -DCMAKE_BUILD_TYPE=Release \
	  -DGK_WASM_RELAXED=ON -DGK_WASM_OUT=$(abspath $(BUILD)/wasm) >/dev/null
	@cmake --build $(BUILD)/wasm-relaxed -j $(JOBS) --target gradkern_wasm
	@cmake -S . -B $(BUILD)/wasm-relaxed-threads -DCMAKE_TOOLCHAIN_FILE=cmake/wasm32-wasi.cmake \
	  -DCMAKE_BUILD_TYPE=Release -DGK_WASM_RELAXED=ON -DGK_WASM_THREADS=ON \
	  -DGK_WASM_OUT=$(abspath $(BUILD)/wasm) >/dev/null
	@cmake --build $(BUILD)/wasm-relaxed-threads -j $(JOBS) --target gradkern_wasm

# The main job: a small Mamba trained on the selective-copying task
# (gradkern train --help for the options; TRAIN_ARGS adds some).
train: build
	$(BUILD)/gradkern train $(TRAIN_ARGS)

info: build
	$(BUILD)/gradkern info

# The Mamba paper's synthetic tables (selective copying; induction heads
# tested from 2^6 to 2^20 tokens), trained and tested on this machine:
# paper/results.md and paper/induction.svg (scripts/paper.py; PAPER_ARGS
# adds options: --only NAMES, --threads N, --seed S, --quick).
paper: build
	python3 scripts/paper.py --gradkern $(BUILD)/gradkern --out paper $(PAPER_ARGS)

# Every test: the C tests (also under ASan+UBSan, the concurrency test under
# ThreadSanitizer), the PyTorch parity tests, the install tests (C and pip),
# the WebAssembly tests in Node, the web page in headless Chromium and the npm
# package (make wasm first) with gcc; then the library, the C tests
# (ASan+UBSan too), the C install test and short fuzzer runs built by clang
# (the Vulkan backend's tests, slow on a CPU driver, run with gcc only).
test: test-deps build wasm node_modules/.package-lock.json
	@cmake --build $(BUILD) -j $(JOBS)
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)
	@cmake -S . -B $(BUILD)-clang -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=Release -DGK_FUZZ_OPT=-O0 -DGK_TSAN=OFF >/dev/null
	@cmake --build $(BUILD)-clang -j $(JOBS)
	cd $(BUILD)-clang && ctest --output-on-failure -j $(JOBS) -E 'python_parity|install_python|^wasm_|^web_training_page|^npm_package$$|vulkan'

# The npm packages of the tests (package.json at the root: puppeteer-core),
# installed from package-lock.json when missing or when it changed.
node_modules/.package-lock.json: package.json package-lock.json
	npm ci --no-audit --no-fund

# The libFuzzer targets (tests/fuzz), built by clang at -O1, each run for
# FUZZ_RUNS executions (make test runs them for 20 seconds each).
FUZZ_RUNS ?= 1000000
fuzz: fuzz-deps
	@cmake -S . -B $(BUILD)-fuzz -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=Release >/dev/null
	@cmake --build $(BUILD)-fuzz -j $(JOBS) --target fuzz_safetensors fuzz_plan fuzz_train_args fuzz_bpe
	scripts/fuzz.sh $(BUILD)-fuzz $(FUZZ_RUNS)

# Speed: every op against the triad bandwidth and OpenBLAS's sgemm
# measured in the same run; bench-torch adds PyTorch side by side.
# BENCH_ARGS adds options (--quick, --op NAME, --json; bench also
# --device vulkan, on the Vulkan device against its copy bandwidth;
# bench-torch also --tables kernels,user,overhead,model).
bench: bench-deps build
	$(BUILD)/gradkern bench $(BENCH_ARGS)

bench-torch: bench-deps build
	@cmake --build $(BUILD) -j $(JOBS) --target gradkern_python_module
	GRADKERN_LIB=$(BUILD)/libgradkern.so /usr/bin/python3 bench/vs_torch.py --gradkern $(BUILD)/gradkern $(BENCH_ARGS)

# The header, the libraries, the command, gradkern.pc and the CMake package
# under PREFIX (staged under DESTDIR when set); uninstall removes what the
# last install listed in $(BUILD)/install_manifest.txt.
install: build
	DESTDIR="$(DESTDIR)" cmake --install $(BUILD) --prefix "$(PREFIX)"

uninstall:
	DESTDIR="$(DESTDIR)" scripts/uninstall.sh $(BUILD)/install_manifest.txt

# WebAssembly speed (bench/wasm): every op in Node, gradkern.wasm on one
# thread (and gradkern-relaxed.wasm: Node's flag turns relaxed SIMD on)
# against the native library on one thread and TensorFlow.js's
# WebAssembly backend, in the same run (BENCH_ARGS: --quick, --op NAME, --json).
bench-wasm: bench-deps build wasm bench/wasm/node_modules/.package-lock.json
	node --no-liftoff --experimental-wasm-relaxed-simd bench/wasm/bench_wasm.mjs --gradkern $(BUILD)/gradkern $(BENCH_ARGS)

bench/wasm/node_modules/.package-lock.json: bench/wasm/package.json bench/wasm/package-lock.json
	cd bench/wasm && npm ci --no-audit --no-fund

# WebGPU speed (bench/webgpu): gradkern's WebGPU kernels against TensorFlow.js's
# WebGPU backend on the same adapter (Dawn in Node), in the same run.
bench-webgpu: wasm node_modules/.package-lock.json bench/webgpu/node_modules/.package-lock.json
	node bench/webgpu/bench_webgpu.mjs $(BENCH_ARGS)

bench/webgpu/node_modules/.package-lock.json: bench/webgpu/package.json bench/webgpu/package-lock.json
	cd bench/webgpu && npm ci --no-audit --no-fund

clean:
	rm -rf $(BUILD)
