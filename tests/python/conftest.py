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
    import gradkern
except ModuleNotFoundError:
    sys.path.insert(0, os.path.join(_REPO, "python"))
    import gradkern

_STATS = {}


@pytest.fixture
def restore_threads():
    """Put gradkern's thread count back after a test that changes it."""
    n = gradkern.get_num_threads()
    yield
    gradkern.set_num_threads(n)


@pytest.fixture(scope="session")
def errstats():
    """dict: (dtype name, oracle) -> {'ratio': largest error / allowed,
    'where': the test and output of it, 'rel': largest relative error and
    'ulp': largest error in ulps of the dtype, both on well-conditioned
    elements, 'n': tensors compared}."""
    return _STATS


_ORDER = {"float64": 0, "float32": 1, "bfloat16": 2, "float16": 3}


def _write_stats(tr, stats, prefix=""):
    for (dtype, oracle), s in sorted(stats.items(), key=lambda kv: (_ORDER.get(kv[0][0], 9), kv[0][1])):
        tr.write_line("%s%-8s vs %-25s %4d tensors: max rel %-8.2g max ulp %-7.3g max err/tol %-7.3g at %s"
                      % (prefix, dtype, oracle, s["n"], s["rel"], s["ulp"], s["ratio"], s["where"]))


def pytest_terminal_summary(terminalreporter):
    tr = terminalreporter
    if _STATS:
        tr.write_sep("-", "gradkern vs references: largest errors per dtype")
        _write_stats(tr, _STATS)
    # per op, recorded by tests/python/helpers.py (transformer and Mamba ops)
    helpers = sys.modules.get("helpers")
    opstats = getattr(helpers, "OPSTATS", None)
    if opstats:
        tr.write_sep("-", "gradkern vs references: largest errors per op and dtype")
        for op in sorted(opstats):
            _write_stats(tr, opstats[op], "%-15s " % op)
