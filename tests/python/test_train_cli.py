"""`gradkern train` end to end: it learns, a resumed run is bit-identical to
a straight one, a NaN stops the run, and bad input gets a message and a
non-zero exit."""
import os
import subprocess
import xml.etree.ElementTree as ET

import pytest

BIN = os.environ.get("GRADKERN_BIN")
pytestmark = pytest.mark.skipif(not BIN, reason="GRADKERN_BIN is not set (run through ctest)")

TINY = ["--width", "16", "--batch", "4", "--warmup", "2", "--eval-every", "0", "--eval-batches", "1"]


def train(*args, cwd=None):
    return subprocess.run([BIN, "train", *args], capture_output=True, text=True, cwd=cwd, timeout=600)


def final_figures(out):
    line = [l for l in out.splitlines() if l.startswith("final train loss")][-1]
    words = line.replace(",", "").replace("%", "").split()
    return float(words[3]), float(words[words.index("accuracy") + 1])


def test_learns_selective_copying():
    # The default model, a short schedule: the loss leaves chance, log 8 = 2.079.
    r = train("--steps", "250", "--warmup", "30", "--eval-every", "0", "--eval-batches", "2")
    assert r.returncode == 0, r.stderr
    loss, acc = final_figures(r.stdout)
    assert loss < 1.98 and acc > 18, r.stdout


def test_resume_is_bit_identical(tmp_path):
    straight, pieces = tmp_path / "straight.safetensors", tmp_path / "pieces.safetensors"
    assert train("--steps", "20", *TINY, "--checkpoint", str(straight)).returncode == 0
    r = train("--steps", "20", *TINY, "--checkpoint", str(pieces), "--stop-after", "10")
    assert r.returncode == 0, r.stderr
    r = train("--steps", "20", *TINY, "--checkpoint", str(pieces), "--resume", str(pieces))
    assert r.returncode == 0, r.stderr
    assert straight.read_bytes() == pieces.read_bytes()


def test_nan_stops_the_run(tmp_path):
    ck = tmp_path / "ck.safetensors"
    r = train("--steps", "30", "--lr", "10", "--weight-decay", "0", "--clip", "0", *TINY, "--warmup", "0",
              "--checkpoint", str(ck), "--checkpoint-every", "2")
    assert r.returncode == 1
    assert "step" in r.stderr and ("NaN" in r.stderr or "infinite" in r.stderr), r.stderr
    assert "last good checkpoint is " + str(ck) in r.stderr, r.stderr


def test_bad_input(tmp_path):
    empty = tmp_path / "empty.txt"
    empty.write_bytes(b"")
    cases = [
        (["--lr", "abc"], "--lr"),
        (["--lr", "nan"], "--lr"),
        (["--layers", "0"], "--layers"),
        (["--task", "text", "--data", str(tmp_path / "missing.txt")], "missing.txt"),
        (["--task", "text", "--data", str(empty)], "empty.txt"),
        (["--resume", str(tmp_path / "nothing.safetensors")], "nothing.safetensors"),
    ]
    for args, needle in cases:
        r = train(*args, "--steps", "5", *TINY)
        assert r.returncode != 0, args
        assert needle in r.stderr, (args, r.stderr)


def test_bad_checkpoints_and_no_overwrite(tmp_path):
    ck = tmp_path / "ck.safetensors"
    assert train("--steps", "4", *TINY, "--checkpoint", str(ck)).returncode == 0
    good = ck.read_bytes()
    # Another configuration.
    r = train("--steps", "8", *TINY, "--width", "24", "--resume", str(ck), "--checkpoint", str(ck))
    assert r.returncode != 0 and "another configuration" in r.stderr, r.stderr
    # Truncated at several points: a message, no crash, and the file left alone.
    for cut in (4, 8, 100, len(good) // 2, len(good) - 1):
        bad = tmp_path / ("cut%d.safetensors" % cut)
        bad.write_bytes(good[:cut])
        r = train("--steps", "8", *TINY, "--resume", str(bad), "--checkpoint", str(bad))
        assert r.returncode != 0 and r.returncode < 128, (cut, r.returncode, r.stderr)
        assert str(bad) in r.stderr, r.stderr
        assert bad.read_bytes() == good[:cut]
    assert ck.read_bytes() == good


def test_llama_induction_text_and_plot(tmp_path):
    r = train("--model", "llama", "--heads", "4", "--kv-heads", "2", "--steps", "5", *TINY)
    assert r.returncode == 0, r.stderr
    r = train("--task", "induction", "--steps", "5", *TINY)
    assert r.returncode == 0, r.stderr
    text = tmp_path / "text.txt"
    text.write_bytes(b"the quick brown fox jumps over the lazy dog. " * 200)
    plot = tmp_path / "loss.svg"
    r = train("--task", "text", "--data", str(text), "--steps", "6", *TINY, "--seq-len", "32",
              "--eval-every", "3", "--plot", str(plot))
    assert r.returncode == 0, r.stderr
    assert "bits per byte" in r.stdout
    root = ET.parse(plot).getroot()
    assert root.tag.endswith("svg")
