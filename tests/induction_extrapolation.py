#!/usr/bin/env python3
"""A short induction-heads run generalises to 16 times its trained length
(the quick version of make paper's induction table): gradkern train on
32-token sequences, then --eval-lengths 32,512 (the 512-token sequences run
in pieces of 64 tokens with the states carried), both near 100%. Also: a
LLaMA whose whole-sequence run would pass --eval-memory reports the length
as not run, with the memory it needs, instead of failing.

usage: induction_extrapolation.py GRADKERN"""
import json
import os
import subprocess
import sys
import tempfile


def train(gradkern, out, *args):
    cmd = [gradkern, "train", "--quiet", "--eval-out", out] + list(args)
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"FAIL: {' '.join(cmd)} exited {p.returncode}:\n{p.stdout}{p.stderr}")
    with open(out) as f:
        return {r["length"]: r for r in json.load(f)["lengths"]}, p.stdout


def main():
    gradkern = sys.argv[1]
    failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        res, text = train(gradkern, os.path.join(tmp, "mamba.json"), "--task", "induction", "--seq-len", "32",
                          "--steps", "1000", "--eval-every", "0", "--eval-lengths", "32,512", "--eval-chunk", "64",
                          "--eval-sequences", "64")
        print(text, end="")
        for length, least in ((32, 0.98), (512, 0.95)):
            r = res[length]
            ok = r["status"] == "ok" and r["sequences"] == 64 and r["accuracy"] >= least
            print(f"{'ok' if ok else 'FAIL'}: length {length}: accuracy {r.get('accuracy')} (at least {least})")
            failed += not ok
        ok = res[512]["mode"] == "pieces" and res[512]["memory_mib"] < 2 * res[32]["memory_mib"] + 1
        print(f"{'ok' if ok else 'FAIL'}: 512 tokens run in pieces of 64 in about the memory of one piece "
              f"({res[512]['memory_mib']} MiB; 32 tokens: {res[32]['memory_mib']} MiB)")
        failed += not ok
        res, text = train(gradkern, os.path.join(tmp, "llama.json"), "--model", "llama", "--task", "induction",
                          "--seq-len", "16", "--steps", "1", "--eval-every", "0", "--eval-lengths", "16,4096",
                          "--eval-memory", "16", "--eval-sequences", "8")
        print(text, end="")
        r = res[4096]
        ok = res[16]["status"] == "ok" and res[16]["mode"] == "whole" and r["status"] == "not run" \
            and "--eval-memory 16 MiB" in r["reason"] and "not run" in text
        print(f"{'ok' if ok else 'FAIL'}: llama at 4096 tokens over --eval-memory 16 is not run: {r.get('reason')}")
        failed += not ok
    print(f"induction_extrapolation: {'FAILED' if failed else 'passed'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
