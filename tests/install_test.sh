#!/usr/bin/env bash
# The installed gradkern, used from outside the tree (ctests install_c and
# install_python):
#   tests/install_test.sh c      SOURCE_DIR BUILD_DIR
#     install staged under DESTDIR (every file in place, the SONAME and its
#     links), uninstall; then install into a temporary prefix, build
#     examples/consumer against it with pkg-config and with CMake's
#     find_package (shared and static), run them, and the installed command;
#     uninstall leaves no file in the prefix.
#   tests/install_test.sh python SOURCE_DIR BUILD_DIR
#     pip-install the binding (Debian's setuptools, no network) into a virtual
#     environment seeing Debian's torch, once with the library bundled and once
#     without it, against the library installed into the environment's prefix;
#     run examples/consumer/autograd.py and `python3 -m gradkern info` through
#     each, with neither PYTHONPATH nor GRADKERN_LIB set.
# The build tree's install_manifest.txt (a real install's) is put back after.
set -euo pipefail
what=${1:?usage: tests/install_test.sh c|python SOURCE_DIR BUILD_DIR}
src=$(cd "${2:?}" && pwd)
build=$(cd "${3:?}" && pwd)
unset PYTHONPATH GRADKERN_LIB DESTDIR
tmp=$(mktemp -d)
manifest=$build/install_manifest.txt
[ -f "$manifest" ] && cp "$manifest" "$tmp/manifest.saved"
cleanup() {
  if [ -f "$tmp/manifest.saved" ]; then cp "$tmp/manifest.saved" "$manifest"; else rm -f "$manifest"; fi
  rm -rf "$tmp"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
version=$(sed -n 's/^#define GK_VERSION_\(MAJOR\|MINOR\|PATCH\) \([0-9]*\)$/\2/p' "$src/include/gradkern.h" | paste -sd.)
major=${version%%.*}
libdir=lib  # CMAKE_INSTALL_LIBDIR for a prefix other than /usr
[ -n "$(sed -n 's/^CMAKE_INSTALL_LIBDIR:PATH=//p' "$build/CMakeCache.txt")" ] &&
  libdir=$(sed -n 's/^CMAKE_INSTALL_LIBDIR:PATH=//p' "$build/CMakeCache.txt")

# uninstall_check PREFIX_ON_DISK [DESTDIR]: make uninstall's script removes
# every file of the manifest and leaves no file under the prefix.
uninstall_check() {
  DESTDIR=${2:-} "$src/scripts/uninstall.sh" "$manifest" >/dev/null
  while IFS= read -r f || [ -n "$f" ]; do
    if [ -e "${2:-}$f" ] || [ -L "${2:-}$f" ]; then fail "uninstall left ${2:-}$f"; fi
  done < "$manifest"
  left=$(find "$1" ! -type d)
  [ -z "$left" ] || fail "uninstall left files under $1: $left"
  echo "uninstall: the $(grep -c '' "$manifest") files of the manifest removed, no file left under $1"
}

if [ "$what" = c ]; then
  # Staged: everything lands under DESTDIR/PREFIX, nothing elsewhere.
  stage=$tmp/stage prefix=/opt/gradkern-install-test
  DESTDIR=$stage cmake --install "$build" --prefix "$prefix" >/dev/null
  for f in include/gradkern.h "$libdir/libgradkern.so.$version" "$libdir/libgradkern.a" bin/gradkern \
           "$libdir/pkgconfig/gradkern.pc" "$libdir/cmake/gradkern/gradkernConfig.cmake" \
           "$libdir/cmake/gradkern/gradkernConfigVersion.cmake" "$libdir/cmake/gradkern/gradkernTargets.cmake"; do
    [ -f "$stage$prefix/$f" ] || fail "not installed: $prefix/$f"
  done
  [ "$(readlink "$stage$prefix/$libdir/libgradkern.so.$major")" = "libgradkern.so.$version" ] ||
    fail "libgradkern.so.$major is not a link to libgradkern.so.$version"
  [ "$(readlink "$stage$prefix/$libdir/libgradkern.so")" = "libgradkern.so.$major" ] ||
    fail "libgradkern.so is not a link to libgradkern.so.$major"
  # (grep -q reads here-strings: on a pipe it may exit before the writer is
  # done, which pipefail would count as a failure.)
  dynamic=$(readelf -d "$stage$prefix/$libdir/libgradkern.so.$version")
  grep -q "Library soname: \[libgradkern.so.$major\]" <<< "$dynamic" ||
    fail "the SONAME of libgradkern.so.$version is not libgradkern.so.$major"
  grep -q "^prefix=$prefix\$" "$stage$prefix/$libdir/pkgconfig/gradkern.pc" || fail "gradkern.pc does not name $prefix"
  outside=$(grep -v "^$prefix/" "$manifest" || true)
  [ -z "$outside" ] || fail "installed outside the prefix: $outside"
  echo "staged install: $(grep -c '' "$manifest") files under DESTDIR$prefix, SONAME libgradkern.so.$major"
  uninstall_check "$stage$prefix" "$stage"

  # Into a prefix, then used the ways a project would.
  prefix=$tmp/prefix
  cmake --install "$build" --prefix "$prefix" >/dev/null
  [ "$("$prefix/bin/gradkern" --version)" = "gradkern $version" ] || fail "installed gradkern --version"
  export PKG_CONFIG_PATH=$prefix/$libdir/pkgconfig
  [ "$(pkg-config --modversion gradkern)" = "$version" ] || fail "pkg-config --modversion gradkern"
  # shellcheck disable=SC2046
  cc -std=c11 -Wall -Werror -o "$tmp/consumer_pkgconfig" "$src/examples/consumer/main.c" \
     $(pkg-config --cflags --libs gradkern) -lm -Wl,-rpath,"$(pkg-config --variable=libdir gradkern)"
  cmake -S "$src/examples/consumer" -B "$tmp/consumer" -DCMAKE_PREFIX_PATH="$prefix" \
        -DCMAKE_C_FLAGS="-Wall -Werror" >/dev/null
  cmake --build "$tmp/consumer" >/dev/null
  for exe in "$tmp/consumer_pkgconfig" "$tmp/consumer/consumer_shared" "$tmp/consumer/consumer_static"; do
    out=$("$exe") || fail "$exe failed"
    echo "$(basename "$exe"): $out"
  done
  for exe in "$tmp/consumer_pkgconfig" "$tmp/consumer/consumer_shared"; do
    libs=$(ldd "$exe")
    grep -q "libgradkern.so.$major => $prefix/$libdir/libgradkern.so.$major" <<< "$libs" ||
      fail "$exe does not load the installed library: $libs"
  done
  libs=$(ldd "$tmp/consumer/consumer_static")
  if grep -q libgradkern <<< "$libs"; then fail "consumer_static loads libgradkern.so: $libs"; fi
  uninstall_check "$prefix"

elif [ "$what" = python ]; then
  # The checkout's python/ and header (setup.py reads the version there),
  # copied so that setuptools' build files stay out of the source tree.
  mkdir -p "$tmp/src/include"
  cp -r "$src/python" "$tmp/src/python"
  cp "$src/include/gradkern.h" "$tmp/src/include/"
  cd "$tmp"
  # check_env VENV: the example and `python3 -m gradkern info` through it; the
  # library loaded must be the one under VENV (bundled or installed there).
  check_env() {
    out=$("$1/bin/python" "$src/examples/consumer/autograd.py") || fail "autograd.py in $1"
    echo "$out"
    info=$("$1/bin/python" -m gradkern info) || fail "python3 -m gradkern info in $1"
    grep -q "^gradkern $version\$" <<< "$info" || fail "python3 -m gradkern info: $info"
    grep -q "^library  $1/" <<< "$info" || fail "the library loaded is not under $1: $info"
    # pip compiled the binding's module gradkern._gkrun (make test installs the Python headers)
    grep -q "^binding  extension\$" <<< "$info" || fail "gradkern._gkrun was not built or not loaded: $info"
  }
  venv=$tmp/bundled
  /usr/bin/python3 -m venv --system-site-packages --without-pip "$venv"
  GRADKERN_BUNDLE=$build/libgradkern.so "$venv/bin/python" -m pip install -q --no-build-isolation --no-index \
    "$tmp/src/python" || fail "pip install with the library bundled"
  check_env "$venv"

  venv=$tmp/installed
  /usr/bin/python3 -m venv --system-site-packages --without-pip "$venv"
  rm -rf "$tmp/src/python/build"
  GRADKERN_BUNDLE=none "$venv/bin/python" -m pip install -q --no-build-isolation --no-index \
    "$tmp/src/python" || fail "pip install without the library"
  [ -z "$(find "$venv" -name 'libgradkern*')" ] || fail "GRADKERN_BUNDLE=none bundled a library"
  cmake --install "$build" --prefix "$venv" >/dev/null
  check_env "$venv"
  "$src/scripts/uninstall.sh" "$manifest" >/dev/null
  # Neither bundled nor in the environment: the dynamic loader's search path.
  cmake --install "$build" --prefix "$tmp/elsewhere" >/dev/null
  info=$(LD_LIBRARY_PATH=$tmp/elsewhere/$libdir "$venv/bin/python" -m gradkern info) ||
    fail "python3 -m gradkern info with the library on LD_LIBRARY_PATH"
  grep -q "^library  $tmp/elsewhere/$libdir/libgradkern.so\$" <<< "$info" ||
    fail "the library on LD_LIBRARY_PATH is not the one loaded: $info"
  echo "without a bundled library: $(grep '^library' <<< "$info")"
  "$src/scripts/uninstall.sh" "$manifest" >/dev/null
else
  fail "unknown mode '$what' (c or python)"
fi
