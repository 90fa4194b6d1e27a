"""Builds the gradkern package, with the C library bundled in it.

    pip install ./python --no-build-isolation

The version is the C library's (GK_VERSION_* in include/gradkern.h). The
package carries libgradkern.so beside its modules, where gradkern/_lib.py
looks first. GRADKERN_BUNDLE chooses the library:
    unset              the repository's build/libgradkern.so, built first with
                       CMake (`cmake --build build --target gradkern`; a
                       no-op when `make` already built it)
    a path             that libgradkern.so
    none               no library in the package: it loads the one `make
                       install` put in the environment's prefix
                       (PREFIX=$VIRTUAL_ENV) or on the loader's path

It also compiles the binding's optional module gradkern._gkrun
(gradkern/_gkrun.cpp: the CPython C API and torch's C++ headers) with
torch's extension builder when a C++ compiler, this Python's headers and
torch's C++ headers are there; where they are not, the package is installed
without it and calls the library through ctypes.
"""
import os
import re
import shutil
import subprocess

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)


def version():
    with open(os.path.join(REPO, "include", "gradkern.h")) as f:
        header = f.read()
    parts = [re.search(r"^#define GK_VERSION_%s (\d+)$" % p, header, re.M) for p in ("MAJOR", "MINOR", "PATCH")]
    if not all(parts):
        raise SystemExit("setup.py: include/gradkern.h has no #define GK_VERSION_MAJOR/MINOR/PATCH N")
    return ".".join(m.group(1) for m in parts)


def library_to_bundle():
    """The path of the libgradkern.so to put in the package, or None."""
    choice = os.environ.get("GRADKERN_BUNDLE", "")
    if choice == "none":
        return None
    if choice:
        if not os.path.isfile(choice):
            raise SystemExit("setup.py: GRADKERN_BUNDLE=%r is not a file" % choice)
        return choice
    build = os.path.join(REPO, "build")
    if not os.path.isfile(os.path.join(build, "CMakeCache.txt")):
        subprocess.check_call(["cmake", "-S", REPO, "-B", build, "-DCMAKE_BUILD_TYPE=Release"])
    subprocess.check_call(["cmake", "--build", build, "-j", "2", "--target", "gradkern"])
    return os.path.join(build, "libgradkern.so")


class BuildWithLibrary(build_py):
    def run(self):
        super().run()
        library, bundled = library_to_bundle(), os.path.join(self.build_lib, "gradkern", "libgradkern.so")
        if library:
            shutil.copyfile(library, bundled)
        elif os.path.exists(bundled):
            os.remove(bundled)  # an earlier build's, not to be packaged


try:  # torch's extension builder: its include and library paths, C++17, its C++ ABI
    from torch.utils.cpp_extension import BuildExtension as TorchBuildExt, CppExtension
except ImportError:
    TorchBuildExt = CppExtension = None


class OptionalBuildExt(TorchBuildExt or build_ext):
    """gradkern._gkrun is optional: a failed compile leaves it out."""

    def build_extension(self, ext):
        try:
            super().build_extension(ext)
        except Exception as e:  # no compiler, no Python.h or torch headers: the ctypes path serves
            print("setup.py: gradkern._gkrun not built (%s); the binding will use ctypes" % e)


# The wheel is for this platform (the module, the bundled library), so the
# extension is declared even where it cannot be built.
if CppExtension is not None:
    GKRUN = CppExtension("gradkern._gkrun", ["gradkern/_gkrun.cpp"], include_dirs=[os.path.join(REPO, "include")],
                         extra_compile_args=["-std=c++17"])
else:
    GKRUN = Extension("gradkern._gkrun", ["gradkern/_gkrun.cpp"], include_dirs=[os.path.join(REPO, "include")])

setup(version=version(), cmdclass={"build_py": BuildWithLibrary, "build_ext": OptionalBuildExt},
      ext_modules=[GKRUN])
