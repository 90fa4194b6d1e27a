"""gradkern against PyTorch eager, op by op, in one run.

    /usr/bin/python3 bench/vs_torch.py [--gradkern build/gradkern] [--json] [--quick] [--op NAME]

Runs `gradkern bench --json` first, then the same ops, shapes and dtypes in
PyTorch (2 threads, OPENBLAS_CORETYPE=SkylakeX exported before torch loads:
the script re-executes itself with it when it is unset), forward and backward
through autograd with the same kind of inputs, plus a training step
(forward + backward) of PyTorch twins of the two models. Prints markdown
(or JSON rows with --json): op, direction, dtype, shape, gradkern_ms,
torch_ms, speedup (torch / gradkern), fraction_of_limit.

The selective scan's PyTorch reference is a loop over time; at L = 1024 it
is very slow, so it runs a few steps of L and the time is extrapolated
linearly to L = 1024 (the rows say so). Benchmarks measure; nothing asserts.
"""
import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time

if os.environ.get("OPENBLAS_CORETYPE") is None:
    os.environ["OPENBLAS_CORETYPE"] = "SkylakeX"
    os.execv(sys.executable, [sys.executable] + sys.argv)

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16}


def parse():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--gradkern", default=os.path.join(HERE, "..", "build", "gradkern"),
                   help="the gradkern command (default: build/gradkern)")
    p.add_argument("--json", action="store_true", help="JSON rows instead of markdown")
    p.add_argument("--quick", action="store_true", help="fewer repeats (gradkern bench --quick)")
    p.add_argument("--op", help="only this op (as gradkern bench --op)")
    return p.parse_args()


def median_ms(fn, repeat, budget):
    t0 = time.perf_counter()
    fn()
    warm = time.perf_counter() - t0
    reps = max(1, min(repeat, int(budget / max(warm, 1e-9))))
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return 1e3 * statistics.median(ts)


def rnd(shape, dtype, grad=True, scale=1.0):
    return (torch.randn(*shape) * scale).to(dtype).requires_grad_(grad)


class Op:
    """An op: forward(*inputs) on tensors from inputs(dtype, dims), where dims
    is the shape of gradkern's row (the rows' shape text up to the first
    space, e.g. 4096x8192); ops with one fixed shape ignore it."""

    def __init__(self, name, inputs, forward):
        self.name, self.inputs, self.forward = name, inputs, forward

    def timers(self, dtype, dims):
        ins = self.inputs(DTYPES[dtype], dims)
        grads = [t for t in ins if isinstance(t, torch.Tensor) and t.requires_grad]

        def fwd():
            with torch.no_grad():
                self.forward(*ins)

        out = self.forward(*ins)
        dy = torch.randn_like(out) if out.dim() else torch.ones_like(out)

        def bwd():
            torch.autograd.grad(out, grads, dy, retain_graph=True)

        return fwd, bwd


def rms_norm(x, w):
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6)).to(x.dtype) * w


def rope(x, cos, sin):
    h = x.shape[-1] // 2
    a, b = x[..., :h], x[..., h:]
    return torch.cat([a * cos - b * sin, b * cos + a * sin], -1)


def rope_inputs(dt, dims):
    B, T, H, Dh = 4, 1024, 16, 64
    i = torch.arange(Dh // 2, dtype=torch.float64)
    ang = torch.arange(T, dtype=torch.float64)[:, None] * 10000.0 ** (-2 * i / Dh)
    return (rnd((B, T, H, Dh), dt), torch.cos(ang)[None, :, None, :].to(dt), torch.sin(ang)[None, :, None, :].to(dt))


def attention(q, k, v):
    T = q.shape[-2]
    s = (q @ k.transpose(-1, -2)) * (1.0 / math.sqrt(q.shape[-1]))
    mask = torch.ones(T, T, dtype=torch.bool).tril()
    return torch.softmax(s.masked_fill(~mask, float("-inf")), -1) @ v


# Attention at T = 4096: PyTorch's eager attention keeps (T, T) scores, softmax
# and their gradients per head (64 MiB each), several GiB for the whole batch,
# so it is timed on ATTN_BIG_HEADS heads of one sequence and scaled linearly to
# B x H (the rows say so).
ATTN_BIG_T, ATTN_BIG_HEADS = 4096, 4


def attention_inputs(dt, dims):
    B, H, T, Dh = dims
    if T >= ATTN_BIG_T:
        B, H = 1, ATTN_BIG_HEADS
    return tuple(rnd((B, H, T, Dh), dt) for _ in range(3))


def conv1d(x, w, b):
    return F.silu(F.conv1d(F.pad(x, (w.shape[1] - 1, 0)), w.unsqueeze(1), b, groups=x.shape[1]))


def scan_inputs(L):
    def make(dt, dims):
        B, D, N = 4, 1536, 16
        return (rnd((B, D, L), dt), rnd((B, D, L), dt, scale=0.5), (-torch.rand(D, N) - 0.5).to(dt).requires_grad_(),
                rnd((B, N, L), dt), rnd((B, N, L), dt), rnd((D,), dt), rnd((B, D, L), dt), rnd((D,), dt, scale=0.1))
    return make


def selective_scan(u, delta, A, Bm, Cm, Dv, z, dbias):
    """mamba-ssm's selective_scan_ref: a PyTorch loop over time."""
    dt = F.softplus(delta + dbias[:, None])
    h = torch.zeros(u.shape[0], u.shape[1], A.shape[1], dtype=u.dtype)
    ys = []
    for t in range(u.shape[2]):
        d = dt[:, :, t, None]
        h = torch.exp(d * A) * h + d * Bm[:, None, :, t] * u[:, :, t, None]
        ys.append((h * Cm[:, None, :, t]).sum(-1))
    return (torch.stack(ys, -1) + Dv[:, None] * u) * F.silu(z)


def ops(scan_steps):
    one = lambda dt, R: (rnd(R, dt),)  # noqa: E731
    two = lambda dt, R: (rnd(R, dt), rnd(R, dt))  # noqa: E731
    table = [
        Op("relu", one, F.relu),
        Op("gelu", one, F.gelu),
        Op("silu", one, F.silu),
        Op("sigmoid", one, torch.sigmoid),
        Op("softplus", one, F.softplus),
        Op("glu", two, lambda x, g: x * torch.sigmoid(g)),
        Op("reglu", two, lambda x, g: x * F.relu(g)),
        Op("swiglu", two, lambda x, g: x * F.silu(g)),
        Op("geglu", two, lambda x, g: x * F.gelu(g)),
        Op("rmsnorm", lambda dt, R: (rnd(R, dt), rnd(R[-1:], dt)), rms_norm),
        Op("layernorm", lambda dt, R: (rnd(R, dt), rnd(R[-1:], dt), rnd(R[-1:], dt)),
           lambda x, w, b: F.layer_norm(x, x.shape[-1:], w, b)),
        Op("softmax", one, lambda x: torch.softmax(x, -1)),
        Op("add", two, lambda a, b: a + b),
        Op("mul", two, lambda a, b: a * b),
        Op("linear", lambda dt, R: (rnd(R, dt), rnd((5632, 2048), dt, scale=0.02), rnd((5632,), dt)), F.linear),
        Op("matmul", lambda dt, R: (rnd(R, dt), rnd((2048, 5632), dt, scale=0.02)), torch.matmul),
        Op("attention", attention_inputs, attention),
        Op("cross_entropy", lambda dt, R: (rnd(R, dt), torch.randint(0, R[1], (R[0],))), F.cross_entropy),
        Op("embedding", lambda dt, R: (torch.randint(0, 32000, R), rnd((32000, 2048), dt)), F.embedding),
        Op("rope", rope_inputs, rope),
        Op("conv1d", lambda dt, R: (rnd(R, dt), rnd((R[1], 4), dt, scale=0.5), rnd((R[1],), dt)), conv1d),
        Op("selective_scan", scan_inputs(scan_steps), selective_scan),
    ]
    return {o.name: o for o in table}


def mamba_params(cfg, dt):
    D, E, N, R, W = cfg["d_model"], cfg["expand"] * cfg["d_model"], cfg["d_state"], cfg["dt_rank"], cfg["d_conv"]
    p = {"embedding": rnd((cfg["vocab"], D), dt, scale=0.02), "norm_f": rnd((D,), dt)}
    for l in range(cfg["n_layers"]):
        shapes = {"norm": (D,), "in_proj": (2 * E, D), "conv_w": (E, W), "conv_b": (E,), "x_proj": (R + 2 * N, E),
                  "dt_proj": (E, R), "dt_bias": (E,), "A_log": (E, N), "D": (E,), "out_proj": (D, E)}
        for k, s in shapes.items():
            p["layers.%d.%s" % (l, k)] = rnd(s, dt, scale=0.1)
    return p


def llama_params(cfg, dt):
    D, H, G, Fd = cfg["d_model"], cfg["heads"], cfg["kv_heads"], cfg["d_ff"]
    Dh = D // H
    p = {"embedding": rnd((cfg["vocab"], D), dt, scale=0.02), "norm_f": rnd((D,), dt)}
    for l in range(cfg["n_layers"]):
        shapes = {"attn_norm": (D,), "wqkv": ((H + 2 * G) * Dh, D), "wo": (D, H * Dh), "mlp_norm": (D,),
                  "w_up_gate": (2 * Fd, D), "w_down": (D, Fd)}
        for k, s in shapes.items():
            p["layers.%d.%s" % (l, k)] = rnd(s, dt, scale=0.1)
    return p


def train_timer(arch):
    """The PyTorch twins of tests/python/test_models.py, at gradkern bench's
    model sizes (width 64, 2 layers, vocab 10, 16 sequences of 256)."""
    sys.path.insert(0, os.path.join(HERE, "..", "tests", "python"))
    import test_models  # noqa: E402  (the twins; needs pytest importable)
    cfg = {"vocab": 10, "d_model": 64, "n_layers": 2, "expand": 2, "d_conv": 4, "d_state": 16, "dt_rank": 4,
           "selection": 1, "heads": 4, "kv_heads": 2, "d_ff": 176, "rope_theta": 10000.0, "norm_eps": 1e-5}
    p = mamba_params(cfg, torch.float32) if arch == "mamba" else llama_params(cfg, torch.float32)
    inputs = torch.randint(0, 10, (16, 256))
    targets = torch.randint(0, 10, (16, 256))

    def step():
        loss = test_models.loss_of(arch, p, cfg, inputs, targets)
        loss.backward()

    return step


def row_dims(shape):
    """(4096, 8192) from "4096x8192 ..."; None when the text starts otherwise."""
    head = shape.split()[0] if shape.split() else ""
    parts = head.split("x")
    return tuple(int(p) for p in parts) if all(p.isdigit() for p in parts) else None


def main():
    a = parse()
    torch.set_num_threads(2)
    cmd = [a.gradkern, "bench", "--json"] + (["--quick"] if a.quick else []) + (["--op", a.op] if a.op else [])
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    limits_line = proc.stderr.strip()
    try:
        gk_rows = json.loads(proc.stdout)
    except json.JSONDecodeError:
        sys.exit("vs_torch: %s printed no JSON (exit %d): %s" % (" ".join(cmd), proc.returncode, proc.stderr))
    repeat, budget = (3, 0.6) if a.quick else (10, 4.0)
    scan_steps = 8 if a.quick else 32
    table = ops(scan_steps)
    timers = {}
    out = []
    for r in gk_rows:
        if "error" in r:
            continue
        op, direction, dtype = r["op"], r["direction"], r["dtype"]
        note = ""
        try:
            dims = row_dims(r["shape"])
            if op in table:
                key = (op, dtype, dims)
                if key not in timers:
                    timers.clear()  # one op's inputs at a time: the big ones take GiBs
                    timers[key] = table[op].timers(dtype, dims)
                fn = timers[key][0 if direction == "forward" else 1]
                ms = median_ms(fn, repeat, budget)
                if op == "attention" and dims[2] >= ATTN_BIG_T:
                    ms *= dims[0] * dims[1] / ATTN_BIG_HEADS
                    note = "torch timed on %d heads of one sequence, scaled to %d x %d" % (ATTN_BIG_HEADS, dims[0],
                                                                                           dims[1])
                if op == "add" and direction == "backward":
                    note = "torch: autograd hands dy on as da and db (no copy), gradkern writes both"
                if op == "selective_scan":
                    ms *= 1024 / scan_steps
                    note = "torch loop timed over L=%d steps, extrapolated linearly to L=1024" % scan_steps
            elif op == "cross_entropy_fused":
                fwd, bwd = timers.get(("cross_entropy", dtype, dims)) or table["cross_entropy"].timers(dtype, dims)
                ms = median_ms(fwd, repeat, budget) + median_ms(bwd, repeat, budget)
                note = "torch: loss forward + backward (two passes, separate dlogits)"
            elif op == "adamw":
                n = 50 * 1000 * 1000
                w = torch.nn.Parameter(torch.zeros(n, dtype=DTYPES[dtype]))
                w.grad = torch.randn(n).to(DTYPES[dtype]) * 1e-3
                opt = torch.optim.AdamW([w], lr=1e-3)
                ms = median_ms(opt.step, repeat, budget)
                if dtype == "bf16":
                    note = "torch: bf16 parameters updated directly (no f32 master)"
                del w, opt
            elif op in ("train_mamba", "train_llama"):
                ms = median_ms(train_timer(op[6:]), repeat, budget)
                note = "forward + backward; torch twins of tests/python/test_models.py"
            else:
                continue
        except RuntimeError as e:  # a dtype torch's CPU kernels do not take
            out.append(dict(op=op, direction=direction, dtype=dtype, shape=r["shape"], gradkern_ms=r["gradkern_ms"],
                            torch_ms=None, speedup=None, fraction_of_limit=r.get("fraction_of_limit"),
                            note="torch: %s" % str(e).split("\n")[0]))
            continue
        out.append(dict(op=op, direction=direction, dtype=dtype, shape=r["shape"], gradkern_ms=r["gradkern_ms"],
                        torch_ms=round(ms, 4), speedup=round(ms / r["gradkern_ms"], 3),
                        fraction_of_limit=r.get("fraction_of_limit"), limit_name=r.get("limit_name"), note=note))
        if not a.json:
            print("  %-20s %-8s %-5s torch %10.2f ms" % (op, direction, dtype, ms), file=sys.stderr, flush=True)
    if a.json:
        print(json.dumps(out, indent=1))
        return
    print("torch %s, %d threads, OPENBLAS_CORETYPE=%s; %s" % (torch.__version__, torch.get_num_threads(),
                                                              os.environ["OPENBLAS_CORETYPE"], limits_line))
    limits = {r["limit_name"]: r["limit_value"] for r in gk_rows if r.get("limit_name") and r.get("limit_value")}
    if limits:
        print("limits measured in gradkern's run: " + ", ".join("%s %.1f" % kv for kv in sorted(limits.items())))
    print()
    print("| op | dir | dtype | shape | gradkern ms | torch ms | speedup | of limit | note |")
    print("|---|---|---|---|---:|---:|---:|---:|---|")
    for o in out:
        frac = "%.0f%% %s" % (100 * o["fraction_of_limit"], o.get("limit_name", "").replace("_gb_s", "").replace(
            "_gflop_s", "")) if o["fraction_of_limit"] is not None else "-"
        tm = "%.2f" % o["torch_ms"] if o["torch_ms"] is not None else "-"
        sp = "%.2fx" % o["speedup"] if o["speedup"] is not None else "-"
        print("| %s | %s | %s | %s | %.2f | %s | %s | %s | %s |" % (o["op"], o["direction"], o["dtype"], o["shape"],
                                                                   o["gradkern_ms"], tm, sp, frac, o["note"]))
    scan = {o["direction"]: o for o in out if o["op"] == "selective_scan" and o["dtype"] == "f32"}
    if len(scan) == 2 and all(o["torch_ms"] for o in scan.values()):
        g = sum(o["gradkern_ms"] for o in scan.values())
        t = sum(o["torch_ms"] for o in scan.values())
        print("\nselective scan f32 forward + backward: gradkern %.1f ms, torch loop %.1f ms (extrapolated): %.1fx"
              % (g, t, t / g))


if __name__ == "__main__":
    main()
