"""`gradkern sample` end to end: train tiny Mamba and LLaMA text models for a
few steps with `gradkern train --task text`, then sample from their
checkpoints: greedy sampling prints exactly --tokens bytes, the same ones on
every run; seeded sampling repeats with the same seed; checkpoints that are
missing, corrupt or not of a text model give a clear error, not a crash.

Run through ctest (GRADKERN_BIN is the gradkern command it built)."""
import os
import random
import subprocess

import pytest

BIN = os.environ.get("GRADKERN_BIN")
pytestmark = pytest.mark.skipif(not BIN, reason="GRADKERN_BIN is not set (run through ctest)")

COMMON = ["--steps", "5", "--warmup", "1", "--eval-batches", "1", "--quiet", "--width", "16", "--layers", "1",
          "--batch", "2", "--seq-len", "32"]


def run(*args):
    return subprocess.run([BIN, *args], capture_output=True, timeout=120)


@pytest.fixture(scope="module")
def text_file(tmp_path_factory):
    rng = random.Random(0)
    words = "the quick brown fox jumps over a lazy dog and then runs far away".split()
    path = tmp_path_factory.mktemp("data") / "text.txt"
    path.write_text(" ".join(rng.choice(words) for _ in range(800)))
    return path


@pytest.fixture(scope="module", params=["mamba", "llama"])
def checkpoint(request, text_file, tmp_path_factory):
    path = tmp_path_factory.mktemp(request.param) / "model.safetensors"
    extra = ["--heads", "2", "--kv-heads", "1"] if request.param == "llama" else []
    r = run("train", "--model", request.param, "--task", "text", "--data", str(text_file), *COMMON, *extra,
            "--checkpoint", str(path))
    assert r.returncode == 0, r.stderr.decode()
    return path


def test_greedy_is_deterministic(checkpoint):
    outs = []
    for _ in range(2):
        r = run("sample", "--checkpoint", str(checkpoint), "--tokens", "10", "--temperature", "0")
        assert r.returncode == 0, r.stderr.decode()
        outs.append(r.stdout)
    assert len(outs[0]) == 10
    assert outs[0] == outs[1]


def test_seeded_sampling_repeats(checkpoint):
    args = ["sample", "--checkpoint", str(checkpoint), "--prompt", "the ", "--tokens", "30", "--temperature", "1.5",
            "--top-k", "50"]
    a = run(*args, "--seed", "5")
    b = run(*args, "--seed", "5")
    c = run(*args, "--seed", "6")
    assert a.returncode == 0 and b.returncode == 0 and c.returncode == 0, a.stderr.decode()
    assert len(a.stdout) == 30
    assert a.stdout == b.stdout
    assert a.stdout != c.stdout  # 30 draws at temperature 1.5 from a barely trained model


def test_refuses_bad_checkpoints(tmp_path, checkpoint):
    copy_ckpt = tmp_path / "copy.safetensors"
    r = run("train", "--task", "copy", "--steps", "1", "--warmup", "1", "--eval-batches", "1", "--quiet",
            "--checkpoint", str(copy_ckpt))
    assert r.returncode == 0, r.stderr.decode()
    r = run("sample", "--checkpoint", str(copy_ckpt))
    assert r.returncode == 1 and not r.stdout
    assert b"task copy" in r.stderr and b"--task text" in r.stderr

    r = run("sample", "--checkpoint", str(tmp_path / "missing.safetensors"))
    assert r.returncode == 1 and b"missing.safetensors" in r.stderr

    truncated = tmp_path / "truncated.safetensors"
    truncated.write_bytes(checkpoint.read_bytes()[:200])
    r = run("sample", "--checkpoint", str(truncated))
    assert r.returncode == 1 and b"truncated.safetensors" in r.stderr

    r = run("sample", "--tokens", "5")
    assert r.returncode == 2 and b"--checkpoint" in r.stderr
    r = run("sample", "--checkpoint", str(checkpoint), "--temperature", "-1")
    assert r.returncode == 2 and b"--temperature" in r.stderr


def test_help_states_the_limits():
    r = run("sample", "--help")
    assert r.returncode == 0
    out = r.stdout.decode()
    assert "--tokens is at most 16777216" in out
    assert "from 1e-300" in out and "to 100" in out
    assert "restarts" in out and "N/2" in out and "Mamba model has no limit" in out


def test_bounds_and_one_hint(checkpoint):
    r = run("sample", "--checkpoint", str(checkpoint), "--tokens", "16777217")
    err = r.stderr.decode()
    assert r.returncode == 2 and not r.stdout
    assert "--tokens" in err and "16777217" in err and "16777216" in err
    assert err.count("--help") == 1, err
    r = run("sample", "--checkpoint", str(checkpoint), "--tokens", "16777216", "--top-k", "-1")
    assert r.returncode == 2 and r.stderr.decode().count("--help") == 1
    r = run("sample", "--bogus")
    assert r.returncode == 2 and r.stderr.decode().count("--help") == 1, r.stderr


def test_tiny_temperature_is_greedy(checkpoint):
    args = ["sample", "--checkpoint", str(checkpoint), "--prompt", "the ", "--tokens", "20"]
    greedy = run(*args, "--temperature", "0")
    tiny = run(*args, "--temperature", "1e-300")
    assert greedy.returncode == 0 and tiny.returncode == 0, tiny.stderr.decode()
    assert len(tiny.stdout) == 20 and tiny.stdout == greedy.stdout


def test_past_the_trained_context(checkpoint):
    """The models were trained on 32-byte sequences. LLaMA reads the last 32
    bytes of a longer prompt (and says so), so its text is the one from
    those 32 bytes alone; Mamba reads it all, silently. Either generates past
    32 bytes."""
    long_prompt = "the quick brown fox jumps over a lazy dog and then runs far away " * 3
    args = ["--checkpoint", str(checkpoint), "--tokens", "100", "--temperature", "0"]
    whole = run("sample", "--prompt", long_prompt, *args)
    tail = run("sample", "--prompt", long_prompt[-32:], *args)
    assert whole.returncode == 0 and tail.returncode == 0, whole.stderr.decode()
    assert len(whole.stdout) == 100
    if "llama" in str(checkpoint):
        assert b"longer than the 32 the model was trained on" in whole.stderr, whole.stderr
        assert whole.stdout == tail.stdout
    else:
        assert not whole.stderr


def test_progress_on_a_terminal_only(checkpoint):
    """With stderr a terminal and stdout a pipe, a progress line goes to
    stderr and stdout gets the text only; without a terminal, no progress."""
    import pty
    args = [BIN, "sample", "--checkpoint", str(checkpoint), "--tokens", "50", "--temperature", "0"]
    master, slave = pty.openpty()
    try:
        r = subprocess.run(args, stdout=subprocess.PIPE, stderr=slave, timeout=120)
        os.close(slave)
        seen = b""
        while True:
            try:
                chunk = os.read(master, 4096)
            except OSError:  # the terminal's other end is closed: all read
                break
            if not chunk:
                break
            seen += chunk
    finally:
        os.close(master)
    assert r.returncode == 0 and len(r.stdout) == 50
    assert b"50/50 bytes" in seen and b"bytes/s" in seen, seen
    assert b"reading the prompt (1 byte)" in seen, seen  # the default prompt, a newline
    plain = run("sample", "--checkpoint", str(checkpoint), "--tokens", "50", "--temperature", "0")
    assert plain.stdout == r.stdout and not plain.stderr
