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

# Every test: the C tests (also under ASan+UBSan) and the PyTorch parity tests.
test: test-deps build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

clean:
	rm -rf $(BUILD)
