"""The backward kernels with the dy autograd hands over for y.sum() (one
value broadcast, every stride 0) against a contiguous dy, through the
binding's plans (a benchmark: nothing asserts).

    GRADKERN_LIB=build/libgradkern.so /usr/bin/python3 bench/broadcast_dy.py [--python DIR]

Median of 300 runs each, 2 threads, outputs preallocated.
"""
import argparse
import os
import statistics
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--python", default=os.path.join(HERE, "..", "python"), help="the gradkern package's directory")
    a = p.parse_args()
    sys.path.insert(0, a.python)
    import gradkern
    from gradkern import _core
    gradkern.set_num_threads(2)
    x = torch.randn(1024, 1024)
    w = torch.rand(1024) + 0.5
    rstd = torch.rand(1024) + 0.5
    cases = [
        ("silu backward", _core.get_plan("silu", "backward", torch.float32, (1024, 1024)),
         lambda dy: {"dy": dy, "x": x, "dx": torch.empty_like(x)}),
        ("rmsnorm backward", _core.get_plan("rmsnorm", "backward", torch.float32, (1024, 1024), normalized_rank=1,
                                            eps=1e-6, has_weight=1, has_bias=0, accumulate=0),
         lambda dy: {"dy": dy, "x": x, "weight": w, "rstd": rstd, "dx": torch.empty_like(x),
                     "dweight": torch.empty_like(w)}),
    ]
    print("gradkern %s (%s), 2 threads, 1024x1024 f32, median of 300 runs" % (gradkern.__version__,
                                                                            gradkern.library_path))
    for name, plan, args_of in cases:
        ms = {}
        for kind, dy in (("contiguous", torch.ones(1024, 1024)), ("stride 0", torch.ones(()).expand(1024, 1024))):
            args = args_of(dy)
            for _ in range(10):
                plan.run(args)
            ts = []
            for _ in range(300):
                t0 = time.perf_counter()
                plan.run(args)
                ts.append(time.perf_counter() - t0)
            ms[kind] = 1e3 * statistics.median(ts)
        print("%-17s dy contiguous %.3f ms, dy stride 0 %.3f ms" % (name, ms["contiguous"], ms["stride 0"]))


if __name__ == "__main__":
    main()
