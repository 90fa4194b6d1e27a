"""`gradkern train` end to end: it learns, a resumed run is bit-identical to
a straight one, a NaN stops the run, bad input gets a message and a
non-zero exit, and checkpoints are checked when written and when resumed
(checksums, strict metadata, the run's options and data, finite state)."""
import json
import os
import struct
import subprocess
import xml.etree.ElementTree as ET
import zlib

import pytest

BIN = os.environ.get("GRADKERN_BIN")
pytestmark = pytest.mark.skipif(not BIN, reason="GRADKERN_BIN is not set (run through ctest)")

TINY_OPTS = {"--width": "16", "--batch": "4", "--warmup": "2", "--eval-every": "0", "--eval-batches": "1"}


def tiny(**changes):
    """A tiny model's options; changes={"--warmup": "0"} replaces one (an
    option given twice is an error)."""
    opts = dict(TINY_OPTS, **changes)
    return [x for kv in opts.items() for x in kv]


TINY = tiny()


def train(*args, cwd=None, timeout=600, env=None):
    return subprocess.run([BIN, "train", *args], capture_output=True, text=True, cwd=cwd, timeout=timeout,
                          env=None if env is None else dict(os.environ, **env))


def read_st(path):
    """(header dict, data bytes) of a safetensors file."""
    b = path.read_bytes()
    n = struct.unpack("<Q", b[:8])[0]
    return json.loads(b[8:8 + n]), bytearray(b[8 + n:])


def write_st(path, header, data):
    h = json.dumps(header).encode()
    h += b" " * (-(8 + len(h)) % 8)
    path.write_bytes(struct.pack("<Q", len(h)) + h + bytes(data))


def tensor_bytes(header, data, name):
    begin, end = header[name]["data_offsets"]
    return data[begin:end]


def set_floats(header, data, name, values, fix_checksum=True):
    """Overwrite the first elements of F32 tensor `name` (and its checksum)."""
    begin = header[name]["data_offsets"][0]
    data[begin:begin + 4 * len(values)] = struct.pack("<%df" % len(values), *values)
    if fix_checksum:
        header["__metadata__"]["crc32:" + name] = "%08x" % zlib.crc32(tensor_bytes(header, data, name))


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
    r = train("--steps", "30", "--lr", "10", "--weight-decay", "0", "--clip", "0", *tiny(**{"--warmup": "0"}),
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
        (["--resume", str(tmp_path / "nothing.safetensors"), "--checkpoint", str(tmp_path / "out.safetensors")],
         "nothing.safetensors"),
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
    r = train("--steps", "8", *tiny(**{"--width": "24"}), "--resume", str(ck), "--checkpoint", str(ck))
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
    r = train("--task", "text", "--data", str(text), "--steps", "6", *tiny(**{"--eval-every": "3"}), "--seq-len", "32",
              "--plot", str(plot))
    assert r.returncode == 0, r.stderr
    assert "bits per byte" in r.stdout
    root = ET.parse(plot).getroot()
    assert root.tag.endswith("svg")


def test_outputs_checked_before_the_first_step(tmp_path):
    text = tmp_path / "text.txt"
    text.write_bytes(b"the quick brown fox jumps over the lazy dog. " * 200)
    svg_text = tmp_path / "text.svg"
    svg_text.write_bytes(text.read_bytes())
    (tmp_path / "adir.svg").mkdir()
    data = ["--task", "text", "--data", str(text), "--seq-len", "32"]
    cases = [
        (["--checkpoint", str(tmp_path / "missing" / "ck.safetensors")], "directory '%s' does not exist" % (tmp_path / "missing")),
        (["--checkpoint", str(tmp_path)], "is a directory"),
        (["--checkpoint", str(tmp_path) + "/"], "is a directory"),
        (["--checkpoint", "/proc/ck.safetensors"], "cannot create a file in the directory '/proc'"),
        (["--plot", str(tmp_path / "missing" / "loss.svg")], "--plot"),
        (["--plot", str(tmp_path / "adir.svg")], "is a directory"),
        (data + ["--checkpoint", str(text)], "is the --data file"),
        (data + ["--checkpoint", str(tmp_path / "." / "text.txt")], "is the --data file"),
        (["--task", "text", "--data", str(svg_text), "--seq-len", "32", "--plot", str(svg_text)], "is the --data file"),
        (["--checkpoint", str(tmp_path / "a.svg"), "--plot", str(tmp_path / "a.svg")], "is the --checkpoint file"),
    ]
    for args, needle in cases:
        # 10^6 steps: a run that started would not end within the timeout.
        r = train(*args, "--steps", "1000000", *TINY, timeout=60)
        assert r.returncode == 2, (args, r.returncode, r.stderr)
        assert needle in r.stderr and args[-1].rstrip("/") in r.stderr, (args, r.stderr)
        assert "step" not in r.stdout, (args, r.stdout)
    assert text.read_bytes() == svg_text.read_bytes()  # neither was overwritten
    if os.geteuid() != 0:  # root may write anywhere
        locked = tmp_path / "locked"
        locked.mkdir()
        locked.chmod(0o500)
        r = train("--checkpoint", str(locked / "ck.safetensors"), "--steps", "1000000", *TINY, timeout=60)
        assert r.returncode == 2 and "Permission denied" in r.stderr, r.stderr


def test_checkpoint_metadata_and_checksums(tmp_path):
    ck = tmp_path / "ck.safetensors"
    r = train("--steps", "6", *TINY, "--seed", "5", "--checkpoint", str(ck), "--stop-after", "3")
    assert r.returncode == 0, r.stderr
    header, data = read_st(ck)
    meta = header["__metadata__"]
    assert meta["step"] == "3" and meta["seed"] == "5" and meta["steps"] == "6" and meta["warmup"] == "2"
    assert float(meta["lr"]) == 6e-3 and float(meta["train_loss"]) > 0
    names = [k for k in header if k != "__metadata__"]
    assert "optimizer.exp_avg_sq" in names
    for name in names:  # a checksum per tensor, as zlib computes it
        assert meta["crc32:" + name] == "%08x" % zlib.crc32(tensor_bytes(header, data, name)), name
    good = ck.read_bytes()

    def resume(path):
        return train("--steps", "6", *TINY, "--seed", "5", "--resume", str(path), "--checkpoint", str(path))

    # A flipped bit in the data: named, not trained on, the file left alone.
    bad = tmp_path / "flipped.safetensors"
    flipped = bytearray(data)
    begin = header["layers.1.out_proj"]["data_offsets"][0]
    flipped[begin + 5] ^= 0x10
    write_st(bad, header, flipped)
    before = bad.read_bytes()
    r = resume(bad)
    assert r.returncode == 1 and "tensor 'layers.1.out_proj'" in r.stderr and "checksum" in r.stderr, r.stderr
    assert bad.read_bytes() == before
    r = subprocess.run([BIN, "sample", "--checkpoint", str(bad)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and "tensor 'layers.1.out_proj'" in r.stderr and "checksum" in r.stderr, r.stderr

    # Metadata parsed strictly.
    for key, value, needle in [("seed", "x", "seed 'x'"), ("seed", "-1", "seed '-1'"),
                               ("step", "12345678901234567890123", "step '12345678901234567890123'"),
                               ("step", "03", "step '03'"), ("step", "3 ", "step '3 '"), ("step", "0", "step '0'"),
                               ("lr", "fast", "lr 'fast'"), ("steps", "6.0", "steps '6.0'"),
                               ("train_loss", "nan", "train_loss"), ("data_bytes", "12", None),
                               ("crc32:embedding", "xyz", "'xyz' is not a checksum")]:
        h = json.loads(json.dumps(header))
        h["__metadata__"][key] = value
        write_st(bad, h, data)
        r = resume(bad)
        if needle is None:  # an entry this task does not use is ignored
            assert r.returncode == 0, r.stderr
            continue
        assert r.returncode == 1 and needle in r.stderr, (key, value, r.stderr)

    # Some tensors with a checksum and others without: an entry was lost.
    h = json.loads(json.dumps(header))
    del h["__metadata__"]["crc32:embedding"]
    write_st(bad, h, data)
    r = resume(bad)
    assert r.returncode == 1 and "tensor 'embedding' has no checksum" in r.stderr, r.stderr

    # A file without any checksums (written before they existed) loads, with a note.
    old = tmp_path / "old.safetensors"
    h = json.loads(json.dumps(header))
    h["__metadata__"] = {k: v for k, v in meta.items() if not k.startswith("crc32:")}
    write_st(old, h, data)
    r = resume(old)
    assert r.returncode == 0 and "no checksums" in r.stderr, r.stderr
    # ... and one without the run's options and figures too.
    h["__metadata__"] = {k: meta[k] for k in ("format", "config", "step", "seed")}
    write_st(old, h, data)
    r = resume(old)
    assert r.returncode == 0 and "cannot be compared" in r.stderr, r.stderr
    assert ck.read_bytes() == good


def test_nonfinite_state_is_neither_resumed_nor_saved(tmp_path):
    ck = tmp_path / "ck.safetensors"
    assert train("--steps", "8", *TINY, "--checkpoint", str(ck), "--stop-after", "4").returncode == 0
    header, data = read_st(ck)
    bad = tmp_path / "bad.safetensors"
    for name, values, needle in [("optimizer.exp_avg_sq", [1e-6, -0.5], "second moment (exp_avg_sq) of 'embedding' is -0.5 at element 1"),
                                 ("optimizer.exp_avg", [float("inf")], "first moment (exp_avg) of 'embedding' is inf"),
                                 ("layers.0.D", [0.0, float("nan")], "weight 'layers.0.D' is nan at element 1")]:
        h, d = json.loads(json.dumps(header)), bytearray(data)
        set_floats(h, d, name, values)
        write_st(bad, h, d)
        before = bad.read_bytes()
        r = train("--steps", "8", *TINY, "--resume", str(bad), "--checkpoint", str(bad))
        assert r.returncode == 1 and "cannot be resumed" in r.stderr and needle in r.stderr, (name, r.stderr)
        assert bad.read_bytes() == before and "step 5" not in r.stdout
    # A finite state whose next update overflows (a huge first moment over a
    # zero second moment): the step's checkpoint is not written, and the
    # message names the checkpoint to go back to.
    h, d = json.loads(json.dumps(header)), bytearray(data)
    set_floats(h, d, "optimizer.exp_avg", [3e38])
    set_floats(h, d, "optimizer.exp_avg_sq", [0.0])
    write_st(bad, h, d)
    before = bad.read_bytes()
    r = train("--steps", "8", *TINY, "--resume", str(bad), "--checkpoint", str(bad), "--checkpoint-every", "1")
    assert r.returncode == 1, r.stderr
    assert "weight 'embedding'" in r.stderr and "was not written" in r.stderr, r.stderr
    assert "the last good checkpoint is " + str(bad) in r.stderr, r.stderr
    assert bad.read_bytes() == before


def test_resume_with_changes(tmp_path):
    text, other = tmp_path / "a.txt", tmp_path / "b.txt"
    text.write_bytes(b"the quick brown fox jumps over the lazy dog. " * 200)
    other.write_bytes(b"THE QUICK BROWN FOX JUMPS OVER THE LAZY DOG. " * 200)
    opts = ["--task", "text", *TINY]
    ck = tmp_path / "ck.safetensors"
    r = train(*opts, "--seq-len", "32", "--data", str(text), "--steps", "8", "--checkpoint", str(ck),
              "--stop-after", "4")
    assert r.returncode == 0, r.stderr
    good = ck.read_bytes()
    same = ["--seq-len", "32", "--data", str(text), "--steps", "8"]
    cases = [
        (["--seq-len", "32", "--data", str(other), "--steps", "8"], "--data '%s': 9000 bytes, crc32 " % other),
        (same + ["--lr", "0.01"], "--lr 0.01 (the checkpoint: 0.006)"),
        (["--seq-len", "32", "--data", str(text), "--steps", "12"], "--steps 12 (the checkpoint: 8)"),
        (same + ["--seed", "2"], "--seed 2 (the checkpoint: 1)"),
        (same + ["--clip", "0.5"], "--clip 0.5 (the checkpoint: 1)"),
        # Longer sequences than the checkpoint's (a run that starts short).
        (["--seq-len", "48", "--data", str(text), "--steps", "8"], "--seq-len 48 (the checkpoint: 32)"),
    ]
    cases = [(opts + args, needle) for args, needle in cases]
    # Smaller batches than the checkpoint's (a run that goes on at a longer --seq-len in smaller ones).
    cases.append((["--task", "text", *tiny(**{"--batch": "2"}), *same], "--batch 2 (the checkpoint: 4 sequences a step)"))
    for args, needle in cases:
        r = train(*args, "--resume", str(ck), "--checkpoint", str(ck))
        assert r.returncode == 1 and needle in r.stderr and "add --allow-changes" in r.stderr, (args, r.stderr)
        assert r.stderr.count("--allow-changes") == 1, r.stderr
        assert ck.read_bytes() == good
    for args, needle in cases:
        out = tmp_path / "changed.safetensors"
        r = train(*args, "--resume", str(ck), "--checkpoint", str(out), "--allow-changes")
        assert r.returncode == 0 and "with changes" in r.stderr and needle in r.stderr, (args, r.stderr)
    # --allow-changes with no change: nothing to say.
    r = train(*opts, *same, "--resume", str(ck), "--checkpoint", str(ck), "--allow-changes")
    assert r.returncode == 0 and "changes" not in r.stderr, r.stderr
    final = [l for l in r.stdout.splitlines() if l.startswith("final ")][-1]

    # A finished run: said so, with the checkpoint's figures; nothing written.
    done = ck.read_bytes()
    r = train(*opts, *same, "--resume", str(ck), "--checkpoint", str(ck))
    assert r.returncode == 0, r.stderr
    assert "is finished: step 8 of --steps 8" in r.stdout and final in r.stdout, r.stdout
    assert "nan" not in r.stdout and ck.read_bytes() == done


def test_stale_temporary_files_removed(tmp_path):
    ck = tmp_path / "ck.safetensors"
    dead = subprocess.Popen(["true"])
    dead.wait()
    stale = tmp_path / ("ck.safetensors.tmp-%d-0" % dead.pid)
    alive = tmp_path / ("ck.safetensors.tmp-%d-3" % os.getpid())  # a writer still running
    other = tmp_path / "ck.safetensors.tmp-x-1"                    # not a name gradkern makes
    for f in (stale, alive, other):
        f.write_bytes(b"partial")
    r = train("--steps", "2", *TINY, "--checkpoint", str(ck))
    assert r.returncode == 0, r.stderr
    assert not stale.exists() and alive.exists() and other.exists()
    assert "removed 1 temporary file " in r.stderr, r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["ck.safetensors", alive.name, other.name])


def test_data_that_is_not_a_regular_file(tmp_path):
    fifo = tmp_path / "fifo.txt"
    os.mkfifo(fifo)
    for path, needle in [(str(fifo), "it is a FIFO"), ("/dev/null", "it is a character device"),
                         ("/proc/self/status", "/proc"), (str(tmp_path), "it is a directory")]:
        r = train("--task", "text", "--data", path, "--steps", "2", *TINY, timeout=30)  # a FIFO must not block
        assert r.returncode == 1 and "data file '%s' is not a regular file" % path in r.stderr, r.stderr
        assert needle in r.stderr, r.stderr


def test_option_rules_and_messages(tmp_path):
    # A short run: the warmup follows --steps unless given.
    r = train("--steps", "60", "--width", "16", "--batch", "4", "--eval-batches", "1", "--quiet")
    assert r.returncode == 0, r.stderr
    r = train("--steps", "60", "--warmup", "100")
    assert r.returncode == 2 and "--warmup 100 is more than --steps 60" in r.stderr, r.stderr
    ck = str(tmp_path / "ck.safetensors")
    cases = [
        (["--stop-after", "5"], "--stop-after 5 needs --checkpoint FILE"),
        (["--resume", ck], "--resume '%s' needs --checkpoint FILE" % ck),
        (["--steps", "5", "--steps", "6"], "--steps is given twice"),
        (["--quiet", "--quiet"], "--quiet is given twice"),
        (["--bogus"], "unknown option '--bogus'"),
        (["extra"], "unexpected argument 'extra'"),
        (["--lr", "abc"], "--lr: 'abc' is not a number"),
    ]
    for args, needle in cases:
        r = train(*args)
        assert r.returncode == 2 and needle in r.stderr, (args, r.stderr)
        assert r.stderr.count("--help") == 1, (args, r.stderr)  # one hint, not two
    # Counts: "1 layer", "1 thread", "1 step".
    r = train("--steps", "1", "--layers", "1", "--threads", "1", *tiny(**{"--warmup": "0"}))
    assert r.returncode == 0, r.stderr
    assert "1 layer," in r.stdout and "1 thread\n" in r.stdout and "done: 1 step in" in r.stdout, r.stdout
    one = tmp_path / "one.txt"
    one.write_bytes(b"x")
    r = train("--task", "text", "--data", str(one), "--steps", "1", *tiny(**{"--warmup": "0"}))
    assert r.returncode == 1 and "has 1 byte, too short" in r.stderr, r.stderr


def test_mixed_precision_resumes_across_dtypes(tmp_path):
    # Checkpoints hold the f32 master weights and record the dtype: a bf16
    # run resumes in f32 and back, with a note; the same dtype resumes
    # bit-identically (f16 with its loss scaler's state).
    def run(dtype, ck, *more):
        r = train("--steps", "20", *TINY, "--dtype", dtype, "--checkpoint", str(ck), *more)
        assert r.returncode == 0, r.stderr
        return r

    for dtype in ("bf16", "f16"):
        straight, pieces = tmp_path / ("straight_%s.st" % dtype), tmp_path / ("pieces_%s.st" % dtype)
        r = run(dtype, straight)
        assert "mixed precision: %s" % dtype in r.stdout, r.stdout
        assert (dtype == "f16") == ("scale 65536 skipped 0" in r.stdout), r.stdout
        run(dtype, pieces, "--stop-after", "10")
        r = run(dtype, pieces, "--resume", str(pieces))
        assert "note" not in r.stderr, r.stderr
        assert straight.read_bytes() == pieces.read_bytes(), dtype
        header, _ = read_st(straight)
        meta = header["__metadata__"]
        assert meta["dtype"] == dtype and header["embedding"]["dtype"] == "F32", meta
        assert (dtype == "f16") == ("loss_scale" in meta and "skipped_steps" in meta), meta
    f32 = tmp_path / "f32.st"
    ref, _ = final_figures(run("f32", f32).stdout)
    assert read_st(f32)[0]["__metadata__"]["dtype"] == "f32"
    for first, then in (("bf16", "f32"), ("f32", "bf16"), ("f16", "bf16")):
        ck = tmp_path / ("%s_then_%s.st" % (first, then))
        run(first, ck, "--stop-after", "10")
        r = run(then, ck, "--resume", str(ck))
        assert "was trained in %s; continuing in %s" % (first, then) in r.stderr, r.stderr
        assert read_st(ck)[0]["__metadata__"]["dtype"] == then
        # 20 steps of a tiny model from the same start: the loss agrees
        # with the straight f32 run's within the mixed-precision bound
        # (tests/test_mixed_precision.c).
        loss, _ = final_figures(r.stdout)
        assert abs(loss - ref) <= 0.05 + 0.05 * ref, (first, then, loss, ref)


def test_webgpu_device_is_the_webassembly_builds(tmp_path):
    # --device webgpu trains in the WebAssembly build (tests/wasm/train.test.mjs);
    # the native command refuses it before the first step, naming the backend.
    r = train("--steps", "2", *TINY, "--device", "webgpu", cwd=tmp_path)
    assert r.returncode == 1 and "backend webgpu (5) is not built into this gradkern" in r.stderr, r.stderr
    assert "final train loss" not in r.stdout


def test_vulkan_device_trains_as_the_cpu_and_resumes_across(tmp_path):
    # --device vulkan (lavapipe here): 20 steps of a tiny model end at the
    # CPU's loss within 1e-3 relative, with the weights of the checkpoints
    # within 1e-3 (relative L2); a run of 10 steps on the device resumed for
    # 10 on the CPU agrees likewise (checkpoints hold host copies, whatever
    # trained them); 16-bit training on the device is refused.
    env = {"XDG_RUNTIME_DIR": str(tmp_path)}  # the Vulkan loader's, private

    def run(ck, *more):
        r = train("--steps", "20", *TINY, "--checkpoint", str(ck), *more, env=env)
        assert r.returncode == 0, r.stderr
        return r

    def weights(ck):
        header, data = read_st(ck)
        names = sorted(k for k in header if k != "__metadata__" and not k.startswith("optimizer."))
        return b"".join(tensor_bytes(header, data, k) for k in names)

    def rel_l2(a, b):
        x, y = struct.unpack("<%df" % (len(a) // 4), a), struct.unpack("<%df" % (len(b) // 4), b)
        return (sum((p - q) ** 2 for p, q in zip(x, y)) / sum(q * q for q in y)) ** 0.5

    cpu, dev, pieces = tmp_path / "cpu.st", tmp_path / "vulkan.st", tmp_path / "pieces.st"
    ref, _ = final_figures(run(cpu).stdout)
    r = run(dev, "--device", "vulkan")
    assert "device: vulkan" in r.stdout, r.stdout
    loss, _ = final_figures(r.stdout)
    assert abs(loss - ref) <= 1e-3 * ref, (loss, ref)
    assert rel_l2(weights(dev), weights(cpu)) <= 1e-3
    run(pieces, "--device", "vulkan", "--stop-after", "10")
    loss, _ = final_figures(run(pieces, "--resume", str(pieces)).stdout)
    assert abs(loss - ref) <= 1e-3 * ref, (loss, ref)
    assert rel_l2(weights(pieces), weights(cpu)) <= 1e-3
    r = train("--steps", "20", *TINY, "--device", "vulkan", "--dtype", "bf16", env=env)
    assert r.returncode != 0 and "--device vulkan trains in f32, not --dtype bf16" in r.stderr, r.stderr
