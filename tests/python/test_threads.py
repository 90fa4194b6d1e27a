"""Several Python threads calling gradkern at once (ctypes releases the GIL
during each library call), sharing the plan cache, while the main thread
keeps changing gradkern.set_num_threads: every forward output and gradient
must have the bits of the same computation run alone with one thread."""
import threading

import torch

import gradkern

CALLERS = 4
ROUNDS = 3


def _inputs(seed):
    g = torch.Generator().manual_seed(seed)
    r = lambda *s: torch.randn(*s, generator=g)  # noqa: E731
    return {
        "x": r(64, 256), "w": r(256), "lw": r(96, 256), "lb": r(96),
        "q": r(1, 4, 80, 16), "k": r(1, 2, 80, 16), "v": r(1, 2, 80, 16),
        "u": r(2, 32, 48), "delta": r(2, 32, 48).abs() * 0.3, "A": -r(32, 8).abs() - 0.2,
        "B": r(2, 8, 48), "C": r(2, 8, 48), "cw": r(32, 4), "logits": r(64, 50),
        "target": torch.randint(0, 50, (64,), generator=g),
    }


def _step(t):
    """Forward and backward of several op families; the outputs and every
    gradient, in a fixed order."""
    t = {k: (v.clone().requires_grad_(v.is_floating_point())) for k, v in t.items()}
    h = gradkern.rms_norm(t["x"], (256,), t["w"])
    h = gradkern.swiglu(gradkern.linear(h, t["lw"], t["lb"]))
    o = gradkern.scaled_dot_product_attention(t["q"], t["k"], t["v"], is_causal=True)
    c = gradkern.causal_conv1d(t["u"], t["cw"], activation="silu")
    s = gradkern.selective_scan(c, t["delta"], t["A"], t["B"], t["C"], delta_softplus=True)
    ce = gradkern.cross_entropy(t["logits"], t["target"])
    loss = h.square().sum() + o.square().sum() + s.square().sum() + ce
    loss.backward()
    outs = [h, o, s, ce]
    return [x.detach() for x in outs] + [t[k].grad for k in sorted(t) if t[k].grad is not None]


def test_callers_and_thread_count_changes(restore_threads):
    inputs = [_inputs(i) for i in range(CALLERS)]
    gradkern.set_num_threads(1)
    alone = [_step(t) for t in inputs]

    failures = []

    def caller(i):
        try:
            for _ in range(ROUNDS):
                got = _step(inputs[i])
                if not all(torch.equal(a, b) for a, b in zip(got, alone[i])):
                    failures.append("caller %d: results differ from one thread alone" % i)
        except Exception as e:  # reported below, in the main thread
            failures.append("caller %d: %r" % (i, e))

    threads = [threading.Thread(target=caller, args=(i,)) for i in range(CALLERS)]
    for th in threads:
        th.start()
    changes = 0
    while any(th.is_alive() for th in threads):
        gradkern.set_num_threads(1 + changes % 3)
        changes += 1
        threads[0].join(0.002)
    for th in threads:
        th.join()
    assert not failures, failures
    assert changes > 1


def test_kernels_on_torchs_openmp_threads(restore_threads):
    """share_torch_threads() puts gradkern's parallel sections on torch's
    OpenMP team (gradkern.threads_runtime() names the library);
    share_torch_threads(False) goes back to gradkern's own pool, the default;
    results are the same bits on both, for one thread and for several."""
    assert "ATen parallel backend: OpenMP" in torch.__config__.parallel_info()
    assert gradkern.threads_runtime() is None
    t = _inputs(7)
    gradkern.set_num_threads(1)
    alone = _step(t)
    try:
        runtime = gradkern.share_torch_threads()
        assert runtime and "libgomp" in runtime and gradkern.threads_runtime() == runtime, runtime
        for share in (True, False):
            assert gradkern.share_torch_threads(share) == (runtime if share else None)
            assert gradkern.threads_runtime() == (runtime if share else None)
            for n in (2, 3):
                gradkern.set_num_threads(n)
                assert all(torch.equal(a, b) for a, b in zip(_step(t), alone)), (share, n)
    finally:
        gradkern.share_torch_threads(False)


def test_openmp_at_import_when_asked():
    """GRADKERN_THREADS=openmp at import shares torch's OpenMP team."""
    import os
    import subprocess
    import sys
    code = "import gradkern; print(gradkern.threads_runtime())"
    out = subprocess.run([sys.executable, "-c", code], env=dict(os.environ, GRADKERN_THREADS="openmp"),
                         capture_output=True, text=True, check=True)
    assert "libgomp" in out.stdout, out
