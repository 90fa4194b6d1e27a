# gradkern: the two commands are `make train` and `make test`.
BUILD ?= build
JOBS ?= 2

.PHONY: all build deps test-deps train test info clean

all: build

deps:
	@scripts/install-deps.sh build

test-deps:
	@scripts/install-deps.sh test

build: deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)

# The main job. Until the training program lands it prints what the library
# can run: every op, direction, dtype and backend with its kernel.
train: build
	$(BUILD)/gradkern info

info: build
	$(BUILD)/gradkern info

# Every test: the C tests (also under ASan+UBSan) and the PyTorch parity
# tests with gcc; then the library and C tests again built by clang.
test: test-deps build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)
	@cmake -S . -B $(BUILD)-clang -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=Release >/dev/null
	@cmake --build $(BUILD)-clang -j $(JOBS)
	cd $(BUILD)-clang && ctest --output-on-failure -j $(JOBS) -E python_parity

clean:
	rm -rf $(BUILD)
