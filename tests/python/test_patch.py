"""gradkern.patch on a LLaMA written as Hugging Face writes it (hf_llama.py):
the patched model trains as the unpatched one (loss and every gradient over
10 AdamW steps), keeps its parameters and state_dict, and unpatch gives the
original forwards back."""
import copy

import pytest
import torch

import gradkern
from hf_llama import LlamaConfig, LlamaForCausalLM


def _models(dtype=torch.float32, seed=0, **cfg):
    torch.manual_seed(seed)
    ref = LlamaForCausalLM(LlamaConfig(**cfg)).to(dtype)
    patched = copy.deepcopy(ref)
    return ref, patched


def _batches(n, vocab, seed=1):
    g = torch.Generator().manual_seed(seed)
    return [torch.randint(0, vocab, (3, 24), generator=g) for _ in range(n)]


def _close(got, want, rtol, atol, what):
    err = (got.double() - want.double()).abs()
    tol = atol + rtol * want.double().abs()
    assert bool((err <= tol).all()), "%s: largest error %.3g where tolerance %.3g" % (
        what, float(err.max()), float(tol[err == err.max()].min()))


def test_patch_finds_every_module():
    ref, patched = _models()
    counts = gradkern.patch(patched)
    n = ref.config.num_hidden_layers
    assert counts == {"rms_norm": 2 * n + 1, "mlp": n, "attention": n, "cross_entropy": 1}
    assert gradkern.patch(patched) == {"rms_norm": 0, "mlp": 0, "attention": 0, "cross_entropy": 0}


@pytest.mark.parametrize("kv_heads", [4, 2])
def test_patched_model_trains_as_the_unpatched_one(kv_heads):
    """Loss and gradients of every parameter agree at each of 10 AdamW steps
    (f32: 1e-5 relative on the loss; gradients within 1e-4 relative plus a
    small absolute floor, as the two compute in a different order)."""
    ref, patched = _models(num_key_value_heads=kv_heads)
    gradkern.patch(patched)
    opt_ref = torch.optim.AdamW(ref.parameters(), lr=1e-3)
    opt_pat = torch.optim.AdamW(patched.parameters(), lr=1e-3)
    names = [n for n, _ in ref.named_parameters()]
    for step, ids in enumerate(_batches(10, ref.config.vocab_size)):
        losses = []
        for model, opt in ((ref, opt_ref), (patched, opt_pat)):
            opt.zero_grad()
            loss, _ = model(ids, labels=ids)
            loss.backward()
            losses.append(loss.detach())
        _close(losses[1], losses[0], 1e-5, 0, "loss at step %d" % step)
        for name, p_ref, p_pat in zip(names, ref.parameters(), patched.parameters()):
            _close(p_pat.grad, p_ref.grad, 1e-4, 1e-6, "step %d: gradient of %s" % (step, name))
        opt_ref.step()
        opt_pat.step()


def test_patched_bf16_model_matches_within_bf16_tolerance():
    ref, patched = _models(dtype=torch.bfloat16)
    gradkern.patch(patched)
    ids = _batches(1, ref.config.vocab_size)[0]
    loss_ref, logits_ref = ref(ids, labels=ids)
    loss_pat, logits_pat = patched(ids, labels=ids)
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
