"""`mpirun -np N gradkern train`: data-parallel training checked against one
process.

  python3 tests/mpi_train.py path/to/gradkern [mpirun]

N ranks with --batch b against one process with --batch N*b (Mamba and
LLaMA, with and without --zero 1; text): the final losses within 1e-6 relative
and the weights within f32 reassociation; two runs with the same N
bit-identical; checkpoints that resume on another number of ranks with the
same trajectory; a Hugging Face LLaMA with an untied head fine-tuned from
--init; the weight drift check; a hung rank and a killed rank stopping the
job.
Fails (never skips) when mpirun or MPI support is missing."""
import json
import os
import signal
import struct
import subprocess
import sys
import tempfile
import time

BIN = sys.argv[1] if len(sys.argv) > 1 else "build/gradkern"
MPIRUN = sys.argv[2] if len(sys.argv) > 2 else "mpirun"
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OMPI_MCA_rmaps_base_oversubscribe="1")
failures = []

MAMBA = ["--width", "16", "--seq-len", "32", "--warmup", "2", "--eval-every", "0", "--eval-batches", "2",
         "--threads", "1", "--lr", "1e-2"]
LLAMA = ["--model", "llama", "--heads", "2", "--kv-heads", "1", "--task", "induction", "--width", "16",
         "--seq-len", "16", "--warmup", "2", "--eval-every", "0", "--eval-batches", "1", "--threads", "1"]


def replace(opts, name, value):
    """opts with option name's value replaced."""
    i = opts.index(name)
    return opts[:i + 1] + [value] + opts[i + 2:]


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what, flush=True)
    if not ok:
        failures.append(what)


def train(ranks, *args, env=None, timeout=300):
    cmd = [BIN, "train", *args]
    if ranks:
        cmd = [MPIRUN, "--oversubscribe", "-np", str(ranks)] + cmd
    return subprocess.run(cmd, capture_output=True, text=True, env=env or ENV, timeout=timeout)


def read_st(path):
    """{name: list of floats} and the metadata of a safetensors file."""
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    header = json.loads(b[8:8 + n])
    meta = header.pop("__metadata__", {})
    data = b[8 + n:]
    tensors = {}
    for name, h in header.items():
        begin, end = h["data_offsets"]
        tensors[name] = struct.unpack("<%df" % ((end - begin) // 4), data[begin:end])
    return tensors, meta


def close(a, b, rel, what):
    """Losses: |a - b| <= rel |b|."""
    check(abs(a - b) <= rel * abs(b), "%s: %.9g against %.9g (relative %.1e, bound %.0e)" %
          (what, a, b, abs(a - b) / abs(b), rel))


def weights_close(path, ref, what, rtol=1e-3, atol=1e-5):
    """Weights and moments within f32 reassociation of the reference's."""
    x, _ = read_st(path)
    y, _ = read_st(ref)
    worst, where = 0.0, ""
    for name in y:
        for u, v in zip(x[name], y[name]):
            err = abs(u - v) / (atol + rtol * abs(v))
            if err > worst:
                worst, where = err, name
    check(x.keys() == y.keys() and worst <= 1, "%s: weights and moments within %g relative + %g (worst %.2f of the "
          "bound, in %s)" % (what, rtol, atol, worst, where or "-"))


def ran(r, what):
    check(r.returncode == 0, "%s: exit %d%s" % (what, r.returncode, "" if r.returncode == 0 else
                                                "\n" + r.stdout[-2000:] + r.stderr[-2000:]))
    return r.returncode == 0


def main():
    try:
        v = subprocess.run([MPIRUN, "--version"], capture_output=True, text=True, env=ENV)
    except FileNotFoundError:
        check(False, "mpirun ('%s') is not installed: install openmpi-bin and libopenmpi-dev "
              "(scripts/install-deps.sh test)" % MPIRUN)
        return
    check(v.returncode == 0, "mpirun --version: " + (v.stdout.splitlines() or ["?"])[0])
    with tempfile.TemporaryDirectory(prefix="gk_mpi_") as d:
        run_tests(lambda name: os.path.join(d, name))


def run_tests(p):

    r = train(2, *MAMBA, "--steps", "2", "--batch", "2")
    if "built without MPI" in r.stderr:
        check(False, "this gradkern was built without MPI (CMake found none): " + r.stderr.strip())
        return

    # One process with the whole batch of 6 against 2 and 3 ranks.
    for model, opts in (("mamba", MAMBA), ("llama", LLAMA)):
        ref = p(model + "_1.st")
        if not ran(train(0, *opts, "--steps", "20", "--batch", "6", "--checkpoint", ref), model + " 1 process"):
            continue
        _, meta = read_st(ref)
        for ranks in (2, 3):
            for zero in ("0", "1"):
                if model == "llama" and ranks == 3 and zero == "0":
                    continue
                what = "%s %d ranks --zero %s" % (model, ranks, zero)
                out = p("%s_%d_%s.st" % (model, ranks, zero))
                r = train(ranks, *opts, "--steps", "20", "--batch", str(6 // ranks), "--zero", zero, "--checkpoint", out)
                if not ran(r, what):
                    continue
                _, m = read_st(out)
                for key in ("train_loss", "eval_loss"):
                    close(float(m[key]), float(meta[key]), 1e-6, what + ": final " + key)
                check(m["config"] == meta["config"], what + ": the checkpoint records the global batch 6")
                weights_close(out, ref, what)
                if model == "mamba" and zero == "0":
                    again = p("again_%d.st" % ranks)
                    if ran(train(ranks, *opts, "--steps", "20", "--batch", str(6 // ranks), "--checkpoint", again),
                           what + ", again"):
                        check(open(again, "rb").read() == open(out, "rb").read(),
                              what + ": two runs are bit-identical")
        if model == "mamba":
            r = train(2, *opts, "--steps", "20", "--batch", "3")
            check(r.returncode == 0 and r.stdout.count("final train loss") == 1 and "data-parallel: 2 ranks" in r.stdout,
                  "mamba 2 ranks: rank 0 alone prints (one summary, with the reduction's figures)")

    # Mixed precision: each rank rounds its own gradients to 16 bits before
    # they are summed in f32, so 2 ranks agree with one process to the
    # 16-bit rounding, not bit for bit (measured: up to 1.1e-4 of the loss).
    for dtype in ("bf16", "f16"):
        one, two = p("mp_%s_1.st" % dtype), p("mp_%s_2.st" % dtype)
        what = "mamba --dtype %s 2 ranks --zero 1" % dtype
        if ran(train(0, *MAMBA, "--steps", "20", "--batch", "6", "--dtype", dtype, "--checkpoint", one),
               "mamba --dtype %s 1 process" % dtype) and \
                ran(train(2, *MAMBA, "--steps", "20", "--batch", "3", "--zero", "1", "--dtype", dtype,
                          "--checkpoint", two), what):
            for key in ("train_loss", "eval_loss"):
                close(float(read_st(two)[1][key]), float(read_st(one)[1][key]), 1e-3, what + ": final " + key)
            check(read_st(two)[1]["dtype"] == dtype, what + ": the checkpoint records the dtype")

    # Text: training windows drawn from the seed, held-out windows by number.
    words = ["the", "quick", "brown", "fox", "jumps", "over", "lazy", "dog"]
    with open(p("text.txt"), "w") as f:
        f.write(" ".join(words[(i * 7 + i // 5) % 8] for i in range(3000)))
    text = ["--task", "text", "--data", p("text.txt"), "--width", "16", "--seq-len", "32", "--warmup", "2",
            "--eval-every", "5", "--eval-batches", "3", "--threads", "1", "--steps", "10"]
    if ran(train(0, *text, "--batch", "6", "--checkpoint", p("text_1.st")), "text 1 process") and \
            ran(train(3, *text, "--batch", "2", "--zero", "1", "--checkpoint", p("text_3.st")), "text 3 ranks --zero 1"):
        for key in ("train_loss", "eval_loss"):
            close(float(read_st(p("text_3.st"))[1][key]), float(read_st(p("text_1.st"))[1][key]), 1e-6,
                  "text 3 ranks --zero 1: final " + key)
        weights_close(p("text_3.st"), p("text_1.st"), "text 3 ranks --zero 1")

    # A Hugging Face LLaMA with an untied head (its own lm_head weight, a
    # parameter more to reduce) fine-tuned from --init on the same text.
    write_untied_llama(p("untied"))
    tuned = ["--task", "text", "--data", p("text.txt"), "--init", p("untied"), "--seq-len", "16", "--warmup", "2",
             "--eval-every", "5", "--eval-batches", "2", "--threads", "1", "--steps", "10"]
    if ran(train(0, *tuned, "--batch", "6", "--checkpoint", p("untied_1.st")), "untied head, 1 process"):
        for ranks, zero in ((2, "0"), (3, "1")):
            what = "untied head, %d ranks --zero %s" % (ranks, zero)
            out = p("untied_%d.st" % ranks)
            if ran(train(ranks, *tuned, "--batch", str(6 // ranks), "--zero", zero, "--checkpoint", out), what):
                for key in ("train_loss", "eval_loss"):
                    close(float(read_st(out)[1][key]), float(read_st(p("untied_1.st"))[1][key]), 1e-6,
                          what + ": final " + key)
                weights_close(out, p("untied_1.st"), what)
        check("lm_head" in read_st(p("untied_1.st"))[0], "untied head: the checkpoint holds lm_head")

    # Resume across rank counts: 3 -> 1 and 1 -> 2 (sharded), against the
    # straight run; 2 -> 2 bit-identical to a straight 2-rank run.
    ref = p("mamba_1.st")
    half = ["--steps", "20", "--stop-after", "10"]
    if ran(train(3, *MAMBA, *half, "--batch", "2", "--checkpoint", p("r3.st")), "3 ranks, first half") and \
            ran(train(0, *MAMBA, "--steps", "20", "--batch", "6", "--resume", p("r3.st"), "--checkpoint", p("r31.st")),
                "resumed on 1 process"):
        weights_close(p("r31.st"), ref, "3 ranks -> 1 process")
        close(float(read_st(p("r31.st"))[1]["train_loss"]), float(read_st(ref)[1]["train_loss"]), 1e-6,
              "3 ranks -> 1 process: final train_loss")
    if ran(train(0, *MAMBA, *half, "--batch", "6", "--checkpoint", p("r1.st")), "1 process, first half") and \
            ran(train(2, *MAMBA, "--steps", "20", "--batch", "3", "--zero", "1", "--resume", p("r1.st"),
                      "--checkpoint", p("r12.st")), "resumed on 2 ranks --zero 1"):
        weights_close(p("r12.st"), ref, "1 process -> 2 ranks --zero 1")
        close(float(read_st(p("r12.st"))[1]["train_loss"]), float(read_st(ref)[1]["train_loss"]), 1e-6,
              "1 process -> 2 ranks: final train_loss")
    if ran(train(2, *MAMBA, *half, "--batch", "3", "--zero", "1", "--checkpoint", p("r2.st")), "2 ranks, first half") and \
            ran(train(2, *MAMBA, "--steps", "20", "--batch", "3", "--zero", "1", "--resume", p("r2.st"),
                      "--checkpoint", p("r22.st")), "resumed on 2 ranks"):
        check(open(p("r22.st"), "rb").read() == open(p("mamba_2_1.st"), "rb").read(),
              "2 ranks --zero 1 in two pieces: bit-identical to the straight run")
    r = train(0, *MAMBA, "--steps", "20", "--batch", "4", "--resume", p("r3.st"), "--checkpoint", p("x.st"))
    check(r.returncode != 0 and "--batch 4 (the checkpoint: 6 sequences a step)" in r.stderr
          and "add --allow-changes" in r.stderr, "a checkpoint of global batch 6 refuses a run of batch 4 (a change)")

    # Failures before the first step stop every rank, with one message.
    r = train(2, *MAMBA, "--steps", "4", "--batch", "3", "--resume", p("missing.st"), "--checkpoint", p("m.st"),
              timeout=60)
    check(r.returncode != 0 and r.stderr.count("gradkern train:") == 1 and "missing.st" in r.stderr,
          "2 ranks, a missing --resume file: every rank stops, rank 0 alone says why")
    r = train(2, *MAMBA, "--steps", "4", "--batch", "3", "--checkpoint", p("no_dir/x.st"), timeout=60)
    check(r.returncode == 2 and r.stderr.count("gradkern train:") == 1 and "no_dir" in r.stderr,
          "2 ranks, an unwritable --checkpoint: exit 2, one message")

    # The drift check: one rank's weights perturbed on purpose.
    r = train(2, *replace(MAMBA, "--eval-every", "2"), "--steps", "6", "--batch", "3", "--checkpoint", p("drift.st"),
              env=dict(ENV, GK_TEST_FAULT="perturb@1"))
    check(r.returncode != 0 and "differ between the ranks" in r.stderr and "'norm_f'" in r.stderr
          and not os.path.exists(p("drift.st")),
          "a perturbed rank: the run stops at the next check naming the tensor, no checkpoint written: " +
          ([x for x in r.stderr.splitlines() if "gradkern" in x] or ["(no message)"])[0][:200])

    # A rank that hangs (test-only fault): the others stop after --rank-timeout.
    t0 = time.time()
    r = train(2, *MAMBA, "--steps", "10", "--batch", "3", "--rank-timeout", "4", env=dict(ENV, GK_TEST_FAULT="hang@1"),
              timeout=60)
    check(r.returncode != 0 and "rank 0: step 2 took more than --rank-timeout 4 s" in r.stderr,
          "rank 1 hangs: rank 0 stops after --rank-timeout 4 s (the job ended in %.1f s)" % (time.time() - t0))

    # A rank killed mid-run: the job stops (mpirun ends the others) within
    # the bound, and the last checkpoint loads.
    bound = 60
    cmd = [MPIRUN, "--oversubscribe", "-np", "2", BIN, "train", *MAMBA, "--steps", "100000", "--batch", "3",
           "--checkpoint", p("kill.st"), "--checkpoint-every", "20"]
    job = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=ENV)
    victim = None
    t0 = time.time()
    while time.time() - t0 < 60 and (victim is None or not os.path.exists(p("kill.st"))):
        time.sleep(0.2)
        victim = victim or rank_pid(1, p("kill.st"))
    if victim is None or not os.path.exists(p("kill.st")):
        job.kill()
        check(False, "killed rank: the job did not start or wrote no checkpoint in 60 s")
    else:
        os.kill(victim, signal.SIGKILL)
        t1 = time.time()
        try:
            job.communicate(timeout=bound)
            check(job.returncode != 0, "rank 1 killed: the job stopped in %.1f s (bound %d s), exit %d" %
                  (time.time() - t1, bound, job.returncode))
        except subprocess.TimeoutExpired:
            job.kill()
            check(False, "rank 1 killed: the job still ran after %d s" % bound)
        r = train(0, *MAMBA, "--steps", "100000", "--batch", "6", "--resume", p("kill.st"), "--checkpoint",
                  p("kill2.st"), "--stop-after", "1")
        check(r.returncode == 0, "the last checkpoint of the killed job loads and goes on: " +
              (r.stderr.strip().splitlines() or ["ok"])[-1][:160])


def write_untied_llama(d):
    """A tiny random Hugging Face LlamaForCausalLM directory whose head is
    untied (tie_word_embeddings absent: LLaMA's default is false)."""
    import random
    os.makedirs(d)
    V, D, F, H, G, L = 256, 16, 24, 2, 1, 1
    cfg = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": V, "hidden_size": D,
           "num_hidden_layers": L, "num_attention_heads": H, "num_key_value_heads": G, "intermediate_size": F,
           "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "hidden_act": "silu"}
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg, f)
    Dh = D // H
    shapes = {"model.embed_tokens.weight": (V, D), "model.norm.weight": (D,), "lm_head.weight": (V, D)}
    for l in range(L):
        q = "model.layers.%d." % l
        shapes.update({q + "input_layernorm.weight": (D,), q + "post_attention_layernorm.weight": (D,),
                       q + "self_attn.q_proj.weight": (H * Dh, D), q + "self_attn.k_proj.weight": (G * Dh, D),
                       q + "self_attn.v_proj.weight": (G * Dh, D), q + "self_attn.o_proj.weight": (D, H * Dh),
                       q + "mlp.gate_proj.weight": (F, D), q + "mlp.up_proj.weight": (F, D),
                       q + "mlp.down_proj.weight": (D, F)})
    rng = random.Random(5)
    header, blobs, off = {}, [], 0
    for name, shape in shapes.items():
        n = shape[0] * (shape[1] if len(shape) > 1 else 1)
        vals = [1.0] * n if len(shape) == 1 else [rng.gauss(0, 0.2) for _ in range(n)]
        blobs.append(struct.pack("<%df" % n, *vals))
        header[name] = {"dtype": "F32", "shape": list(shape), "data_offsets": [off, off + 4 * n]}
        off += 4 * n
    h = json.dumps(header).encode()
    h += b" " * (-(8 + len(h)) % 8)
    with open(os.path.join(d, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def rank_pid(rank, token):
    """The pid of the gradkern process of `rank` whose command line holds token."""
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            cmdline = open("/proc/%s/cmdline" % pid, "rb").read().split(b"\0")
            environ = open("/proc/%s/environ" % pid, "rb").read().split(b"\0")
        except OSError:
            continue
        if cmdline and cmdline[0].endswith(b"gradkern") and token.encode() in cmdline and \
                ("OMPI_COMM_WORLD_RANK=%d" % rank).encode() in environ:
            return int(pid)
    return None


if __name__ == "__main__":
    main()
    print("%d failure%s" % (len(failures), "" if len(failures) == 1 else "s"))
    sys.exit(1 if failures else 0)
