#!/usr/bin/env python3
"""make paper: the Mamba paper's synthetic tables (Gu and Dao 2023, section 4.1
and appendix E.1), reproduced with `gradkern train` on this machine's CPU.

Runs, in this order (the most telling first, so a cut-short run still has it):
  1. induction heads, Mamba: trained, then tested at every power of two from
     2^6 to 2^20 tokens (--eval-lengths: in pieces, the conv and scan states
     carried, so a million tokens run in the memory of one piece);
  2. selective copying, Mamba (S6) and 3. its time-invariant ablation
     (--no-selection: delta, B and C parameters, not functions of the input),
     trained on sequences of 128, then 512, then the paper's 4096, tested at
     4096;
  4. induction heads, --no-selection; 5. induction heads, LLaMA (attention
     with RoPE; started on short sequences, then resumed at the trained
     length), tested as far as --eval-memory allows.
Each run is seeded; after each, paper/results.md is written again (the
paper's figure beside gradkern's for every cell, the wall time of each run,
the machine and its load) with the plot paper/induction.svg (gradkern plot).
Logs and per-run JSON go to paper/runs/.
"""
import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import tempfile
import threading
import time

LENGTHS = [2 ** k for k in range(6, 21)]

# The paper's Table 11 (induction heads, trained at 2^8 = 256; accuracy %,
# "ok" = perfect, None = out of memory), per test length 2^6 .. 2^20.
PAPER_INDUCTION = {
    "MHA-Abs": [100, 99.6, 100.0, 58.6, 26.6, 18.8, 9.8, 10.9, 7.8] + [None] * 6,
    "MHA-RoPE": [100, 100, 100.0, 83.6, 31.3, 18.4, 8.6, 9.0, 5.5] + [None] * 6,
    "MHA-xPos": [100, 100, 100.0, 99.6, 67.6, 25.4, 7.0, 9.0, 7.8] + [None] * 6,
    "H3": [100, 100, 100.0, 80.9, 39.5, 23.8, 14.8, 8.2, 5.9, 6.6, 8.2, 4.7, 8.2, 6.3, 7.4],
    "Hyena": [97.7, 100, 100.0, 100, 44.1, 12.5, 6.6, 5.1, 7.0, 5.9, 6.6, 6.6, 5.9, 6.3, 9.8],
    "Mamba": [100.0] * 15,
}
# The paper's Table 1 (selective copying): (model, architecture, layer, accuracy %).
PAPER_COPY = [
    ("S4", "No gate", "S4", 18.3), ("-", "No gate", "S6", 97.0), ("H3", "H3", "S4", 57.0),
    ("Hyena", "H3", "Hyena", 30.1), ("-", "H3", "S6", 99.7), ("-", "Mamba", "S4", 56.4),
    ("-", "Mamba", "Hyena", 28.4), ("Mamba", "Mamba", "S6", 99.8),
]

# The runs' settings. Induction heads as the paper's appendix E.1 sets it
# (trained at 256, vocabulary 16, 2 layers, Mamba D = 64, attention D = 128
# with 8 heads, batch 8, Adam at a constant lr 1e-3 for Mamba); what two cores
# cannot afford is the paper's number of steps. A run is a list of stages:
# each stage after the first resumes the checkpoint of the one before with
# other options (--allow-changes), and the last one is tested. Attention:
# from scratch on 256-token sequences LLaMA stayed at chance (7000 steps of
# batch 8; 750 of batch 64), while on 32-token ones it learns the task in
# about 150 steps of batch 64; so it starts there and goes on at its trained
# length, 256. Selective copying is trained and tested at the paper's length,
# 4096, after two shorter stages: a Mamba trained on shorter sequences does
# not carry the task to longer ones (trained at 128: chance at 512; then at
# 512: 53% at 1024 and chance at 4096), but from there it learns 4096 in a
# few hundred steps. Each copying stage after the first decays its own
# learning rate (--warmup at the step it starts from: a cosine from the peak
# over the stage). The time-invariant ablations get Mamba's stages and steps.
INDUCTION = ["--task", "induction", "--seq-len", "256", "--weight-decay", "0"]
INDUCTION_MAMBA = INDUCTION + ["--batch", "8", "--steps", "40000", "--lr", "1e-3", "--min-lr", "1e-3", "--warmup", "200",
                               "--eval-every", "4000"]
LLAMA = ["--model", "llama", "--width", "128", "--heads", "8", "--kv-heads", "8", "--task", "induction",
         "--weight-decay", "0", "--batch", "64", "--lr", "1e-3", "--min-lr", "1e-3", "--warmup", "100"]
LLAMA_STAGES = [LLAMA + ["--seq-len", "32", "--steps", "300", "--eval-every", "0"],
                LLAMA + ["--seq-len", "256", "--steps", "1000", "--eval-every", "100"]]
COPY_PAPER_LENGTH = 4096
COPY = ["--task", "copy", "--copy-data", "16", "--copy-values", "14"]
COPY_STAGES = [
    COPY + ["--seq-len", "128", "--batch", "32", "--steps", "4000", "--eval-every", "500"],
    COPY + ["--seq-len", "512", "--batch", "32", "--steps", "5000", "--lr", "1e-3", "--min-lr", "1e-5",
            "--warmup", "4000", "--eval-every", "250"],
    COPY + ["--seq-len", str(COPY_PAPER_LENGTH), "--batch", "8", "--steps", "6500", "--lr", "1e-3", "--min-lr", "1e-5",
            "--warmup", "5000", "--eval-every", "100", "--eval-batches", "4"],
]
EVAL_SEQUENCES, EVAL_TOKENS = 64, 2 ** 22
EVAL = ["--eval-lengths", ",".join(map(str, LENGTHS)), "--eval-sequences", str(EVAL_SEQUENCES),
        "--eval-tokens", str(EVAL_TOKENS)]
COPY_EVAL = ["--eval-lengths", str(COPY_PAPER_LENGTH), "--eval-sequences", "512"]


def tested(stages, extra):
    """A run's stages with `extra` options added to the last (tested) one."""
    return stages[:-1] + [stages[-1] + extra]


# (name, title, stages: argument lists, each resuming the checkpoint of the one before; the last is tested)
RUNS = [
    ("induction_mamba", "induction heads, Mamba", [INDUCTION_MAMBA + EVAL]),
    ("copy_mamba", "selective copying, Mamba (S6)", tested(COPY_STAGES, COPY_EVAL)),
    ("copy_no_selection", "selective copying, Mamba --no-selection (time-invariant)",
     tested([st + ["--no-selection"] for st in COPY_STAGES], COPY_EVAL)),
    ("induction_no_selection", "induction heads, Mamba --no-selection", [INDUCTION_MAMBA + ["--no-selection"] + EVAL]),
    ("induction_llama", "induction heads, LLaMA (attention, RoPE)",
     tested(LLAMA_STAGES, EVAL + ["--eval-memory", "1024"])),
]


def opt(args, name, default=None):
    """The value given to option `name` in a run's arguments (the last one), or default."""
    vals = [args[i + 1] for i, a in enumerate(args[:-1]) if a == name]
    return vals[-1] if vals else default


def trained_length(args):
    return int(opt(args, "--seq-len", "64"))


def schedule(args, before):
    """A stage's learning rate in words; `before`: the step it starts from."""
    lr, min_lr, warmup = opt(args, "--lr", "6e-3"), opt(args, "--min-lr"), opt(args, "--warmup")
    if min_lr == lr:
        return f"constant lr {lr}" + (f" after {int(warmup) - before} warmup steps" if warmup and
                                      int(warmup) > before else "")
    return f"lr {lr} cosine to {min_lr or 'a twentieth of it'}"


def describe(stages):
    """A run's training settings in words, from its stages' arguments."""
    args = stages[-1]
    wd = opt(args, "--weight-decay")
    model = opt(args, "--model", "mamba")
    width = opt(args, "--width", "64")
    what = (f"LLaMA D = {width}, {opt(args, '--heads')} heads, RoPE, SwiGLU MLP" if model == "llama"
            else f"Mamba D = {width}" + (", --no-selection" if "--no-selection" in args else ""))
    adam = "AdamW" + (" without weight decay" if wd == "0" else "")
    if len(stages) == 1:
        return (f"{what}; sequences of {opt(args, '--seq-len')}, batch {opt(args, '--batch')}, "
                f"{int(opt(args, '--steps')):,} steps; {adam}, {schedule(args, 0)}")
    parts, before = [], 0
    for st in stages:
        steps = int(opt(st, "--steps"))
        parts.append(f"{steps - before:,} steps on sequences of {opt(st, '--seq-len')}, batch {opt(st, '--batch')} "
                     f"({schedule(st, before)})")
        before = steps
    return f"{what}; {before:,} steps: " + ", then ".join(parts) + f"; {adam}"


def commands(rec):
    """The commands of a run's stages, in order (records written before stages kept one start command)."""
    return rec.get("commands") or [c for c in (rec.get("start_command"), rec["command"]) if c]


def read(path, default=""):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return default


def machine():
    cpu = next((l.split(":", 1)[1].strip() for l in read("/proc/cpuinfo").splitlines()
                if l.startswith("model name")), platform.processor() or "?")
    mem = next((l.split()[1] for l in read("/proc/meminfo").splitlines() if l.startswith("MemTotal")), "0")
    return f"{cpu}, {os.cpu_count()} cores, {int(mem) / 2 ** 20:.0f} GiB, {platform.system()} {platform.release()}"


class LoadSampler:
    """The 1-minute load average every 10 s while a run goes."""

    def __init__(self):
        self.samples, self.stop = [], threading.Event()
        self.thread = threading.Thread(target=self.loop, daemon=True)

    def loop(self):
        while True:
            self.samples.append(float(read("/proc/loadavg", "0").split()[0]))
            if self.stop.wait(10):
                return

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join()

    def summary(self):
        s = self.samples or [0.0]
        return f"{min(s):.1f} to {max(s):.1f} (mean {sum(s) / len(s):.1f})"


def run(gradkern, name, title, stages, out, seed, threads, started):
    """One run: its stages' `gradkern train` commands in turn, each after the
    first resuming the checkpoint of the one before; output shown and logged;
    its record."""
    runs = os.path.join(out, "runs")
    common = ["--seed", str(seed)] + (["--threads", str(threads)] if threads else [])
    cmds = []
    with tempfile.TemporaryDirectory() as tmp:
        ck = os.path.join(tmp, name + ".safetensors")
        for i, st in enumerate(stages):
            cmd = [gradkern, "train"] + st + common
            if len(stages) > 1:
                cmd += (["--resume", ck, "--allow-changes"] if i else []) + ["--checkpoint", ck]
            if i == len(stages) - 1:
                cmd += ["--plot", os.path.join(runs, name + "-loss.svg"), "--eval-out", os.path.join(runs, name + ".json")]
            cmds.append(cmd)
        shown = [" ".join(["gradkern"] + c[1:]).replace(tmp, "$TMP") for c in cmds]
        began = time.monotonic()
        rc = 0
        with LoadSampler() as load, open(os.path.join(runs, name + ".log"), "w") as log:
            for cmd, text in zip(cmds, shown):
                print(f"\n== {title}\n$ {text}", flush=True)
                log.write(f"$ {text}\n")
                proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1)
                for line in proc.stdout:
                    sys.stdout.write(line)
                    sys.stdout.flush()
                    log.write(line.replace("\r", "\n"))
                rc = proc.wait()
                if rc:
                    break
    seconds = time.monotonic() - began
    result = json.loads(read(os.path.join(runs, name + ".json"), "{}") or "{}") if rc == 0 else {}
    final = ""
    for line in read(os.path.join(runs, name + ".log")).splitlines():
        if line.startswith("final "):
            final = line
    return {"name": name, "title": title, "started": started, "command": shown[-1], "commands": shown,
            "rc": rc, "seconds": seconds, "load": load.summary(), "result": result, "final": final}


def acc(rec, length):
    """gradkern's accuracy (%) at a length (with the answers counted where fewer than 64), or why not."""
    for r in rec.get("result", {}).get("lengths", []):
        if r["length"] == length:
            if r["status"] != "ok":
                return "not run"
            few = f" ({r['correct']}/{r['answers']})" if r["answers"] < 64 else ""
            return f"{100 * r['accuracy']:.1f}{few}"
    return "-"


def paper_cell(v):
    return "OOM" if v is None else f"{v:.1f}"


def fmt_time(s):
    return f"{int(s // 60)}m{int(s % 60):02d}s"


def write_results(out, recs, started, total, done, plot_ok, threads):
    by = {r["name"]: r for r in recs}
    L = ["# The Mamba paper's synthetic tasks, reproduced with gradkern", "",
         "Written by `make paper` (scripts/paper.py), which trains each model with `gradkern train` on this",
         "machine's CPU and tests it with `--eval-lengths`. Paper: Gu and Dao, \"Mamba: Linear-Time Sequence",
         "Modeling with Selective State Spaces\" (arXiv 2312.00752), section 4.1, Tables 1, 2 and 11, appendix E.1.",
         "", f"- {len(recs)} of {len(RUNS)} runs done" + ("" if done else " (the rest did not run: see below)")
         + f"; their wall times add up to {fmt_time(sum(r['seconds'] for r in recs))}; the last invocation of "
         f"`make paper` started {started} UTC and took {fmt_time(total)}"
         + ("" if all(r.get("started", started) == started for r in recs) else
            " (runs it did not redo, `--only`, are kept from earlier ones: their start times are in the last table)"),
         f"- machine: {machine()}", f"- threads per run: {threads or f'every core ({os.cpu_count()}, the command default)'}; runs one after another",
         "- the load average (1 minute) during each run is in the last table: about 2 is this run alone on the two",
         "  cores; more means other jobs shared the machine and the wall times are longer than an idle machine's.", ""]
    L += ["## Settings: the paper's and this reproduction's", "",
          "The paper's (appendix E.1):", "",
          "- selective copying: length 4096, vocabulary 16, 16 data tokens; 2 layers, D = 64; 400K steps, batch 64, "
          "constant lr 1e-4",
          "- induction heads: trained at 256, vocabulary 16; 2 layers, D = 64 (Mamba), D = 128 (attention, 8 heads); "
          "batch 8; 204,800 steps (Mamba, MHA-Abs), 409,600 (MHA-RoPE, MHA-xPos); Adam lr 1e-3 (Mamba), 2e-4 (others)",
          "- test lengths: 2^6 .. 2^20", "", "Here (2 layers each; vocabulary 16: induction heads 15 content tokens and "
          "the trigger, selective copying 14 values, noise and marker, 16 data tokens):", ""]
    for r in recs:
        L.append(f"- {r['title']}: {describe([c.split() for c in commands(r)])}")
    L += [f"- test lengths: 2^6 .. 2^20; up to {EVAL_SEQUENCES} held-out sequences per length, at most "
          f"2^{EVAL_TOKENS.bit_length() - 1} tokens (so {EVAL_TOKENS >> 20} sequences at 2^20)", "",
          "Two CPU cores cannot afford the paper's budgets (400K steps of 64 x 4096 tokens is 10^11 tokens for",
          "selective copying), so every run takes far fewer steps than the paper's. Selective copying reaches the",
          "paper's length, 4096, through two shorter stages: trained at one length, a Mamba did not carry the task",
          "to longer sequences here (trained at 128, it was at chance at 512; then at 512, 53% at 1024 and at",
          "chance at 4096). The tables below compare the outcome cell by cell; the notes at the end say where",
          "it differs.", ""]
    # Table 1
    L += ["## Selective copying (the paper's Table 1)", "",
          "| model | architecture | inner layer | paper accuracy % | gradkern accuracy % |", "|---|---|---|---:|---:|"]
    ours = {("Mamba", "S6"): "copy_mamba", ("Mamba", "S4"): "copy_no_selection"}
    for model, arch, layer, a in PAPER_COPY:
        name = ours.get((arch, layer))
        cell = acc(by[name], COPY_PAPER_LENGTH) if name in by else ("-" if name is None else "not run yet")
        L.append(f"| {model} | {arch} | {layer} | {a:.1f} | {cell} |")
    L += ["", "gradkern's Mamba block with selection is the paper's Mamba/S6; with `--no-selection` (delta, B and C",
          "trained parameters, the same for every step: a time-invariant diagonal SSM, S4D-like) it is the",
          f"paper's Mamba/S4 row. Accuracy: the share of the 16 copied tokens right, over 512 held-out sequences of",
          f"{COPY_PAPER_LENGTH} tokens.", ""]
    # Table 2 / 11
    head = "| model | " + " | ".join(f"2^{k}" for k in range(6, 21)) + " |"
    L += ["## Induction heads: accuracy % against test length (the paper's Table 2 / Table 11)", "",
          "Trained at 2^8 = 256 (the paper's and gradkern's runs). OOM: the paper's out of memory;",
          "not run: over this run's `--eval-memory` (the whole-sequence attention run would not fit; see below).",
          "Chance is 1 in 15 (6.7%: the answer is one of 15 content tokens). Where gradkern tested fewer than "
          f"{EVAL_SEQUENCES}",
          f"sequences (past 2^{(EVAL_TOKENS // EVAL_SEQUENCES).bit_length() - 1}, to stay within "
          f"2^{EVAL_TOKENS.bit_length() - 1} tokens per length), the answers right are given:",
          "those figures are coarse.", "",
          head, "|---|" + "---:|" * 15]
    rows = [("paper: Mamba", None, "Mamba"), ("gradkern: Mamba", "induction_mamba", None),
            ("paper: H3 (time-invariant S4)", None, "H3"), ("paper: Hyena", None, "Hyena"),
            ("gradkern: Mamba --no-selection", "induction_no_selection", None),
            ("paper: MHA-Abs", None, "MHA-Abs"), ("paper: MHA-RoPE", None, "MHA-RoPE"),
            ("paper: MHA-xPos", None, "MHA-xPos"), ("gradkern: LLaMA (RoPE)", "induction_llama", None)]
    for label, name, paper in rows:
        if paper:
            cells = [paper_cell(v) for v in PAPER_INDUCTION[paper]]
        elif name in by:
            cells = [acc(by[name], n) for n in LENGTHS]
        else:
            cells = ["not run yet"] + [""] * 14
        L.append(f"| {label} | " + " | ".join(cells) + " |")
    L += ["", "![accuracy against test length](induction.svg)" if plot_ok else "", ""]
    # Memory and times
    L += ["## Memory and time per test length", ""]
    for name in ("induction_mamba", "induction_no_selection", "induction_llama"):
        if name not in by or not by[name]["result"]:
            continue
        r = by[name]["result"]
        L += [f"{by[name]['title']} ({r.get('parameters', '?')} parameters):", "",
              "| length | sequences | seconds | memory MiB | how |", "|---:|---:|---:|---:|---|"]
        for x in r["lengths"]:
            if x["status"] == "ok":
                how = "whole sequences" if x["mode"] == "whole" else f"pieces of {r['eval_chunk']} tokens, states carried"
                L.append(f"| {x['length']} | {x['sequences']} | {x['seconds']:.1f} | {x['memory_mib']:.1f} | {how} |")
            else:
                L.append(f"| {x['length']} | - | - | - | not run: {x['reason']} |")
        L.append("")
    L += ["A Mamba's memory stays that of one piece at every length (the conv and scan states are carried from",
          "piece to piece: `gradkern train --eval-chunk`); only the token arrays of the sequences (8 bytes per",
          "token) grow. LLaMA's attention needs the whole sequence in one run: its memory grows with the length,",
          "and the lengths past `--eval-memory` are not run.", ""]
    L += ["## Runs", "", "| run | started (UTC) | wall time | load average during it | exit | final figures |",
          "|---|---|---:|---|---:|---|"]
    for r in recs:
        L.append(f"| {r['title']} | {r.get('started', '?')} | {fmt_time(r['seconds'])} | {r['load']} | {r['rc']} | "
                 f"{r['final'] or '-'} |")
    for name, title, _ in RUNS:
        if name not in by:
            L.append(f"| {title} | | not run | | | |")
    L += ["", "Commands (logs, loss curves and JSON in paper/runs/):", ""]
    L += [f"    {c}" for r in recs for c in commands(r)]
    L += ["", "## Notes", ""] + notes(by)
    with open(os.path.join(out, "results.md.tmp"), "w") as f:
        f.write("\n".join(L) + "\n")
    os.replace(os.path.join(out, "results.md.tmp"), os.path.join(out, "results.md"))


def notes(by):
    """What the figures say against the paper's, from the results themselves."""
    N = []
    for name, what in (("induction_mamba", "Mamba"), ("induction_no_selection", "Mamba --no-selection"),
                       ("induction_llama", "LLaMA")):
        if name not in by or not by[name]["result"]:
            continue
        trained = trained_length(by[name]["command"].split())
        lengths = {x["length"]: x for x in by[name]["result"]["lengths"]}
        at = lengths.get(trained)
        if at and at["status"] == "ok" and at["accuracy"] < 0.9:
            N.append(f"- {what} reaches {100 * at['accuracy']:.1f}% at its trained length {trained}: it did not learn "
                     "the task in this budget, so its figures at other lengths say nothing about extrapolation.")
        ok = [x for x in lengths.values() if x["status"] == "ok"]
        if name.startswith("induction") and ok:
            ok.sort(key=lambda x: x["length"])
            wrong = [x for x in ok if x["correct"] != x["answers"]]
            last = ok[-1]["length"]
            upto = max([x["length"] for x in ok if not wrong or x["length"] < wrong[0]["length"]], default=None)
            if not wrong:
                N.append(f"- {what}: every answer right at every length tested, up to {last} tokens "
                         f"({last // trained}x the trained length).")
            elif len(wrong) <= 2 and wrong[-1]["length"] < last:
                N.append(f"- {what}: every answer right at every length tested up to {last} tokens "
                         f"({last // trained}x the trained length) but "
                         + " and ".join(f"{x['length']} ({x['correct']} of {x['answers']})" for x in wrong) + ".")
            else:
                N.append((f"- {what}: every answer right up to {upto} tokens" if upto else
                          f"- {what}: no length with every answer right")
                         + f"; tested up to {last} tokens ({last // trained}x the trained length).")
            skipped = [x for x in lengths.values() if x["status"] != "ok"]
            if skipped:
                N.append(f"- {what} stops at {last} tokens: {skipped[0]['reason']}.")
    for name, title, _ in RUNS:
        if name not in by:
            N.append(f"- {title}: not run in this invocation of `make paper` (the time ran out, or `--only`).")
    return N or ["- none"]


def plot(gradkern, out, recs):
    """paper/induction.svg: accuracy against log2(test length), gradkern's and the paper's."""
    runs = os.path.join(out, "runs")
    series = []
    for label, key in (("paper: Mamba", "Mamba"), ("paper: MHA-RoPE", "MHA-RoPE"), ("paper: H3", "H3")):
        path = os.path.join(runs, "paper-" + key + ".tsv")
        with open(path, "w") as f:
            for k, v in zip(range(6, 21), PAPER_INDUCTION[key]):
                f.write(f"{k} {'nan' if v is None else v}\n")
        series.append(f"{label}={path}")
    for r in recs:
        if not r["name"].startswith("induction") or not r["result"]:
            continue
        path = os.path.join(runs, r["name"] + ".tsv")
        with open(path, "w") as f:
            for x in r["result"]["lengths"]:
                y = 100 * x["accuracy"] if x["status"] == "ok" else float("nan")
                f.write(f"{x['length'].bit_length() - 1} {y}\n")
        label = {"induction_mamba": "gradkern: Mamba", "induction_no_selection": "gradkern: Mamba --no-selection",
                 "induction_llama": "gradkern: LLaMA (RoPE)"}[r["name"]]
        series.append(f"{label}={path}")
    rc = subprocess.call([gradkern, "plot", "--out", os.path.join(out, "induction.svg"), "--title",
                          "Induction heads: accuracy against test length",
                          "--xlabel", "log2 of the test length (trained: 8)",
                          "--ylabel", "accuracy %"] + series)
    return rc == 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gradkern", default="build/gradkern")
    ap.add_argument("--out", default="paper")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--threads", type=int, default=0, help="--threads of each run (0: the command's default)")
    ap.add_argument("--rewrite", action="store_true",
                    help="write results.md and the plot again from paper/runs/records.json, running nothing")
    ap.add_argument("--quick", action="store_true", help="a check of the script: 30 steps, lengths up to 2^10")
    ap.add_argument("--only", default="", help="comma-separated run names, the other runs' results kept from the "
                    "last invocation (default: all): "
                    + ", ".join(n for n, _, _ in RUNS))
    a = ap.parse_args()
    os.makedirs(os.path.join(a.out, "runs"), exist_ok=True)
    only = set(filter(None, a.only.split(",")))
    chosen = [r for r in RUNS if not only or r[0] in only]
    if a.quick:
        def shorten(args, steps, before):
            quick = {"--steps": str(steps), "--warmup": str(before + 5), "--eval-every": "10", "--eval-sequences": "8",
                     "--eval-lengths": lambda v: ",".join(x for x in v.split(",") if int(x) <= 4096)}
            return [quick[args[i - 1]](v) if callable(quick.get(args[i - 1])) else quick.get(args[i - 1], v)
                    if i else v for i, v in enumerate(args)]
        chosen = [(n, t, [shorten(st, 10 * i + (20 if i == len(stages) - 1 else 10), 10 * i)
                          for i, st in enumerate(stages)])
                  for n, t, stages in chosen]
    records = os.path.join(a.out, "runs", "records.json")
    if a.rewrite:
        saved = json.loads(read(records, "{}") or "{}")
        recs = saved.get("runs", [])
        write_results(a.out, recs, saved.get("started", "?"), saved.get("total", 0), len(recs) == len(RUNS),
                      plot(a.gradkern, a.out, recs), saved.get("threads", 0))
        return 0
    started = datetime.datetime.utcnow().strftime("%Y-%m-%d %H:%M")
    t0 = time.monotonic()
    # --only: the other runs' records from the last invocation are kept.
    saved = json.loads(read(records, "{}") or "{}")
    kept = [dict(r, started=r.get("started", saved.get("started", "?"))) for r in saved.get("runs", [])
            if only and r["name"] not in only]
    order = [n for n, _, _ in RUNS]
    recs = []
    for i, (name, title, stages) in enumerate(chosen):
        print(f"\n[{i + 1}/{len(chosen)}] {title}", flush=True)
        recs.append(run(a.gradkern, name, title, stages, a.out, a.seed, a.threads, started))
        every = sorted(kept + recs, key=lambda r: order.index(r["name"]) if r["name"] in order else len(order))
        with open(records, "w") as f:
            json.dump({"started": started, "total": time.monotonic() - t0, "threads": a.threads, "runs": every}, f,
                      indent=1)
        plot_ok = plot(a.gradkern, a.out, every)
        write_results(a.out, every, started, time.monotonic() - t0, len(every) == len(RUNS), plot_ok, a.threads)
        print(f"[{i + 1}/{len(chosen)}] {title}: exit {recs[-1]['rc']}, {fmt_time(recs[-1]['seconds'])}; "
              f"{a.out}/results.md written", flush=True)
    failed = [r["name"] for r in recs if r["rc"] != 0]
    if failed:
        print("failed runs: " + ", ".join(failed), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
