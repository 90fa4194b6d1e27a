"""gradkern bench --quick --json exits 0 and prints JSON rows with the
benchmark's fields (a smoke test: no timing is asserted).

    bench_smoke.py GRADKERN          --op rmsnorm on the CPU; --list names
        every benchmark once, each of which --op takes
    bench_smoke.py GRADKERN vulkan   --device vulkan: --op relu (the device's
        rows, with bytes, FLOPs and the fraction of its copy bandwidth) and
        --op train_llama (the step on the device and on the CPU), --cpu-shapes
        (rope at the CPU's shape; refused without a device); without a
        device (GK_VULKAN_DEVICE past the last) it exits non-zero with the
        backend's reason
"""
import json
import os
import re
import subprocess
import sys

FIELDS = ("op", "direction", "dtype", "shape", "gradkern_ms", "gb_s", "gflop_s",
          "limit_name", "limit_value", "fraction_of_limit")


def bench(*args, env=None):
    r = subprocess.run([sys.argv[1], "bench", "--quick", "--json", *args], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True, env=env)
    assert r.returncode == 0, r.stderr
    rows = json.loads(r.stdout)
    assert rows, "no rows"
    for row in rows:
        missing = [f for f in FIELDS + (("device", "bytes", "flops") if "--device" in args else ())
                   if f not in row]
        assert not missing, "row %r lacks %s" % (row, missing)
        assert row["gradkern_ms"] > 0, row
    return rows, r.stderr


def cpu():
    rows, _ = bench("--op", "rmsnorm")
    for r in rows:
        assert r["op"] == "rmsnorm", r
        assert r["gb_s"] > 0, r
    assert {r["direction"] for r in rows} == {"forward", "backward"}, rows
    names = subprocess.run([sys.argv[1], "bench", "--list"], stdout=subprocess.PIPE, text=True,
                           check=True).stdout.split("\n")
    assert names[-1] == "" and all(re.fullmatch(r"[a-z0-9_]+", n) for n in names[:-1]), names
    names = names[:-1]
    assert len(names) == len(set(names)) and {"rmsnorm", "linear", "selective_scan", "train_llama"} <= set(names), names
    # --op takes each name: refused names exit 2 before measuring (a bogus one shows it).
    bogus = subprocess.run([sys.argv[1], "bench", "--op", "no_such_op"], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
    assert bogus.returncode == 2 and "the names are: " + ", ".join(names) in bogus.stderr, bogus.stderr
    print("bench smoke: %d rows, %d names" % (len(rows), len(names)))


def vulkan():
    rows, err = bench("--device", "vulkan", "--op", "relu")
    assert re.match(r"gradkern bench: vulkan: .+; copy \(vkCmdCopyBuffer .*\) [0-9.]+ GB/s\n", err), err
    for r in rows:
        assert r["op"] == "relu" and r["device"] == "vulkan", r
        # the backward takes the forward's output y (act.from_output), as torch's
        suffix = " (dy, y) -> dx" if r["direction"] == "backward" else ""
        assert re.fullmatch(r"[0-9]+x[0-9]+" + re.escape(suffix), r["shape"]), r
        dims = r["shape"].split()[0].split("x")
        elements = int(dims[0]) * int(dims[1])
        size = {"f32": 4, "bf16": 2}[r["dtype"]]
        # forward reads x, writes y; backward reads dy and y, writes dx
        assert r["bytes"] == elements * size * (2 if r["direction"] == "forward" else 3), r
        assert r["flops"] == elements, r
        assert r["gb_s"] > 0 and r["gflop_s"] > 0, r
        assert r["limit_name"] == "copy_gb_s" and r["limit_value"] > 0 and r["fraction_of_limit"] > 0, r
    assert {(r["direction"], r["dtype"]) for r in rows} >= {("forward", "f32"), ("backward", "f32")}, rows

    # --cpu-shapes: the CPU bench's shapes on the device.
    big, _ = bench("--device", "vulkan", "--cpu-shapes", "--op", "rope", "--repeat", "1")
    assert {r["shape"] for r in big} == {"4x1024x16x64"} and all(r["gb_s"] > 0 for r in big), big
    wrong = subprocess.run([sys.argv[1], "bench", "--cpu-shapes", "--op", "relu"], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
    assert wrong.returncode == 2 and "--cpu-shapes is for --device vulkan" in wrong.stderr, wrong

    steps, _ = bench("--device", "vulkan", "--op", "train_llama")
    assert [r["device"] for r in steps] == ["vulkan", "cpu"], steps
    for r in steps:
        assert r["op"] == "train_llama" and r["direction"] == "step", r
        assert r["tokens_s"] > 0 and r["bytes"] is None and r["limit_name"] is None, r

    absent = subprocess.run([sys.argv[1], "bench", "--device", "vulkan", "--quick", "--op", "relu"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, GK_VULKAN_DEVICE="99"))
    assert absent.returncode != 0 and not absent.stdout, absent
    assert "gradkern bench: --device vulkan cannot run here: GK_VULKAN_DEVICE = '99' is not a device index" \
        in absent.stderr, absent.stderr
    print("bench smoke, vulkan: %d relu rows, %d training rows, %d rope rows at the CPU's shapes; "
          "GK_VULKAN_DEVICE=99 refused with exit status %d, naming the index"
          % (len(rows), len(steps), len(big), absent.returncode))


if sys.argv[2:] == ["vulkan"]:
    vulkan()
else:
    cpu()
