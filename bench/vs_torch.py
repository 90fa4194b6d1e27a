"""gradkern against PyTorch eager, in one run, like with like.

    /usr/bin/python3 bench/vs_torch.py [--gradkern build/gradkern] [--json] [--quick] [--op NAME]
                                       [--tables kernels,user,overhead,model]

Conditions, the same on both sides and printed with the results: 2 threads
(torch.set_num_threads(2), gradkern's default pool of 2); OpenBLAS told the
CPU (OPENBLAS_CORETYPE=SkylakeX on a CPU with AVX-512, whatever the
environment had, which also reaches torch's BLAS); glibc told
to keep freed memory (MALLOC_MMAP_THRESHOLD_=4294967296,
MALLOC_TRIM_THRESHOLD_=68719476736), so that an allocation that a previous
repeat freed costs no page faults. The script re-executes itself with these
variables when they differ; it runs `gradkern bench --json` under them, once per
benchmark just before torch's rows of that benchmark.

Four tables:
- kernels: each op's kernels alone. gradkern (`gradkern bench`) writes into
  preallocated outputs; PyTorch writes into preallocated outputs too
  (`out=`, through torch.ops.aten where the Python API has none) wherever
  the op has an out= variant, and otherwise (composite ops such as RMSNorm,
  autograd backwards) allocates under the caching policy above. Each row's
  note says which.
- user: as a PyTorch user sees it: the binding's autograd functions against
  torch.nn.functional in the same loop, forward and backward, both
  allocating, once with y.backward(dy) and once with y.sum().backward()
  (autograd then hands a stride-0 dy).
- overhead: per-call cost on 64 elements (the binding's Python work and its
  call into the library), through the compiled module gradkern._gkrun and
  through ctypes, each in its own process beside torch.
- model: training steps of a LLaMA and a Mamba written as Hugging Face
  writes them (tests/python/hf_llama.py, hf_mamba.py), unpatched against
  gradkern.patch(model) (LLaMA also with lm_head_loss=False, which keeps
  the logits, to show what fusing the LM head with the loss saves):
  tokens/s and the process's peak resident memory, each in a fresh process.

Which BLAS torch runs is read from the libraries its process has loaded
after a matrix product (/proc/self/maps) and printed with the conditions.
Debian's reference BLAS (netlib, what torch gets on a fresh machine without
OpenBLAS) is 5-40x below this CPU: against it no matrix-product ratio
(linear, matmul, attention) is printed, only both times and the reason.
`make bench-torch` installs OpenBLAS first (scripts/install-deps.sh bench).

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

# On a CPU with AVX-512 the OpenBLAS core type is SkylakeX whatever the
# environment says: Debian's OpenBLAS misdetects such CPUs, and a core type
# preset for another reason (Haswell, with OPENBLAS_L2_SIZE) runs torch's
# BLAS on AVX2 kernels, far below the machine (236 against 404 GFLOP/s on 2
# cores measured here), which would flatter gradkern. Elsewhere the
# environment's choice stands.
AVX512 = "avx512f" in open("/proc/cpuinfo").read().split()
ENVIRONMENT = {"MALLOC_MMAP_THRESHOLD_": "4294967296", "MALLOC_TRIM_THRESHOLD_": "68719476736"}
if AVX512:
    ENVIRONMENT["OPENBLAS_CORETYPE"] = "SkylakeX"
if any(os.environ.get(k) != v for k, v in ENVIRONMENT.items()) or (AVX512 and "OPENBLAS_L2_SIZE" in os.environ):
    os.environ.update(ENVIRONMENT)
    if AVX512:
        os.environ.pop("OPENBLAS_L2_SIZE", None)
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
    p.add_argument("--tables", default="kernels,user,overhead,model",
                   help="which tables, comma-separated (default: kernels,user,overhead,model)")
    p.add_argument("--readme", metavar="FILE",
                   help="also write the tables (every table, in one run) into FILE between the lines "
                        "'<!-- vs_torch tables -->' and '<!-- /vs_torch tables -->', replacing what is there")
    p.add_argument("--python", default=os.path.join(HERE, "..", "python"),
                   help="directory of the gradkern package to measure (default: the repository's python/)")
    p.add_argument("--train-one", choices=("llama", "llama-patched-unfused-head", "llama-patched", "mamba",
                                           "mamba-patched"), help=argparse.SUPPRESS)
    p.add_argument("--steps", type=int, default=10, help=argparse.SUPPRESS)
    p.add_argument("--overhead-one", action="store_true", help=argparse.SUPPRESS)
    a = p.parse_args()
    if not set(a.tables.split(",")) <= {"kernels", "user", "overhead", "model"}:
        p.error("--tables: choose from kernels, user, overhead, model")
    if a.readme and (a.tables != "kernels,user,overhead,model" or a.op or a.quick or a.json):
        p.error("--readme: the README's tables come from one full run (no --tables, --op, --quick or --json)")
    if a.readme and readme_block(a.readme) is None:
        p.error("--readme: %s has no '%s' ... '%s' lines" % (a.readme, README_BEGIN, README_END))
    return a


README_BEGIN, README_END = "<!-- vs_torch tables -->", "<!-- /vs_torch tables -->"


def readme_block(path):
    """FILE's text split around its generated block: (before, after), or
    None when the marker lines are missing."""
    with open(path) as f:
        text = f.read()
    begin, end = text.find(README_BEGIN + "\n"), text.find(README_END + "\n")
    if begin < 0 or end < begin:
        return None
    return text[:begin + len(README_BEGIN) + 1], text[end:]


def write_readme(path, lines, seconds):
    """Replace FILE's generated block with this run's tables, dated."""
    before, after = readme_block(path)
    head = "Written by `bench/vs_torch.py --readme %s` on %s, every table from one run of %dm%02ds." % (
        os.path.basename(path), time.strftime("%Y-%m-%d"), seconds // 60, seconds % 60)
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(before + head + "\n\n" + "\n".join(lines) + "\n\n" + after)
    os.replace(tmp, path)


MATRIX_OPS = ("linear", "matmul", "attention")


def torch_blas():
    """The BLAS libraries torch's process loaded, after an f32 and a bf16
    matrix product, and the f32 rate it reached: dict(name, path, core,
    reference, onednn, gflop_s). reference: Debian's netlib BLAS is among
    them (alone, or preloaded over another, which then serves nothing)."""
    a = torch.randn(64, 64)
    a @ a
    b = a.to(torch.bfloat16)
    b @ b
    paths = set()
    with open("/proc/self/maps") as f:
        for line in f:
            p = line.split()[-1]
            if os.path.basename(p).startswith(("libblas", "libopenblas", "libmkl", "libblis", "libdnnl")):
                paths.add(os.path.realpath(p))
    onednn = sorted(p for p in paths if "libdnnl" in p)
    blas = sorted(p for p in paths if "libdnnl" not in p)
    names, core = [], ""
    for p in blas:
        if "openblas" in p:
            name = "OpenBLAS"
            try:
                import ctypes
                lib = ctypes.CDLL(p)
                lib.openblas_get_corename.restype = ctypes.c_char_p
                lib.openblas_get_config.restype = ctypes.c_char_p
                core = lib.openblas_get_corename().decode()
                name = " ".join(lib.openblas_get_config().decode().split()[:2])  # "OpenBLAS 0.3.21"
            except (OSError, AttributeError):
                pass
        elif "mkl" in p or "blis" in p:
            name = "MKL" if "mkl" in p else "BLIS"
        else:
            name = "reference BLAS (netlib)"
        if name not in names:
            names.append(name)
    reference = "reference BLAS (netlib)" in names
    x = torch.randn(1024, 1024)
    x @ x
    t0 = time.perf_counter()
    for _ in range(3):
        x @ x
    gflop_s = 3 * 2 * 1024 ** 3 / (time.perf_counter() - t0) / 1e9
    return dict(name=" + ".join(names) or "none found", path=", ".join(blas) or "-", core=core, reference=reference,
                onednn=onednn[0] if onednn else "", gflop_s=gflop_s)


def blas_text(b):
    text = "torch's BLAS: %s%s (%s; f32 1024^3 product at %.0f GFLOP/s)" % (
        b["name"], ", core " + b["core"] if b["core"] else "", b["path"], b["gflop_s"])
    if b["onednn"]:
        text += "; oneDNN loaded (%s; torch's bf16 matrix products)" % b["onednn"]
    return text


REFUSED = "no ratio: torch runs the reference BLAS (install OpenBLAS: scripts/install-deps.sh bench)"


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
    space, e.g. 4096x8192); ops with one fixed shape ignore it.

    fwd_out(ins, y) and bwd_out(ins, y, dy, grads), where the op has them,
    compute into the preallocated y and grads (torch's out= variants), as
    gradkern bench does; without them the op allocates its outputs (under
    glibc's caching policy set above)."""

    def __init__(self, name, inputs, forward, fwd_out=None, bwd_out=None):
        self.name, self.inputs, self.forward = name, inputs, forward
        self.fwd_out, self.bwd_out = fwd_out, bwd_out

    def timers(self, dtype, dims):
        """(forward timer, backward timer, how each treats its outputs)."""
        ins = self.inputs(DTYPES[dtype], dims)
        grads = [t for t in ins if isinstance(t, torch.Tensor) and t.requires_grad]
        out = self.forward(*ins)
        dy = torch.randn_like(out) if out.dim() else torch.ones_like(out)
        plain = [t.detach() if isinstance(t, torch.Tensor) else t for t in ins]
        y = out.detach().clone()

        if self.fwd_out:
            def fwd():
                with torch.no_grad():
                    self.fwd_out(plain, y)
        else:
            def fwd():
                with torch.no_grad():
                    self.forward(*ins)

        if self.bwd_out:
            gouts = [torch.empty_like(t) for t in grads]

            def bwd():
                with torch.no_grad():
                    self.bwd_out(plain, y, dy, gouts)
        else:
            def bwd():
                torch.autograd.grad(out, grads, dy, retain_graph=True)

        return fwd, bwd, ("out=" if self.fwd_out else "allocates"), ("out=" if self.bwd_out else "allocates")


aten = torch.ops.aten


def act_out(fwd, bwd):
    """out= forward and backward of an elementwise op: fwd(x, y), bwd(dy, x, y, dx)."""
    return dict(fwd_out=lambda ins, y: fwd(ins[0], y), bwd_out=lambda ins, y, dy, g: bwd(dy, ins[0], y, g[0]))


def gated_out(act_fwd):
    """y = x * act(gate) as two kernels into preallocated memory (the
    activation into a preallocated temporary)."""
    tmp = {}

    def fwd(ins, y):
        key = (y.shape, y.dtype)   # one temporary per shape and dtype
        t = tmp.get(key)
        if t is None:
            t = tmp[key] = torch.empty_like(y)
        act_fwd(ins[1], t)
        torch.mul(ins[0], t, out=y)
    return dict(fwd_out=fwd)


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
        Op("relu", one, F.relu, **act_out(lambda x, y: torch.clamp_min(x, 0, out=y),
                                          lambda dy, x, y, dx: aten.threshold_backward.grad_input(dy, y, 0,
                                                                                                 grad_input=dx))),
        Op("gelu", one, F.gelu, **act_out(lambda x, y: torch._C._nn.gelu(x, out=y),
                                          lambda dy, x, y, dx: aten.gelu_backward.grad_input(dy, x, grad_input=dx))),
        Op("silu", one, F.silu, **act_out(lambda x, y: torch._C._nn.silu(x, out=y),
                                          lambda dy, x, y, dx: aten.silu_backward.grad_input(dy, x, grad_input=dx))),
        Op("sigmoid", one, torch.sigmoid, **act_out(
            lambda x, y: torch.sigmoid(x, out=y),
            lambda dy, x, y, dx: aten.sigmoid_backward.grad_input(dy, y, grad_input=dx))),
        Op("softplus", one, F.softplus, **act_out(
            lambda x, y: torch._C._nn.softplus(x, out=y),
            lambda dy, x, y, dx: aten.softplus_backward.grad_input(dy, x, 1, 20, grad_input=dx))),
        Op("glu", two, lambda x, g: x * torch.sigmoid(g), **gated_out(lambda g, t: torch.sigmoid(g, out=t))),
        Op("reglu", two, lambda x, g: x * F.relu(g), **gated_out(lambda g, t: torch.clamp_min(g, 0, out=t))),
        Op("swiglu", two, lambda x, g: x * F.silu(g), **gated_out(lambda g, t: torch._C._nn.silu(g, out=t))),
        Op("geglu", two, lambda x, g: x * F.gelu(g), **gated_out(lambda g, t: torch._C._nn.gelu(g, out=t))),
        Op("rmsnorm", lambda dt, R: (rnd(R, dt), rnd(R[-1:], dt)), rms_norm),
        Op("layernorm", lambda dt, R: (rnd(R, dt), rnd(R[-1:], dt), rnd(R[-1:], dt)),
           lambda x, w, b: F.layer_norm(x, x.shape[-1:], w, b)),
        Op("softmax", one, lambda x: torch.softmax(x, -1),
           fwd_out=lambda ins, y: aten._softmax.out(ins[0], -1, False, out=y),
           bwd_out=lambda ins, y, dy, g: aten._softmax_backward_data.out(dy, y, -1, y.dtype, grad_input=g[0])),
        Op("add", two, lambda a, b: a + b, fwd_out=lambda ins, y: torch.add(ins[0], ins[1], out=y),
           bwd_out=lambda ins, y, dy, g: (g[0].copy_(dy), g[1].copy_(dy))),
        Op("mul", two, lambda a, b: a * b, fwd_out=lambda ins, y: torch.mul(ins[0], ins[1], out=y),
           bwd_out=lambda ins, y, dy, g: (torch.mul(dy, ins[1], out=g[0]), torch.mul(dy, ins[0], out=g[1]))),
        Op("linear", lambda dt, R: (rnd(R, dt), rnd((5632, 2048), dt, scale=0.02), rnd((5632,), dt)), F.linear,
           fwd_out=lambda ins, y: torch.addmm(ins[2], ins[0], ins[1].t(), out=y),
           bwd_out=lambda ins, y, dy, g: (torch.mm(dy, ins[1], out=g[0]), torch.mm(dy.t(), ins[0], out=g[1]),
                                          torch.sum(dy, 0, out=g[2]))),
        Op("matmul", lambda dt, R: (rnd(R, dt), rnd((2048, 5632), dt, scale=0.02)), torch.matmul,
           fwd_out=lambda ins, y: torch.matmul(ins[0], ins[1], out=y),
           bwd_out=lambda ins, y, dy, g: (torch.mm(dy, ins[1].t(), out=g[0]), torch.mm(ins[0].t(), dy, out=g[1]))),
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


def gradkern_rows(a, name):
    """`gradkern bench --json` for one benchmark (all of them when name is
    None): (rows, the limits line it printed)."""
    cmd = [a.gradkern, "bench", "--json"] + (["--quick"] if a.quick else []) + (["--op", name] if name else [])
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        return json.loads(proc.stdout), proc.stderr.strip()
    except json.JSONDecodeError:
        sys.exit("vs_torch: %s printed no JSON (exit %d): %s" % (" ".join(cmd), proc.returncode, proc.stderr))


def torch_row(r, table, timers, a, repeat, budget, scan_steps):
    """Torch's time for gradkern's row r (a dict for the table), or None
    where torch has no counterpart. timers keeps one op's inputs."""
    if "error" in r:
        return None
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
            how = timers[key][2 if direction == "forward" else 3]
            ms = median_ms(fn, repeat, budget)
            note = "torch " + how
            if op == "attention" and dims[2] >= ATTN_BIG_T:
                ms *= dims[0] * dims[1] / ATTN_BIG_HEADS
                note += "; torch timed on %d heads of one sequence, scaled to %d x %d" % (ATTN_BIG_HEADS, dims[0],
                                                                                       dims[1])
            if op in ("relu", "sigmoid") and direction == "backward":
                note += "; both from the output y (torch's autograd saves y; gradkern's act.from_output)"
            if op == "add" and direction == "backward":
                note = "torch out=: dy copied into da and db, as gradkern writes both"
            if op == "selective_scan":
                ms *= 1024 / scan_steps
                note += "; torch loop timed over L=%d steps, extrapolated linearly to L=1024" % scan_steps
        elif op == "cross_entropy_fused":
            fwd, bwd = (timers.get(("cross_entropy", dtype, dims)) or table["cross_entropy"].timers(dtype, dims))[:2]
            ms = median_ms(fwd, repeat, budget) + median_ms(bwd, repeat, budget)
            note = "torch allocates: loss forward + backward (two passes, separate dlogits)"
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
            note = "torch allocates: forward + backward; torch twins of tests/python/test_models.py"
        else:
            return None
    except RuntimeError as e:  # a dtype torch's CPU kernels do not take
        return dict(op=op, direction=direction, dtype=dtype, shape=r["shape"], gradkern_ms=r["gradkern_ms"],
                    torch_ms=None, speedup=None, fraction_of_limit=r.get("fraction_of_limit"),
                    note="torch: %s" % str(e).split("\n")[0])
    speedup = round(ms / r["gradkern_ms"], 3)
    if op in MATRIX_OPS and a.blas["reference"]:
        speedup, note = None, REFUSED + "; " + note
    progress("%-20s %-8s %-5s torch %10.2f ms" % (op, direction, dtype, ms))
    return dict(op=op, direction=direction, dtype=dtype, shape=r["shape"], gradkern_ms=r["gradkern_ms"],
                torch_ms=round(ms, 4), speedup=speedup,
                fraction_of_limit=r.get("fraction_of_limit"), limit_name=r.get("limit_name"), note=note)


def faster_sides(x, y):
    """Row x or y with the faster gradkern time (and its fraction of the
    limit), with the faster torch time; the speedup from the two."""
    o = dict(x if x["gradkern_ms"] <= y["gradkern_ms"] else y)
    times = [t for t in (x["torch_ms"], y["torch_ms"]) if t is not None]
    if times:
        o["torch_ms"] = min(times)
        if o["speedup"] is not None:
            o["speedup"] = round(o["torch_ms"] / o["gradkern_ms"], 3)
    return o


def kernel_table(a):
    """The kernels table: (rows, markdown lines). Each benchmark's gradkern
    rows are measured just before torch's (one `gradkern bench --op NAME`
    per benchmark), twice in turn (once with --quick), and each side keeps
    its faster round: this shared machine's memory bandwidth was seen to
    change by 2x within a minute, and one gradkern run for every row before
    all of torch's let the ratios swing with it."""
    if a.op:
        names = [a.op]
    else:
        proc = subprocess.run([a.gradkern, "bench", "--list"], stdout=subprocess.PIPE, text=True, check=True)
        names = proc.stdout.split()
    repeat, budget = (3, 0.6) if a.quick else (10, 4.0)
    scan_steps = 8 if a.quick else 32
    table = ops(scan_steps)
    timers = {}
    out, gk_rows, limits_lines = [], [], []
    for name in names:
        best = {}  # (op, direction, dtype, shape): the row with each side's faster round
        for _ in range(1 if a.quick else 2):
            rows, limits_line = gradkern_rows(a, name)
            gk_rows += rows
            limits_lines.append(limits_line)
            for r in rows:
                row = torch_row(r, table, timers, a, repeat, budget, scan_steps)
                if row:
                    key = (row["op"], row["direction"], row["dtype"], row["shape"])
                    best[key] = faster_sides(best[key], row) if key in best else row
        out += best.values()
    # The limits each gradkern run measured, as ranges over the runs.
    limits = {}
    for r in gk_rows:
        if r.get("limit_name") and r.get("limit_value"):
            limits.setdefault(r["limit_name"], set()).add(r["limit_value"])
    products = [x for x in limits_lines if "OpenBLAS" in x] or limits_lines
    lines = [limits_lines[0] if len(limits_lines) == 1 else
             "gradkern bench: one run per benchmark, each measuring its limits just before its rows;"
             + products[0].split(";", 1)[-1]]
    if limits:
        lines.append("limits measured in gradkern's runs: " + ", ".join(
            "%s %.1f" % (k, min(v)) if len(v) == 1 else "%s %.1f-%.1f" % (k, min(v), max(v))
            for k, v in sorted(limits.items())))
    # torch's fraction of the same limit: the limit's time over torch's time.
    # A side at fraction f can be at most 1/f times faster than the other
    # without passing the limit.
    lines += ["", "| op | dir | dtype | shape | gradkern ms | torch ms | speedup | of limit | torch of limit | note |",
              "|---|---|---|---|---:|---:|---:|---:|---:|---|"]
    for o in out:
        f = o["fraction_of_limit"]
        frac = "%.0f%% %s" % (100 * f, o.get("limit_name", "").replace("_gb_s", "").replace(
            "_gflop_s", "")) if f is not None else "-"
        tfrac = "%.0f%%" % (100 * f * o["gradkern_ms"] / o["torch_ms"]) if f is not None and o["torch_ms"] else "-"
        tm = "%.2f" % o["torch_ms"] if o["torch_ms"] is not None else "-"
        sp = "%.2fx" % o["speedup"] if o["speedup"] is not None else "-"
        lines.append("| %s | %s | %s | %s | %.2f | %s | %s | %s | %s | %s |" % (
            o["op"], o["direction"], o["dtype"], o["shape"], o["gradkern_ms"], tm, sp, frac, tfrac, o["note"]))
    scan = {o["direction"]: o for o in out if o["op"] == "selective_scan" and o["dtype"] == "f32"}
    if len(scan) == 2 and all(o["torch_ms"] for o in scan.values()):
        g = sum(o["gradkern_ms"] for o in scan.values())
        t = sum(o["torch_ms"] for o in scan.values())
        lines.append("\nselective scan f32 forward + backward: gradkern %.1f ms, torch loop %.1f ms (extrapolated): %.1fx"
                     % (g, t, t / g))
    return out, lines


def progress(text):
    print("  " + text, file=sys.stderr, flush=True)


# ---------------------------------------------------------------- as a user sees it

def user_ops(gk):
    """(name, shape text, inputs(), gradkern function, torch function,
    tensors): the binding's autograd functions against their
    torch.nn.functional equivalents, on the same inputs. `tensors` is what
    the forward and the backward must read and write at least, in tensors
    of the first input's size (each read or written once; weights and
    per-row statistics left out), with a dense dy and with y.sum()'s
    stride-0 dy (not read); None for the ops bound by arithmetic."""
    R = (4096, 2048)
    one = lambda: (rnd(R, torch.float32),)  # noqa: E731
    two = lambda: (rnd(R, torch.float32), rnd(R, torch.float32))  # noqa: E731
    B, T, H, Dh = 4, 1024, 16, 64
    rope_tab = rope_inputs(torch.float32, None)[1:]

    def attn_in():
        return tuple(rnd((B, H, T, Dh), torch.float32) for _ in range(3))
    act = (5, 4)   # forward x -> y; backward dy, x (or y) -> dx
    return [
        ("relu", "4096x2048", one, gk.relu, F.relu, act),
        ("gelu", "4096x2048", one, gk.gelu, F.gelu, act),
        ("silu", "4096x2048", one, gk.silu, F.silu, act),
        ("sigmoid", "4096x2048", one, gk.sigmoid, torch.sigmoid, act),
        ("softplus", "4096x2048", one, gk.softplus, F.softplus, act),
        ("swiglu", "4096x2048 (x, gate)", two, lambda x, g: gk.swiglu(x, gate=g), lambda x, g: x * F.silu(g),
         (8, 7)),   # x, gate -> y; dy, x, gate -> dx, dgate
        ("rms_norm", "4096x2048", lambda: (rnd(R, torch.float32), rnd(R[-1:], torch.float32)),
         lambda x, w: gk.rms_norm(x, 2048, w, eps=1e-6), rms_norm, act),
        ("layer_norm", "4096x2048", lambda: (rnd(R, torch.float32), rnd(R[-1:], torch.float32),
                                             rnd(R[-1:], torch.float32)),
         lambda x, w, b: gk.layer_norm(x, 2048, w, b), lambda x, w, b: F.layer_norm(x, (2048,), w, b), act),
        ("softmax", "4096x2048", one, lambda x: gk.softmax(x, -1), lambda x: F.softmax(x, -1), act),
        ("cross_entropy", "2048x32000", lambda: (rnd((2048, 32000), torch.float32), torch.randint(0, 32000, (2048,))),
         gk.cross_entropy, F.cross_entropy, (3, 3)),   # logits -> loss; logits -> dlogits (dloss a scalar)
        ("rope", "4x1024x16x64", lambda: (rnd((B, T, H, Dh), torch.float32),),
         lambda x: gk.rope(x), lambda x: rope(x, *rope_tab), (4, 3)),   # x -> y; dy -> dx
        ("attention", "4x16x1024x64 causal", attn_in,
         lambda q, k, v: gk.scaled_dot_product_attention(q, k, v, is_causal=True), attention, None),
        ("linear", "4096x2048 -> 5632", lambda: (rnd(R, torch.float32), rnd((5632, 2048), torch.float32, scale=0.02),
                                                 rnd((5632,), torch.float32)),
         gk.linear, F.linear, None),
    ]


def triad_gb_s(repeat, budget):
    """a = b + s c on three 64 MiB f32 tensors with torch (out=, the same
    threads as the table): GB/s counting 12 bytes an element, the triad's
    convention (gradkern bench's limit)."""
    n = 16 << 20
    a, b, c = torch.empty(n), torch.rand(n), torch.rand(n)
    ms = median_ms(lambda: torch.add(b, c, alpha=0.5, out=a), repeat, budget)
    return 12 * n / (ms * 1e6)


def user_table(a, gk):
    """Forward + backward through autograd, both allocating: y.backward(dy)
    with a contiguous dy, and y.sum().backward() (a stride-0 dy)."""
    repeat, budget = (3, 0.6) if a.quick else (7, 3.0)
    triad = triad_gb_s(repeat, budget)
    rows = []
    for name, shape, make, gk_fn, torch_fn, tensors in user_ops(gk):
        if a.op and a.op not in (name, name.replace("_", "")):
            continue
        ins = make()
        grads = [t for t in ins if t.requires_grad]
        dy = torch.randn_like(torch_fn(*ins)) if name != "cross_entropy" else None
        row = dict(op=name, shape=shape)
        for side, fn in (("gradkern", gk_fn), ("torch", torch_fn)):
            def step_dy(fn=fn):
                y = fn(*ins)
                torch.autograd.grad(y, grads, dy if dy is not None else torch.ones_like(y))

            def step_sum(fn=fn):
                torch.autograd.grad(fn(*ins).sum(), grads)
            row[side + "_dy_ms"] = round(median_ms(step_dy, repeat, budget), 3)
            row[side + "_sum_ms"] = round(median_ms(step_sum, repeat, budget), 3)
        row["speedup_dy"] = round(row["torch_dy_ms"] / row["gradkern_dy_ms"], 3)
        row["speedup_sum"] = round(row["torch_sum_ms"] / row["gradkern_sum_ms"], 3)
        if tensors:   # the time the least traffic takes at the triad's rate
            nbytes = ins[0].numel() * ins[0].element_size()
            row["bound_dy_ms"], row["bound_sum_ms"] = (round(t * nbytes / (triad * 1e6), 3) for t in tensors)
        if name in MATRIX_OPS and a.blas["reference"]:
            row["speedup_dy"] = row["speedup_sum"] = None
        rows.append(row)
        progress("user %-14s gradkern %8.2f / %8.2f ms, torch %8.2f / %8.2f ms" % (
            name, row["gradkern_dy_ms"], row["gradkern_sum_ms"], row["torch_dy_ms"], row["torch_sum_ms"]))
    names = {"rms_norm": "torch: the composite x * rsqrt(mean(x^2) + eps) * w",
             "swiglu": "torch: x * F.silu(gate)", "rope": "torch: the rotate-half composite with cos/sin tables",
             "attention": "torch %s has no F.scaled_dot_product_attention: softmax(q k^T s + mask) v" % torch.__version__}
    lines = ["Memory bound: the least traffic of forward + backward (each tensor read or written once) at the "
             "triad's %.1f GB/s (torch.add(b, c, alpha=s, out=a), 3 x 64 MiB f32, measured in this run); "
             "%% of bound: that time over each side's (over 100%%: some tensors were still in the 32 MiB L3)."
             % triad, "",
             "| op | shape | gradkern ms y.backward(dy) | torch ms | speedup | gradkern ms y.sum().backward() "
             "| torch ms | speedup | memory bound ms (dy, sum) | % of bound gradkern, torch (dy) | (sum) | note |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    def ratio(v):
        return "%.2fx" % v if v is not None else "-"
    def of_bound(r, kind):
        b = r.get("bound_%s_ms" % kind)
        if not b:
            return "-"
        return "%.0f%%, %.0f%%" % (100 * b / r["gradkern_%s_ms" % kind], 100 * b / r["torch_%s_ms" % kind])
    for r in rows:
        note = names.get(r["op"], "") if r["speedup_dy"] is not None or r["op"] not in MATRIX_OPS else REFUSED
        bound = "%.2f, %.2f" % (r["bound_dy_ms"], r["bound_sum_ms"]) if "bound_dy_ms" in r else "-"
        lines.append("| %s | %s | %.2f | %.2f | %s | %.2f | %.2f | %s | %s | %s | %s | %s |" % (
            r["op"], r["shape"], r["gradkern_dy_ms"], r["torch_dy_ms"], ratio(r["speedup_dy"]), r["gradkern_sum_ms"],
            r["torch_sum_ms"], ratio(r["speedup_sum"]), bound, of_bound(r, "dy"), of_bound(r, "sum"), note))
    return rows, lines


# ---------------------------------------------------------------- per-call overhead

def overhead_cases(gk):
    """(call, shape, gradkern function, torch function) on tiny tensors."""
    x = torch.randn(64)
    xg = x.clone().requires_grad_(True)
    xr, w = torch.randn(4, 64, requires_grad=True), torch.ones(64, requires_grad=True)
    return [
        ("silu forward, no grad", "64", lambda: gk.silu(x), lambda: F.silu(x)),
        ("silu forward, requires_grad", "64", lambda: gk.silu(xg), lambda: F.silu(xg)),
        ("silu forward + y.sum().backward()", "64", lambda: gk.silu(xg).sum().backward(),
         lambda: F.silu(xg).sum().backward()),
        ("rms_norm forward, requires_grad", "4x64", lambda: gk.rms_norm(xr, 64, w), lambda: rms_norm(xr, w)),
    ]


def overhead_one(a, gk):
    """One process's per-call times: prints JSON {call: [gradkern us, torch us]}.
    Each case is timed in loops of about half a millisecond (shorter than a
    scheduler time slice, so that some loops run undisturbed on a shared
    machine), gradkern and torch taking turns, and the best loop of each is
    kept (the machine's other work only adds)."""
    loops = 30 if a.quick else 150
    out = {}
    for name, _, g, t in overhead_cases(gk):
        calls = []
        for fn in (g, t):
            t0 = time.perf_counter()
            for _ in range(200):
                fn()
            calls.append(max(20, int(0.5e-3 / ((time.perf_counter() - t0) / 200))))
        best = [math.inf, math.inf]
        for _ in range(loops):
            for i, fn in enumerate((g, t)):
                t0 = time.perf_counter()
                for _ in range(calls[i]):
                    fn()
                best[i] = min(best[i], (time.perf_counter() - t0) / calls[i] * 1e6)
        out[name] = best
    print(json.dumps(dict(binding=gk.binding(), us=out)))


def overhead_table(a, gk):
    """Microseconds per call on tiny tensors: what the binding's Python work
    and its call into the library cost against torch's dispatch, through the
    compiled module gradkern._gkrun (where built) and through ctypes, each
    in a fresh process."""
    runs = []
    for binding in (["extension"] if gk.binding() == "extension" else []) + ["ctypes"]:
        cmd = [sys.executable, os.path.abspath(__file__), "--overhead-one", "--python", a.python]
        if a.quick:
            cmd.append("--quick")
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env=dict(os.environ, GRADKERN_BINDING=binding))
        if proc.returncode:
            sys.exit("vs_torch: %s failed: %s" % (" ".join(cmd), proc.stderr))
        runs.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    head = "| call | shape | " + " | ".join("gradkern us (%s) | torch us | ratio" % r["binding"] for r in runs) + " |"
    rows, lines = [], [head, "|---|---|" + "---:|---:|---:|" * len(runs)]
    for name, shape, _, _ in overhead_cases(gk):
        r = dict(call=name, shape=shape)
        cells = []
        for run in runs:
            g, t = run["us"][name]
            r.update({"gradkern_%s_us" % run["binding"]: round(g, 2), "torch_%s_us" % run["binding"]: round(t, 2),
                      "ratio_%s" % run["binding"]: round(g / t, 2)})
            cells.append("%.2f | %.2f | %.1fx" % (g, t, g / t))
        rows.append(r)
        lines.append("| %s | %s | %s |" % (name, shape, " | ".join(cells)))
    return rows, lines


# ---------------------------------------------------------------- patched model

MODEL = dict(vocab_size=8192, hidden_size=256, intermediate_size=688, num_hidden_layers=4, num_attention_heads=8,
             num_key_value_heads=4)
MAMBA_MODEL = dict(vocab_size=8192, hidden_size=256, state_size=16, expand=2, num_hidden_layers=4)
# (batch, tokens per sequence, timed steps or None for --steps): the unpatched Mamba's plain-torch scan
# (a Python loop over time whose backward writes a full-size zero gradient per step) takes minutes a
# step at 8 x 256 here, so the Mamba pair runs a smaller batch and 3 steps
MODEL_SHAPES = {"llama": (8, 256, None), "mamba": (2, 128, 3)}
# name -> (which model, gradkern.patch keyword arguments or None for unpatched, the row's label)
MODEL_RUNS = {
    "llama": ("llama", None, "LLaMA unpatched (PyTorch eager)"),
    "llama-patched-unfused-head": ("llama", dict(lm_head_loss=False),
                                   "LLaMA gradkern.patch(model, lm_head_loss=False): logits stored"),
    "llama-patched": ("llama", {}, "LLaMA gradkern.patch(model): LM head fused with the loss"),
    "mamba": ("mamba", None, "Mamba unpatched (PyTorch eager, the step-by-step scan)"),
    "mamba-patched": ("mamba", {}, "Mamba gradkern.patch(model): conv1d + selective scan, fused LM head"),
}


def rss_mib(field):
    """VmRSS (now) or VmHWM (the peak) of this process, in MiB: from
    /proc/self/status, which starts again at exec (getrusage's ru_maxrss
    carries the parent's peak over)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    return float("nan")


def train_one(run, steps):
    """One process's training run: prints JSON with tokens/s and peak RSS."""
    sys.path.insert(0, os.path.join(HERE, "..", "tests", "python"))
    from hf_llama import LlamaConfig, LlamaForCausalLM  # noqa: E402
    from hf_mamba import MambaConfig, MambaForCausalLM  # noqa: E402
    import gradkern  # noqa: E402
    kind, patch_kwargs, _ = MODEL_RUNS[run]
    torch.manual_seed(0)
    if kind == "llama":
        model = LlamaForCausalLM(LlamaConfig(**MODEL))
    else:
        model = MambaForCausalLM(MambaConfig(**MAMBA_MODEL))
    patched = patch_kwargs is not None
    if patched:
        gradkern.patch(model, **patch_kwargs)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    batch, seq, fixed_steps = MODEL_SHAPES[kind]
    steps = fixed_steps or steps
    vocab = model.config.vocab_size
    ids = torch.randint(0, vocab, (batch, seq), generator=torch.Generator().manual_seed(1))
    rss0 = rss_mib("VmRSS")
    times, losses = [], []
    for _ in range(steps + 1):       # the first step warms up
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss, _ = model(ids, labels=ids)
        loss.backward()
        opt.step()
        times.append(time.perf_counter() - t0)
        losses.append(float(loss))
    step_s = statistics.median(times[1:])
    print(json.dumps(dict(run=run, patched=patched, step_ms=round(1e3 * step_s, 2),
                          tokens_per_s=round(batch * seq / step_s, 1), batch=batch, seq=seq, steps=steps,
                          peak_rss_mib=round(rss_mib("VmHWM"), 1), rss_before_training_mib=round(rss0, 1),
                          params=sum(p.numel() for p in model.parameters()), last_loss=round(losses[-1], 4))))


def model_table(a):
    steps = 3 if a.quick else 10
    rows = {}
    for run in MODEL_RUNS:
        cmd = [sys.executable, os.path.abspath(__file__), "--train-one", run, "--steps", str(steps),
               "--python", a.python]
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if proc.returncode:
            sys.exit("vs_torch: %s failed: %s" % (" ".join(cmd), proc.stderr))
        rows[run] = json.loads(proc.stdout.strip().splitlines()[-1])
        progress("model %s %s" % (run, rows[run]))
    ll, mm = rows["llama"], rows["mamba"]
    lines = ["LLaMA as Hugging Face writes it (tests/python/hf_llama.py): %s, %.1fM parameters, batch %d x %d tokens, "
             "median of %d steps; Mamba as Hugging Face writes it (tests/python/hf_mamba.py, LM head tied to the "
             "embeddings): %s, %.1fM parameters, batch %d x %d tokens, median of %d steps; AdamW (torch's), f32, "
             "one warm-up step first, each run in a fresh process"
             % (", ".join("%s=%s" % kv for kv in MODEL.items()), ll["params"] / 1e6, ll["batch"], ll["seq"], ll["steps"],
                ", ".join("%s=%s" % kv for kv in MAMBA_MODEL.items()), mm["params"] / 1e6, mm["batch"], mm["seq"],
                mm["steps"]),
             "", "| model | step ms | tokens/s | peak RSS MiB | RSS before training MiB | vs unpatched: tokens/s, peak RSS |",
             "|---|---:|---:|---:|---:|---|"]
    for run, (kind, _, label) in MODEL_RUNS.items():
        r, base = rows[run], rows[kind]
        lines.append("| %s | %.1f | %.0f | %.0f | %.0f | %.2fx, %.2fx |" % (
            label, r["step_ms"], r["tokens_per_s"], r["peak_rss_mib"], r["rss_before_training_mib"],
            r["tokens_per_s"] / base["tokens_per_s"], r["peak_rss_mib"] / base["peak_rss_mib"]))
    return list(rows.values()), lines


def main():
    a = parse()
    torch.set_num_threads(2)
    sys.path.insert(0, a.python)
    if a.train_one:
        train_one(a.train_one, a.steps)
        return
    import gradkern as gk  # noqa: E402
    gk.set_num_threads(2)
    if a.overhead_one:
        overhead_one(a, gk)
        return
    a.blas = torch_blas()
    if a.blas["reference"]:
        progress("torch runs the reference BLAS (%s): matrix-product ratios will not be printed" % a.blas["path"])
    tables = a.tables.split(",")
    conditions = ("torch %s and gradkern %s (%s), %d threads each; OPENBLAS_CORETYPE=%s; glibc MALLOC_MMAP_THRESHOLD_=%s "
                  "MALLOC_TRIM_THRESHOLD_=%s (freed memory kept and reused)"
                  % (torch.__version__, gk.__version__, gk.library_path, torch.get_num_threads(),
                     os.environ.get("OPENBLAS_CORETYPE", "unset"), os.environ["MALLOC_MMAP_THRESHOLD_"],
                     os.environ["MALLOC_TRIM_THRESHOLD_"])) + "; " + blas_text(a.blas)
    started = time.time()
    results, text = {"conditions": conditions}, [conditions]
    titles = {"kernels": "Kernels: gradkern into preallocated outputs; torch with out= where the op has it "
                         "(else allocating, under the policy above)",
              "user": "As a PyTorch user sees it: the binding's autograd functions against torch, forward + "
                      "backward, both allocating",
              "overhead": "Per-call overhead (best loop; gradkern and torch take turns in one process per binding)",
              "model": "Training LLaMA- and Mamba-style torch models: unpatched against gradkern.patch(model)"}
    for name in tables:
        rows, lines = {"kernels": lambda: kernel_table(a), "user": lambda: user_table(a, gk),
                       "overhead": lambda: overhead_table(a, gk), "model": lambda: model_table(a)}[name]()
        results[name] = rows
        text += ["", "### " + titles[name], ""] + lines
    print(json.dumps(results, indent=1) if a.json else "\n".join(text))
    if a.readme:
        write_readme(a.readme, text, int(time.time() - started))


if __name__ == "__main__":
    main()
