"""gradkern.patch on a LLaMA written as Hugging Face writes it (hf_llama.py):
the patched model trains as the unpatched one (loss and every gradient over
10 AdamW steps), keeps its parameters and state_dict, and unpatch gives the
original forwards back."""
import copy

import pytest
import torch

import gradkern
from hf_llama import LlamaConfig, LlamaForCausalLM
from hf_mamba import MambaConfig, MambaForCausalLM


def _models(dtype=torch.float32, seed=0, **cfg):
    torch.manual_seed(seed)
    ref = LlamaForCausalLM(LlamaConfig(**cfg)).to(dtype)
    patched = copy.deepcopy(ref)
    return ref, patched


def _batches(n, vocab, seed=1):
    g = torch.Generator().manual_seed(seed)
    return [torch.randint(0, vocab, (3, 24), generator=g) for _ in range(n)]


def _masked(ids, seed=2):
    """ids with about a quarter of the labels set to the ignore index -100."""
    g = torch.Generator().manual_seed(seed)
    return ids.masked_fill(torch.rand(ids.shape, generator=g) < 0.25, -100)


def _close(got, want, rtol, atol, what):
    err = (got.double() - want.double()).abs()
    tol = atol + rtol * want.double().abs()
    assert bool((err <= tol).all()), "%s: largest error %.3g where tolerance %.3g" % (
        what, float(err.max()), float(tol[err == err.max()].min()))


def test_patch_finds_every_module():
    ref, patched = _models()
    counts = gradkern.patch(patched)
    n = ref.config.num_hidden_layers
    assert counts == {"rms_norm": 2 * n + 1, "mlp": n, "attention": n, "cross_entropy": 1, "lm_head_loss": 1,
                      "mamba_mixer": 0}
    assert gradkern.patch(patched) == {"rms_norm": 0, "mlp": 0, "attention": 0, "cross_entropy": 0,
                                       "lm_head_loss": 0, "mamba_mixer": 0}


def _loss_and_backward(model, opt, ids, labels):
    opt.zero_grad()
    loss, _ = model(ids, labels=labels)
    loss.backward()
    return loss.detach()


def _train_side_by_side(ref, patched, masked, grad_rtol, grad_atol):
    """10 AdamW steps of both models on the same batches, each model on its
    own trajectory: the losses agree within 1e-5 relative at every step.
    At every step the patched model's gradients are also taken at the
    reference's parameters (its own put back afterwards), each within
    grad_rtol relative plus grad_atol times its largest entry: compared at
    the same point, the gradients differ only by the two computations'
    rounding, not by rounding compounded through earlier AdamW steps."""
    opt_ref = torch.optim.AdamW(ref.parameters(), lr=1e-3)
    opt_pat = torch.optim.AdamW(patched.parameters(), lr=1e-3)
    names = [n for n, _ in ref.named_parameters()]
    for step, ids in enumerate(_batches(10, ref.config.vocab_size)):
        labels = _masked(ids, seed=step) if masked else ids
        loss_ref = _loss_and_backward(ref, opt_ref, ids, labels)
        own = [p.detach().clone() for p in patched.parameters()]
        with torch.no_grad():
            for p_pat, p_ref in zip(patched.parameters(), ref.parameters()):
                p_pat.copy_(p_ref)
        loss_at_ref = _loss_and_backward(patched, opt_pat, ids, labels)
        _close(loss_at_ref, loss_ref, 1e-5, 0, "step %d: loss at the reference's parameters" % step)
        for name, p_ref, p_pat in zip(names, ref.parameters(), patched.parameters()):
            _close(p_pat.grad, p_ref.grad, grad_rtol, grad_atol * float(p_ref.grad.abs().max()),
                   "step %d: gradient of %s" % (step, name))
        with torch.no_grad():
            for p_pat, p_own in zip(patched.parameters(), own):
                p_pat.copy_(p_own)
        loss_pat = _loss_and_backward(patched, opt_pat, ids, labels)
        _close(loss_pat, loss_ref, 1e-5, 0, "loss at step %d" % step)
        opt_ref.step()
        opt_pat.step()


@pytest.mark.parametrize("masked", [False, True])
def test_fused_lm_head_loss_trains_as_the_unpatched_model(masked):
    """Only the LM head and the loss patched (gradkern.linear_cross_entropy,
    in chunks), with and without ignored labels (-100): losses within 1e-5
    relative (1.7e-7 seen) and gradients at the same parameters within 1e-5
    relative plus 1e-5 of their largest entry (4.9e-7 of it seen: the same
    math in f32, the head's matmuls blocked per chunk) at each of 10 AdamW
    steps."""
    ref, patched = _models()
    counts = gradkern.patch(patched, rms_norm=False, mlp=False, attention=False, cross_entropy=False)
    assert counts["lm_head_loss"] == 1
    _train_side_by_side(ref, patched, masked, 1e-5, 1e-5)


def test_fused_lm_head_loss_returns_no_logits_with_labels_and_logits_without():
    ref, patched = _models()
    gradkern.patch(patched)
    ids = _batches(1, ref.config.vocab_size)[0]
    loss, logits = patched(ids, labels=ids)
    assert logits is None and loss.dim() == 0
    with torch.no_grad():
        loss_nograd, _ = patched(ids, labels=ids)
        _close(loss_nograd, loss.detach(), 1e-6, 0, "loss under no_grad")
        _close(patched(ids)[1], ref(ids)[1], 1e-4, 1e-5, "logits without labels")


@pytest.mark.parametrize("arch", ["llama", "mamba"])
def test_fused_lm_head_returns_a_hugging_face_style_output(arch):
    """.loss and .logits (None: never stored whole), and it indexes and
    unpacks as the unpatched model's (loss, logits) tuple."""
    torch.manual_seed(0)
    if arch == "llama":
        ref = LlamaForCausalLM(LlamaConfig())
    else:
        ref = MambaForCausalLM(MambaConfig())
    patched = copy.deepcopy(ref)
    gradkern.patch(patched)
    ids = _batches(1, ref.config.vocab_size)[0]
    out = patched(ids, labels=ids)
    assert isinstance(out, gradkern.CausalLMOutput)
    assert out.logits is None and out[1] is None and len(out) == 2
    assert out.loss is out[0] and tuple(out) == (out.loss, None)
    ref_loss, _ = ref(ids, labels=ids)
    _close(out.loss, ref_loss, 1e-5, 0, "loss")
    out.loss.backward()
    assert all(p.grad is not None for p in patched.parameters())


@pytest.mark.parametrize("reduction", ["mean", "sum"])
@pytest.mark.parametrize("chunk_rows", [None, 1, 7, 1000])
def test_linear_cross_entropy_matches_torch(reduction, chunk_rows):
    """gradkern.linear_cross_entropy against F.cross_entropy(F.linear(...)),
    ignored rows, label smoothing and a dloss that is not 1 included."""
    torch.manual_seed(3)
    h = torch.randn(2, 37, 16, dtype=torch.float64, requires_grad=True)
    w = torch.randn(100, 16, dtype=torch.float64, requires_grad=True)
    t = torch.randint(0, 100, (2, 37))
    t[0, :5] = -100
    for smoothing in (0.0, 0.1):
        h.grad = w.grad = None
        loss = gradkern.linear_cross_entropy(h, w, t, reduction=reduction, label_smoothing=smoothing,
                                             chunk_rows=chunk_rows)
        (loss * 3).backward()
        gh, gw = h.grad, w.grad
        h.grad = w.grad = None
        want = torch.nn.functional.cross_entropy(torch.nn.functional.linear(h, w).reshape(-1, 100), t.reshape(-1),
                                                 reduction=reduction, label_smoothing=smoothing)
        (want * 3).backward()
        _close(loss, want, 1e-12, 0, "loss")
        _close(gh, h.grad, 1e-10, 1e-12, "dhidden")
        _close(gw, w.grad, 1e-10, 1e-12, "dweight")


def test_linear_cross_entropy_every_row_ignored_gives_nan_and_zero_gradients_as_torch():
    h = torch.randn(4, 8, requires_grad=True)
    w = torch.randn(10, 8, requires_grad=True)
    loss = gradkern.linear_cross_entropy(h, w, torch.full((4,), -100))
    loss.backward()
    assert torch.isnan(loss) and not h.grad.any() and not w.grad.any()


def test_linear_cross_entropy_bf16_within_bf16_tolerance():
    """bf16 hidden and weight against torch in f32 on the same values: the
    loss within 1e-2 relative, gradients (dweight summed over chunks in f32,
    rounded once) within 1e-2 of their largest entry."""
    torch.manual_seed(4)
    h = torch.randn(2, 37, 64, dtype=torch.bfloat16, requires_grad=True)
    w = (torch.randn(300, 64) * 0.1).bfloat16().requires_grad_()
    t = torch.randint(0, 300, (2, 37))
    loss = gradkern.linear_cross_entropy(h, w, t, chunk_rows=9)
    loss.backward()
    assert loss.dtype == h.grad.dtype == w.grad.dtype == torch.bfloat16
    h32, w32 = h.detach().float().requires_grad_(), w.detach().float().requires_grad_()
    want = torch.nn.functional.cross_entropy(torch.nn.functional.linear(h32, w32).reshape(-1, 300), t.reshape(-1))
    want.backward()
    _close(loss, want, 1e-2, 0, "bf16 loss")
    _close(h.grad, h32.grad, 0, 1e-2 * float(h32.grad.abs().max()), "bf16 dhidden")
    _close(w.grad, w32.grad, 0, 1e-2 * float(w32.grad.abs().max()), "bf16 dweight")


def test_linear_cross_entropy_rejects_bad_shapes():
    h, w = torch.randn(4, 8), torch.randn(10, 8)
    with pytest.raises(ValueError, match="weight"):
        gradkern.linear_cross_entropy(h, torch.randn(10, 7), torch.zeros(4, dtype=torch.long))
    with pytest.raises(ValueError, match="target"):
        gradkern.linear_cross_entropy(h, w, torch.zeros(5, dtype=torch.long))
    with pytest.raises(ValueError, match="reduction"):
        gradkern.linear_cross_entropy(h, w, torch.zeros(4, dtype=torch.long), reduction="none")
    with pytest.raises(gradkern.Error, match="target"):
        gradkern.linear_cross_entropy(h, w, torch.full((4,), 10, dtype=torch.long))


@pytest.mark.parametrize("kv_heads", [4, 2])
@pytest.mark.parametrize("masked", [False, True])
def test_patched_model_trains_as_the_unpatched_one(kv_heads, masked):
    """Everything patched: losses within 1e-5 relative (1.7e-7 seen) and
    gradients at the same parameters within 1e-5 relative plus 1e-5 of their
    largest entry (8.2e-7 of it seen, as the two sum in a different order) at
    each of 10 AdamW steps."""
    ref, patched = _models(num_key_value_heads=kv_heads)
    gradkern.patch(patched)
    _train_side_by_side(ref, patched, masked, 1e-5, 1e-5)


def test_patched_bf16_model_matches_within_bf16_tolerance():
    ref, patched = _models(dtype=torch.bfloat16)
    gradkern.patch(patched)
    ids = _batches(1, ref.config.vocab_size)[0]
    loss_ref, logits_ref = ref(ids, labels=ids)
    loss_pat, _ = patched(ids, labels=ids)               # the fused head and loss: no logits
    _, logits_pat = patched(ids)
    _close(loss_pat, loss_ref, 2e-2, 0, "bf16 loss")
    _close(logits_pat, logits_ref, 5e-2, 5e-2, "bf16 logits")


def test_state_dict_round_trips():
    ref, patched = _models()
    gradkern.patch(patched)
    assert list(patched.state_dict()) == list(ref.state_dict())
    torch.manual_seed(5)
    other = LlamaForCausalLM(ref.config)
    patched.load_state_dict(other.state_dict())          # unpatched -> patched
    ids = _batches(1, ref.config.vocab_size)[0]
    with torch.no_grad():
        _close(patched(ids, labels=ids)[0], other(ids, labels=ids)[0], 1e-5, 0, "loss after loading")
    fresh = LlamaForCausalLM(ref.config)
    fresh.load_state_dict(patched.state_dict())           # patched -> unpatched
    for (n, a), b in zip(fresh.state_dict().items(), other.state_dict().values()):
        assert torch.equal(a, b), n


def test_attention_with_a_mask_runs_the_original_forward():
    ref, patched = _models()
    gradkern.patch(patched)
    x = torch.randn(2, 5, ref.config.hidden_size)
    mask = torch.zeros(5, 5)                               # not causal: gradkern's path does not apply
    attn_ref, attn_pat = ref.model.layers[0].self_attn, patched.model.layers[0].self_attn
    assert torch.equal(attn_pat(x, attention_mask=mask), attn_ref(x, attention_mask=mask))


def test_unpatch_restores_the_original_forwards():
    ref, patched = _models()
    gradkern.patch(patched)
    gradkern.unpatch(patched)
    assert not any("forward" in vars(m) for m in patched.modules())
    ids = _batches(1, ref.config.vocab_size)[0]
    assert torch.equal(patched(ids, labels=ids)[0], ref(ids, labels=ids)[0])


# ---------------------------------------------------------------- Mamba

def _mamba_models(seed=0, **cfg):
    torch.manual_seed(seed)
    ref = MambaForCausalLM(MambaConfig(**cfg))
    return ref, copy.deepcopy(ref)


def test_patch_finds_every_mamba_module():
    ref, patched = _mamba_models()
    counts = gradkern.patch(patched)
    n = ref.config.num_hidden_layers
    assert counts == {"rms_norm": n + 1, "mlp": 0, "attention": 0, "cross_entropy": 1, "lm_head_loss": 1,
                      "mamba_mixer": n}


@pytest.mark.parametrize("masked", [False, True])
@pytest.mark.parametrize("fused_head", [True, False])
def test_patched_mamba_trains_as_the_unpatched_one(masked, fused_head):
    """Mixers (causal conv1d + selective scan), norms and the loss (the LM
    head fused with it, or not) patched; the LM head tied to the embeddings.
    Losses within 1e-5 relative (1.7e-7 seen) and gradients at the same
    parameters within 1e-5 relative plus 2e-5 of their largest entry (2.0e-6
    of it seen: gradkern's scan keeps the state in f32 as the model's
    step-by-step loop does, but sums in another order) at each of 10 AdamW
    steps."""
    ref, patched = _mamba_models()
    counts = gradkern.patch(patched, lm_head_loss=fused_head)
    assert counts["mamba_mixer"] == ref.config.num_hidden_layers and counts["lm_head_loss"] == int(fused_head)
    _train_side_by_side(ref, patched, masked, 1e-5, 2e-5)


def test_patched_mamba_forward_matches_without_labels():
    ref, patched = _mamba_models()
    gradkern.patch(patched)
    ids = _batches(1, ref.config.vocab_size)[0]
    with torch.no_grad():
        _close(patched(ids)[1], ref(ids)[1], 1e-5, 1e-6, "Mamba logits")


def test_mamba_mixer_with_a_mask_runs_the_original_forward():
    ref, patched = _mamba_models()
    gradkern.patch(patched)
    x = torch.randn(2, 5, ref.config.hidden_size)
    mask = torch.ones(2, 5)
    mix_ref, mix_pat = ref.backbone.layers[0].mixer, patched.backbone.layers[0].mixer
    assert torch.equal(mix_pat(x, attention_mask=mask), mix_ref(x, attention_mask=mask))


def test_mamba_state_dict_round_trips():
    ref, patched = _mamba_models()
    gradkern.patch(patched)
    assert list(patched.state_dict()) == list(ref.state_dict())
    torch.manual_seed(5)
    other = MambaForCausalLM(ref.config)
    patched.load_state_dict(other.state_dict())           # unpatched -> patched
    assert patched.lm_head.weight is patched.backbone.embeddings.weight
    ids = _batches(1, ref.config.vocab_size)[0]
    with torch.no_grad():
        _close(patched(ids, labels=ids)[0], other(ids, labels=ids)[0], 1e-5, 0, "loss after loading")
    fresh = MambaForCausalLM(ref.config)
    fresh.load_state_dict(patched.state_dict())            # patched -> unpatched
    for (n, a), b in zip(fresh.state_dict().items(), other.state_dict().values()):
        assert torch.equal(a, b), n
    gradkern.unpatch(patched)
    assert not any("forward" in vars(m) for m in patched.modules())
