"""Hugging Face checkpoints (src/nn/hf.h): tiny random MambaForCausalLM and
LlamaForCausalLM directories (config.json + model.safetensors with the names
and layouts Hugging Face writes) are built here, their logits computed by
plain PyTorch implementations that follow Hugging Face's modeling code:
Mamba's MambaMixer slow path (in_proj, causal depthwise conv1d, x_proj,
dt_proj + softplus, the sequential selective scan, D skip, SiLU gate,
out_proj; pre-norm residual blocks, norm_f) and LLaMA's decoder layers
(q/k/v projections, rotate-half RoPE, grouped key/value heads, causal
softmax attention, o_proj; gate/up/down SwiGLU MLP; RMSNorms), heads tied to
the embeddings or untied (lm_head.weight). gradkern reads the directory
(tests/model_helper.c, mode hf), also split over shards with
model.safetensors.index.json: its logits equal the PyTorch ones within f32
tolerance in F32, BF16 and F16, and the embedding's and head's gradients
autograd's; writing it back and reading again is exact; 20 AdamW steps lower
the loss; bad directories and bad shard indexes get a message naming the
field, file or tensor and a non-zero exit."""
import json
import math
import os
import struct
import subprocess

import pytest
import torch

HELPER = os.environ.get("GRADKERN_MODEL_HELPER")
pytestmark = pytest.mark.skipif(not HELPER, reason="GRADKERN_MODEL_HELPER is not set (run through ctest)")

CONFIG = {"architectures": ["MambaForCausalLM"], "model_type": "mamba", "vocab_size": 50, "hidden_size": 16,
          "num_hidden_layers": 2, "state_size": 4, "expand": 2, "intermediate_size": 32, "conv_kernel": 4,
          "time_step_rank": 3, "layer_norm_epsilon": 1e-5, "use_bias": False, "use_conv_bias": True,
          "hidden_act": "silu", "tie_word_embeddings": True, "residual_in_fp32": True, "pad_token_id": 0,
          "time_step_scale": 1.0, "torch_dtype": "float32", "transformers_version": "4.39.0"}
LLAMA_CONFIG = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 50, "hidden_size": 32,
                "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
                "intermediate_size": 48, "rms_norm_eps": 1e-5, "rope_theta": 500.0, "rope_scaling": None,
                "attention_bias": False, "mlp_bias": False, "hidden_act": "silu", "tie_word_embeddings": True,
                "max_position_embeddings": 128, "torch_dtype": "float32"}
CONFIGS = {"mamba": CONFIG, "llama": LLAMA_CONFIG,
           # untied heads: lm_head.weight is a weight of its own (LLaMA's default when the field is absent)
           "mamba_untied": dict(CONFIG, tie_word_embeddings=False),
           "llama_untied": {k: v for k, v in LLAMA_CONFIG.items() if k != "tie_word_embeddings"}}
ST_DTYPES = {"F32": (torch.float32, 4), "F16": (torch.float16, 2), "BF16": (torch.bfloat16, 2),
             "I32": (torch.int32, 4), "F64": (torch.float64, 8)}


def random_weights(cfg, seed=0):
    if cfg.get("model_type") == "llama":
        return random_llama_weights(cfg, seed)
    g = torch.Generator().manual_seed(seed)
    V, D, L = cfg["vocab_size"], cfg["hidden_size"], cfg["num_hidden_layers"]
    E, N, R, W = cfg["expand"] * D, cfg["state_size"], cfg["time_step_rank"], cfg["conv_kernel"]
    r = lambda *shape, s=0.3: torch.randn(*shape, generator=g) * s
    w = {"backbone.embeddings.weight": r(V, D, s=1.0), "backbone.norm_f.weight": 1 + r(D, s=0.1)}
    for l in range(L):
        p = "backbone.layers.%d." % l
        w[p + "norm.weight"] = 1 + r(D, s=0.1)
        w[p + "mixer.in_proj.weight"] = r(2 * E, D)
        w[p + "mixer.conv1d.weight"] = r(E, 1, W)
        w[p + "mixer.conv1d.bias"] = r(E, s=0.1)
        w[p + "mixer.x_proj.weight"] = r(R + 2 * N, E)
        w[p + "mixer.dt_proj.weight"] = r(E, R)
        w[p + "mixer.dt_proj.bias"] = r(E, s=0.5) - 2
        w[p + "mixer.A_log"] = torch.log(torch.arange(1, N + 1, dtype=torch.float32)).repeat(E, 1) + r(E, N, s=0.1)
        w[p + "mixer.D"] = 1 + r(E, s=0.1)
        w[p + "mixer.out_proj.weight"] = r(D, E)
    return with_head(w, cfg, r)


def untied(cfg):
    return not cfg.get("tie_word_embeddings", cfg.get("model_type") == "mamba")  # Hugging Face's defaults


def with_head(w, cfg, r):
    """An untied config's own head weight."""
    if untied(cfg):
        w["lm_head.weight"] = r(cfg["vocab_size"], cfg["hidden_size"], s=0.5)
    return w


def random_llama_weights(cfg, seed=0):
    g = torch.Generator().manual_seed(seed)
    V, D, L, F = cfg["vocab_size"], cfg["hidden_size"], cfg["num_hidden_layers"], cfg["intermediate_size"]
    H, G = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    Dh = D // H
    r = lambda *shape, s=0.2: torch.randn(*shape, generator=g) * s
    w = {"model.embed_tokens.weight": r(V, D, s=1.0), "model.norm.weight": 1 + r(D, s=0.1)}
    for l in range(L):
        p = "model.layers.%d." % l
        w[p + "input_layernorm.weight"] = 1 + r(D, s=0.1)
        w[p + "self_attn.q_proj.weight"] = r(H * Dh, D)
        w[p + "self_attn.k_proj.weight"] = r(G * Dh, D)
        w[p + "self_attn.v_proj.weight"] = r(G * Dh, D)
        w[p + "self_attn.o_proj.weight"] = r(D, H * Dh)
        w[p + "post_attention_layernorm.weight"] = 1 + r(D, s=0.1)
        w[p + "mlp.gate_proj.weight"] = r(F, D)
        w[p + "mlp.up_proj.weight"] = r(F, D)
        w[p + "mlp.down_proj.weight"] = r(D, F)
    return with_head(w, cfg, r)


def hf_llama_logits(w, cfg, ids):
    """Hugging Face's LlamaForCausalLM forward (eager attention), in f64."""
    w = {k: v.double() for k, v in w.items()}
    D, L = cfg["hidden_size"], cfg["num_hidden_layers"]
    H, G, eps, theta = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["rms_norm_eps"], cfg["rope_theta"]
    Dh = D // H
    rms = lambda x, g: g * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))
    Bsz, T = ids.shape
    inv_freq = 1.0 / (theta ** (torch.arange(0, Dh, 2, dtype=torch.float64) / Dh))
    freqs = torch.arange(T, dtype=torch.float64)[:, None] * inv_freq[None, :]
    emb = torch.cat((freqs, freqs), dim=-1)
    cos, sin = emb.cos(), emb.sin()                                  # (T, Dh)
    rotate_half = lambda x: torch.cat((-x[..., Dh // 2:], x[..., :Dh // 2]), dim=-1)
    h = w["model.embed_tokens.weight"][ids]
    mask = torch.full((T, T), float("-inf"), dtype=torch.float64).triu(1)
    for l in range(L):
        p = lambda n: w["model.layers.%d.%s" % (l, n)]
        x = rms(h, p("input_layernorm.weight"))
        q = (x @ p("self_attn.q_proj.weight").T).view(Bsz, T, H, Dh).transpose(1, 2)
        k = (x @ p("self_attn.k_proj.weight").T).view(Bsz, T, G, Dh).transpose(1, 2)
        v = (x @ p("self_attn.v_proj.weight").T).view(Bsz, T, G, Dh).transpose(1, 2)
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        k, v = k.repeat_interleave(H // G, dim=1), v.repeat_interleave(H // G, dim=1)
        att = torch.softmax(q @ k.transpose(2, 3) / math.sqrt(Dh) + mask, dim=-1) @ v
        h = h + att.transpose(1, 2).reshape(Bsz, T, H * Dh) @ p("self_attn.o_proj.weight").T
        x = rms(h, p("post_attention_layernorm.weight"))
        mlp = torch.nn.functional.silu(x @ p("mlp.gate_proj.weight").T) * (x @ p("mlp.up_proj.weight").T)
        h = h + mlp @ p("mlp.down_proj.weight").T
    h = rms(h, w["model.norm.weight"])
    return (h @ w.get("lm_head.weight", w["model.embed_tokens.weight"]).T).reshape(Bsz * T, -1)


def reference_logits(w, cfg, ids):
    return hf_llama_logits(w, cfg, ids) if cfg["model_type"] == "llama" else hf_mamba_logits(w, cfg, ids)


def write_st(path, tensors, dtype="F32", dtypes=None):
    header, blobs, off = {"__metadata__": {"format": "pt"}}, [], 0
    for name, t in tensors.items():
        dt = (dtypes or {}).get(name, dtype)
        tt = t.to(ST_DTYPES[dt][0]).contiguous()
        raw = (tt.view(torch.int16) if dt in ("F16", "BF16") else tt).numpy().tobytes()
        header[name] = {"dtype": dt, "shape": list(t.shape), "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    h = json.dumps(header).encode()
    h += b" " * (-(8 + len(h)) % 8)
    path.write_bytes(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def read_st(path):
    raw = path.read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    header.pop("__metadata__", None)
    out = {}
    for name, info in header.items():
        b, e = info["data_offsets"]
        dt, size = ST_DTYPES[info["dtype"]]
        buf = bytearray(raw[8 + n + b:8 + n + e])
        if info["dtype"] in ("F16", "BF16"):
            t = torch.frombuffer(buf, dtype=torch.int16).view(dt)
        else:
            t = torch.frombuffer(buf, dtype=dt)
        out[name] = (info["dtype"], t.reshape(info["shape"]).clone())
    return out


def hf_mamba_logits(w, cfg, ids):
    """Hugging Face's MambaForCausalLM forward (the slow path), in f64."""
    w = {k: v.double() for k, v in w.items()}
    D, L, N, R = cfg["hidden_size"], cfg["num_hidden_layers"], cfg["state_size"], cfg["time_step_rank"]
    E, W, eps = cfg["expand"] * D, cfg["conv_kernel"], cfg["layer_norm_epsilon"]
    rms = lambda x, g: g * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))
    h = w["backbone.embeddings.weight"][ids]                       # (B, T, D)
    Bsz, T = ids.shape
    for l in range(L):
        p = lambda n: w["backbone.layers.%d.%s" % (l, n)]
        x = rms(h, p("norm.weight"))
        proj = (x @ p("mixer.in_proj.weight").T).transpose(1, 2)  # (B, 2E, T)
        hs, gate = proj.chunk(2, dim=1)
        hs = torch.nn.functional.conv1d(hs, p("mixer.conv1d.weight"), p("mixer.conv1d.bias"), padding=W - 1,
                                        groups=E)[..., :T]
        hs = torch.nn.functional.silu(hs)                           # (B, E, T)
        ssm = hs.transpose(1, 2) @ p("mixer.x_proj.weight").T       # (B, T, R + 2N)
        dt, Bm, Cm = torch.split(ssm, [R, N, N], dim=-1)
        dt = torch.nn.functional.softplus(dt @ p("mixer.dt_proj.weight").T + p("mixer.dt_proj.bias")).transpose(1, 2)
        A = -torch.exp(p("mixer.A_log"))                            # (E, N)
        dA = torch.exp(A[None, :, None, :] * dt[:, :, :, None])     # (B, E, T, N)
        dBu = dt[:, :, :, None] * Bm[:, None, :, :] * hs[:, :, :, None]
        state = torch.zeros(Bsz, E, N, dtype=torch.float64)
        ys = []
        for i in range(T):
            state = dA[:, :, i, :] * state + dBu[:, :, i, :]
            ys.append(state @ Cm[:, i, :].unsqueeze(-1))            # (B, E, 1)
        y = torch.cat(ys, dim=-1) + hs * p("mixer.D")[None, :, None]
        y = y * torch.nn.functional.silu(gate)
        h = h + y.transpose(1, 2) @ p("mixer.out_proj.weight").T
    h = rms(h, w["backbone.norm_f.weight"])
    return (h @ w.get("lm_head.weight", w["backbone.embeddings.weight"]).T).reshape(Bsz * T, -1)


def make_dir(path, cfg=CONFIG, weights=None, dtype="F32", dtypes=None):
    path.mkdir(parents=True, exist_ok=True)
    (path / "config.json").write_text(json.dumps(cfg))
    w = weights if weights is not None else random_weights(cfg)
    write_st(path / "model.safetensors", w, dtype, dtypes)
    return w


def helper(tmp_path, model_dir, *save):
    out = tmp_path / "out.safetensors"
    r = subprocess.run([HELPER, "hf", str(model_dir), str(out), *save], capture_output=True, text=True)
    return r, (read_st(out) if r.returncode == 0 else None)


@pytest.mark.parametrize("arch", list(CONFIGS))
@pytest.mark.parametrize("dtype", ["F32", "BF16", "F16"])
def test_logits_equal_pytorch(tmp_path, arch, dtype):
    cfg = CONFIGS[arch]
    w = make_dir(tmp_path / "m", cfg=cfg, dtype=dtype)
    # The reference sees the weights as stored.
    w = {k: v.to(ST_DTYPES[dtype][0]).float() for k, v in w.items()}
    r, out = helper(tmp_path, tmp_path / "m")
    assert r.returncode == 0, r.stderr
    ids = out["inputs"][1].long()
    want = reference_logits(w, cfg, ids)
    got = out["logits"][1].double()
    err = (got - want).abs().max().item()
    assert err <= 1e-4 * max(1.0, want.abs().max().item()), "max abs error %g" % err
    losses = out["finetune_losses"][1]
    assert losses[-1] < losses[0] - 0.05, losses  # 20 AdamW steps on one batch learn it


@pytest.mark.parametrize("arch", list(CONFIGS))
def test_head_and_embedding_gradients_equal_pytorch(tmp_path, arch):
    """The first fine-tuning step's gradients of the embedding and the head
    (one tensor when tied, two when untied) against autograd in f64."""
    cfg = CONFIGS[arch]
    w = make_dir(tmp_path / "m", cfg=cfg)
    r, out = helper(tmp_path, tmp_path / "m")
    assert r.returncode == 0, r.stderr
    emb_name = "model.embed_tokens.weight" if cfg["model_type"] == "llama" else "backbone.embeddings.weight"
    w = {k: v.double().requires_grad_(k in (emb_name, "lm_head.weight")) for k, v in w.items()}
    ids = out["inputs"][1].long()
    flat = ids.reshape(-1)
    targets = torch.cat([flat[1:], flat[:1]])
    keep = (torch.arange(flat.numel()) + 1) % ids.shape[1] != 0  # the helper's targets: the next token in the row
    loss = torch.nn.functional.cross_entropy(reference_logits(w, cfg, ids)[keep], targets[keep])
    loss.backward()
    want_head = w["lm_head.weight"].grad if untied(cfg) else w[emb_name].grad
    for name, want in (("grad.embedding", w[emb_name].grad), ("grad.head", want_head)):
        got = out[name][1].double()
        err = (got - want).abs().max().item()
        assert err <= 1e-5 * max(1.0, want.abs().max().item()), (name, err)
    if untied(cfg):
        assert not torch.equal(out["grad.embedding"][1], out["grad.head"][1])


@pytest.mark.parametrize("arch", list(CONFIGS))
@pytest.mark.parametrize("dtype", ["F32", "BF16"])
def test_write_back_is_exact(tmp_path, arch, dtype):
    cfg = CONFIGS[arch]
    make_dir(tmp_path / "m", cfg=cfg, dtype=dtype)
    (tmp_path / "back").mkdir()
    r, _ = helper(tmp_path, tmp_path / "m", str(tmp_path / "back"), dtype)
    assert r.returncode == 0, r.stderr
    a, b = read_st(tmp_path / "m" / "model.safetensors"), read_st(tmp_path / "back" / "model.safetensors")
    assert sorted(a) == sorted(b)
    for name in a:
        assert a[name][0] == b[name][0] and torch.equal(a[name][1], b[name][1]), name
    back = json.loads((tmp_path / "back" / "config.json").read_text())
    for k in ("vocab_size", "hidden_size", "num_hidden_layers", "state_size", "expand", "conv_kernel",
              "time_step_rank", "layer_norm_epsilon", "num_attention_heads", "num_key_value_heads",
              "intermediate_size", "rms_norm_eps", "rope_theta", "tie_word_embeddings", "architectures"):
        if k in cfg:
            assert back[k] == cfg[k], k
    assert back["tie_word_embeddings"] == (not untied(cfg))
    # ... and reads again into the same logits.
    r1, o1 = helper(tmp_path, tmp_path / "m")
    r2, o2 = helper(tmp_path, tmp_path / "back")
    assert r1.returncode == 0 and r2.returncode == 0 and torch.equal(o1["logits"][1], o2["logits"][1])


DELETE = object()  # a config field to leave out


def bad_case(tmp_path, name, needle, cfg_change=None, drop=None, reshape=None, dtypes=None, extra=None, head=None,
             base=CONFIG):
    cfg = {k: v for k, v in dict(base, **(cfg_change or {})).items() if v is not DELETE}
    w = random_weights(base)
    if drop:
        del w[drop]
    if reshape:
        w[reshape] = w[reshape].reshape(-1)
    if extra:
        w[extra] = torch.zeros(3)
    if head is not None:
        w["lm_head.weight"] = head(w["backbone.embeddings.weight" if base is CONFIG else "model.embed_tokens.weight"])
    make_dir(tmp_path / name, cfg=cfg, weights=w, dtypes=dtypes)
    r, _ = helper(tmp_path, tmp_path / name)
    assert r.returncode != 0 and needle in r.stderr, (name, r.stderr)


def test_bad_directories(tmp_path):
    bad_case(tmp_path, "arch", "MambaForCausalLM and LlamaForCausalLM",
             {"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2"})
    bad_case(tmp_path, "state", "\"state_size\" is 0", {"state_size": 0})
    bad_case(tmp_path, "layers", "num_hidden_layers", {"num_hidden_layers": 5000})
    bad_case(tmp_path, "inner", "intermediate_size", {"intermediate_size": 40})
    bad_case(tmp_path, "eps", "layer_norm_epsilon", {"layer_norm_epsilon": -1})
    bad_case(tmp_path, "bias", "use_bias", {"use_bias": True})
    bad_case(tmp_path, "tie", "lm_head.weight", {"tie_word_embeddings": False})  # untied, with no head
    bad_case(tmp_path, "act", "hidden_act", {"hidden_act": "gelu"})
    bad_case(tmp_path, "missing", "backbone.layers.1.mixer.A_log", drop="backbone.layers.1.mixer.A_log")
    bad_case(tmp_path, "shape", "backbone.layers.0.mixer.conv1d.weight", reshape="backbone.layers.0.mixer.conv1d.weight")
    bad_case(tmp_path, "dtype", "I32", dtypes={"backbone.layers.0.mixer.D": "I32"})
    bad_case(tmp_path, "unknown", "backbone.layers.0.mixer.extra", extra="backbone.layers.0.mixer.extra")
    bad_case(tmp_path, "untied", "differs from the embedding", head=lambda e: e + 1)
    L = LLAMA_CONFIG
    bad_case(tmp_path, "l_scaling", "rope_scaling", {"rope_scaling": {"type": "linear", "factor": 2.0}}, base=L)
    bad_case(tmp_path, "l_heads", "num_key_value_heads", {"num_key_value_heads": 3}, base=L)
    bad_case(tmp_path, "l_head_dim", "head_dim", {"head_dim": 16}, base=L)
    bad_case(tmp_path, "l_bias", "attention_bias", {"attention_bias": True}, base=L)
    bad_case(tmp_path, "l_tie", "lm_head.weight", {"tie_word_embeddings": False}, base=L)
    bad_case(tmp_path, "l_tie_default", "lm_head.weight", {"tie_word_embeddings": DELETE}, base=L)
    bad_case(tmp_path, "l_head_shape", "lm_head.weight", {"tie_word_embeddings": False}, base=L,
             head=lambda e: e[:, :-1].clone())
    bad_case(tmp_path, "l_missing", "model.layers.0.self_attn.k_proj.weight", drop="model.layers.0.self_attn.k_proj.weight",
             base=L)
    bad_case(tmp_path, "l_shape", "model.layers.1.mlp.gate_proj.weight", reshape="model.layers.1.mlp.gate_proj.weight",
             base=L)
    bad_case(tmp_path, "l_untied", "differs from the embedding", head=lambda e: e * 2, base=L)
    (tmp_path / "nocfg").mkdir()
    r, _ = helper(tmp_path, tmp_path / "nocfg")
    assert r.returncode != 0 and "config.json" in r.stderr


def test_tied_head_accepted(tmp_path):
    w = random_weights(CONFIG)
    w["lm_head.weight"] = w["backbone.embeddings.weight"].clone()
    make_dir(tmp_path / "m", weights=w)
    r, _ = helper(tmp_path, tmp_path / "m")
    assert r.returncode == 0, r.stderr


def make_sharded(path, cfg, weights, shards=3, index=None):
    """The tensors of `weights` split over `shards` files in the order given,
    with model.safetensors.index.json (its weight_map changed by `index`)."""
    path.mkdir(parents=True, exist_ok=True)
    (path / "config.json").write_text(json.dumps(cfg))
    names = list(weights)
    files = {}
    for i, name in enumerate(names):
        files.setdefault("model-%05d-of-%05d.safetensors" % (i * shards // len(names) + 1, shards), {})[name] = \
            weights[name]
    for f, ws in files.items():
        write_st(path / f, ws)
    weight_map = {name: f for f, ws in files.items() for name in ws}
    if index:
        index(weight_map)
    (path / "model.safetensors.index.json").write_text(
        json.dumps({"metadata": {"total_size": 0}, "weight_map": weight_map}))
    return files


@pytest.mark.parametrize("arch", list(CONFIGS))
def test_sharded_equals_unsharded(tmp_path, arch):
    cfg = CONFIGS[arch]
    w = make_dir(tmp_path / "one", cfg=cfg)
    assert len(make_sharded(tmp_path / "sharded", cfg, w)) == 3
    r1, o1 = helper(tmp_path, tmp_path / "one")
    r2, o2 = helper(tmp_path, tmp_path / "sharded")
    assert r1.returncode == 0 and r2.returncode == 0, r2.stderr
    assert torch.equal(o1["logits"][1], o2["logits"][1])
    assert torch.equal(o1["finetune_losses"][1], o2["finetune_losses"][1])


def test_bad_shard_indexes(tmp_path):
    w = random_weights(CONFIG)
    last = "model-00003-of-00003.safetensors"

    def bad(name, needle, index=None, after=None, raw=None):
        make_sharded(tmp_path / name, CONFIG, w, index=index)
        if after:
            after(tmp_path / name)
        if raw is not None:
            (tmp_path / name / "model.safetensors.index.json").write_text(raw)
        r, _ = helper(tmp_path, tmp_path / name)
        assert r.returncode != 0 and needle in r.stderr, (name, r.stderr)

    bad("missing_shard", last, after=lambda d: (d / last).unlink())
    bad("wrong_shard", "backbone.norm_f.weight", index=lambda m: m.update({"backbone.norm_f.weight": last}))
    bad("not_in_map", "backbone.layers.1.mixer.D", index=lambda m: m.pop("backbone.layers.1.mixer.D"))
    bad("no_such_tensor", "backbone.layers.9.mixer.D",
        index=lambda m: m.update({"backbone.layers.9.mixer.D": "model-00001-of-00003.safetensors"}))
    bad("duplicate", "listed twice", raw='{"weight_map": {"backbone.norm_f.weight": "%s", '
        '"backbone.norm_f.weight": "%s"}}' % (last, last))
    bad("path", "not a file name", index=lambda m: m.update({"backbone.norm_f.weight": "../x.safetensors"}))
    bad("no_map", "has no \"weight_map\"", raw='{"metadata": {}}')
    bad("empty_map", "lists no tensors", raw='{"weight_map": {}}')
    bad("bad_json", "checkpoint index", raw='{"weight_map": {"a": 1}}')
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "config.json").write_text(json.dumps(CONFIG))
    r, _ = helper(tmp_path, tmp_path / "empty")
    assert r.returncode != 0 and "neither model.safetensors nor model.safetensors.index.json" in r.stderr, r.stderr


@pytest.mark.parametrize("arch", list(CONFIGS))
def test_fine_tune_and_sample_from_the_command_line(tmp_path, arch):
    """gradkern train --init DIR --tokenizer ... --save-hf OUT, then gradkern
    sample --model OUT: the evaluation loss falls, the written directory reads
    back (with the directory's norm epsilon, 1e-6 here), and sampling decodes
    with the tokenizer."""
    import re
    import test_tokenizer_cli as tc
    bin_ = os.environ.get("GRADKERN_BIN")
    assert bin_, "GRADKERN_BIN is not set (run through ctest)"
    tj = tc.tokenizer_json()
    tok = tmp_path / "tokenizer.json"
    tok.write_text(json.dumps(tj))
    cfg = dict(CONFIGS[arch], vocab_size=max([len(tj["model"]["vocab"])] + [t["id"] + 1 for t in tj["added_tokens"]]))
    cfg["rms_norm_eps" if "rms_norm_eps" in cfg else "layer_norm_epsilon"] = 1e-6  # not the default 1e-5
    make_dir(tmp_path / "base", cfg=cfg, weights=random_weights(cfg), dtype="BF16")
    data = tmp_path / "text.txt"
    data.write_text(tc.random_text(5, 20000))
    out_dir = tmp_path / "tuned"
    out_dir.mkdir()
    r = subprocess.run([bin_, "train", "--task", "text", "--data", str(data), "--tokenizer", str(tok), "--init",
                        str(tmp_path / "base"), "--steps", "20", "--seq-len", "16", "--batch", "4", "--lr", "3e-3",
                        "--eval-every", "5", "--eval-batches", "2", "--save-hf", str(out_dir),
                        "--checkpoint", str(tmp_path / "run.safetensors")],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    evals = [float(x) for x in re.findall(r"eval loss ([0-9.]+),", r.stdout + r.stderr)]
    assert len(evals) >= 4 and evals[-1] < evals[0], r.stdout
    back = read_st(out_dir / "model.safetensors")
    assert all(dt == "BF16" for dt, _ in back.values())  # written back in the dtype it was read in
    assert json.loads((out_dir / "config.json").read_text())["vocab_size"] == cfg["vocab_size"]
    assert ("lm_head.weight" in back) == untied(cfg)
    assert json.loads((out_dir / "config.json").read_text())["tie_word_embeddings"] == (not untied(cfg))
    # The gradkern checkpoint records the untied head, and samples.
    raw = (tmp_path / "run.safetensors").read_bytes()
    meta = json.loads(raw[8:8 + struct.unpack("<Q", raw[:8])[0]])["__metadata__"]
    assert ("untied_head=1" in meta["config"].split()) == untied(cfg), meta["config"]
    recorded = dict(kv.split("=", 1) for kv in meta["config"].split())
    assert float(recorded["norm_eps"]) == 1e-6, meta["config"]  # the config's epsilon, kept for resume and sample
    s1 = subprocess.run([bin_, "sample", "--checkpoint", str(tmp_path / "run.safetensors"), "--tokenizer", str(tok),
                         "--prompt", "the hand", "--tokens", "20", "--seed", "2", "--temperature", "0"],
                        capture_output=True, timeout=300)
    assert s1.returncode == 0 and len(s1.stdout) > 0, s1.stderr.decode()
    s = subprocess.run([bin_, "sample", "--model", str(out_dir), "--tokenizer", str(tok), "--prompt", "the hand",
                        "--tokens", "20", "--seed", "2"], capture_output=True, timeout=300)
    assert s.returncode == 0 and len(s.stdout) > 0, s.stderr.decode()
    s = subprocess.run([bin_, "sample", "--model", str(out_dir), "--tokens", "5"], capture_output=True, text=True)
    assert s.returncode == 1 and "--tokenizer PATH" in s.stderr
    r = subprocess.run([bin_, "train", "--task", "text", "--data", str(data), "--init", str(tmp_path / "base"),
                        "--width", "32"], capture_output=True, text=True)
    assert r.returncode == 2 and "--width cannot be given with --init" in r.stderr
