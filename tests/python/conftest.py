"""pytest setup for the gradkern PyTorch tests.

The package finds libgradkern.so itself (GRADKERN_LIB, else <repo>/build);
here we only make `import gradkern` work without PYTHONPATH, and print the
largest errors seen per dtype at the end of the run.

Run: GRADKERN_LIB=build/libgradkern.so PYTHONPATH=python /usr/bin/python3 -m pytest -q tests/python
"""
import os
import sys

import pytest

_REPO = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

try:
    import gradkern  # noqa: F401
except ModuleNotFoundError:
    sys.path.insert(0, os.path.join(_REPO, "python"))

_STATS = {}


@pytest.fixture(scope="session")
def errstats():
    """dict: dtype name -> {'abs': max |a - r| / max|r|, 'rel': max elementwise
    |a - r| / |r| (where |r| >= 1e-3 max|r|), 'ratio': max error / allowed,
    'where': test of the largest ratio, 'n': tensors compared, 'refs': {mode: n}}."""
    return _STATS


def pytest_terminal_summary(terminalreporter):
    if not _STATS:
        return
    tr = terminalreporter
    tr.write_sep("-", "gradkern vs torch: largest errors per dtype")
    for name in ("float64", "float32", "bfloat16", "float16"):
        s = _STATS.get(name)
        if not s:
            continue
        refs = ", ".join("%s %d" % kv for kv in sorted(s["refs"].items()))
        tr.write_line("%-8s tensors %5d  max abs/max|ref| %.3g  max rel %.3g  max err/tol %.3f  (%s)"
                      % (name, s["n"], s["abs"], s["rel"], s["ratio"], s["where"]))
        tr.write_line("%-8s references: %s" % ("", refs))
