"""PyTorch's time for the work bench_transformer times (a benchmark, not a test).

Run with Debian's torch and OpenBLAS told the CPU (see MACHINE.md):
  OPENBLAS_CORETYPE=SkylakeX /usr/bin/python3 bench/bench_torch.py [threads]
Attention is the plain composition (torch 1.13 has no fused CPU kernel):
softmax(q k^T scale + causal mask) v, forward and backward through autograd.
"""
import sys
import time

import torch

threads = int(sys.argv[1]) if len(sys.argv) > 1 else 2
torch.set_num_threads(threads)
print(f"torch {torch.__version__}, threads {torch.get_num_threads()}")


def best(fn, reps=3):
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


x = torch.randn(4096, 2048, requires_grad=True)
w = torch.randn(5632, 2048, requires_grad=True)
b = torch.randn(5632, requires_grad=True)
y = torch.nn.functional.linear(x, w, b)
g = torch.randn_like(y)
flops = 2.0 * 4096 * 2048 * 5632
t = best(lambda: torch.nn.functional.linear(x, w, b))
print(f"linear forward  f32 4096x2048 -> 5632: {t * 1e3:.1f} ms, {flops / t * 1e-9:.1f} GFLOP/s")
t = best(lambda: torch.autograd.grad(y, (x, w, b), g, retain_graph=True))
print(f"linear backward f32 4096x2048 -> 5632: {t * 1e3:.1f} ms, {2 * flops / t * 1e-9:.1f} GFLOP/s")

B, H, T, D = 4, 16, 1024, 64
q, k, v = (torch.randn(B, H, T, D, requires_grad=True) for _ in range(3))
mask = torch.full((T, T), float("-inf")).triu(1)


def attention():
    s = q @ k.transpose(-1, -2) * D ** -0.5 + mask
    return torch.softmax(s, -1) @ v


o = attention()
go = torch.randn_like(o)
tf = best(attention)
tb = best(lambda: torch.autograd.grad(o, (q, k, v), go, retain_graph=True))
print(f"attention forward  f32 causal B=4 H=16 T=1024 Dh=64: {tf * 1e3:.1f} ms")
print(f"attention backward f32 causal B=4 H=16 T=1024 Dh=64: {tb * 1e3:.1f} ms")
print(f"attention forward + backward: {(tf + tb) * 1e3:.1f} ms")
