"""The gradkern command's own options and messages: --version is the
library's version; info --help; an unknown command or option gets one hint;
bench checks --op against its benchmarks' names before measuring anything,
and counts one thread and one run in the singular.

Run through ctest (GRADKERN_BIN is the gradkern command it built)."""
import os
import subprocess

import pytest

import gradkern

BIN = os.environ.get("GRADKERN_BIN")
pytestmark = pytest.mark.skipif(not BIN, reason="GRADKERN_BIN is not set (run through ctest)")


def run(*args):
    return subprocess.run([BIN, *args], capture_output=True, timeout=120)


def test_version():
    r = run("--version")
    assert r.returncode == 0 and r.stdout.decode() == "gradkern %s\n" % gradkern.version()


def test_info_help():
    r = run("info", "--help")
    assert r.returncode == 0 and r.stdout.startswith(b"usage: gradkern info [--json]") and b"--json" in r.stdout


@pytest.mark.parametrize("args", [["nope"], ["info", "--nope"], ["bench", "--nope"], ["bench", "--op"],
                                  ["bench", "--device"], ["sample", "--nope"]])
def test_one_hint(args):
    r = run(*args)
    err = r.stderr.decode()
    assert r.returncode == 2 and not r.stdout
    assert err.count("--help") == 1 and err.count("\n") == 1, err


def test_bench_op_checked_first():
    r = run("bench", "--quick", "--op", "rmsnorn")
    err = r.stderr.decode()
    assert r.returncode == 2
    assert not r.stdout, "nothing is measured or printed before the check"
    assert "--op 'rmsnorn' matches no benchmark" in err
    for name in ("rmsnorm", "linear", "adamw", "train_mamba", "train_llama", "selective_scan"):
        assert name in err


def test_bench_counts_are_grammatical():
    r = subprocess.run([BIN, "bench", "--quick", "--op", "rmsnorm", "--repeat", "1"], capture_output=True,
                       timeout=300, env=dict(os.environ, GK_NUM_THREADS="1"))
    assert r.returncode == 0, r.stderr.decode()
    assert b"gradkern bench: 1 thread, median of up to 1 run after a warm-up" in r.stdout, r.stdout
