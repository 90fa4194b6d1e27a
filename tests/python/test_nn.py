"""gradkern.nn: each module against its plain-torch counterpart (torch.nn's,
or the Hugging Face-style ones of hf_llama.py and hf_mamba.py) holding the
same parameters: forward output and the gradients of the input and of every
parameter, in float32 and bfloat16; and state_dict() loads both ways."""
import copy

import pytest
import torch

import gradkern
from hf_llama import LlamaAttention, LlamaConfig, LlamaMLP, LlamaRMSNorm
from hf_mamba import MambaConfig, MambaMixer

H, I, HEADS = 64, 176, 4


class LMHeadAndLoss(torch.nn.Module):
    """The unfused counterpart of LinearCrossEntropyLoss: nn.Linear's logits
    and nn.CrossEntropyLoss; its state_dict is the linear layer's."""

    def __init__(self, in_features, num_classes):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(num_classes, in_features) * in_features ** -0.5)

    def forward(self, hidden, target):
        return torch.nn.functional.cross_entropy(torch.nn.functional.linear(hidden, self.weight), target)


def _hidden(*shape):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(7))


def _targets(n, classes):
    t = torch.randint(0, classes, (n,), generator=torch.Generator().manual_seed(8))
    t[::5] = -100                                  # some ignored rows
    return t


# name -> (gradkern module, torch counterpart, inputs(): a list of tensors; the first is differentiated)
CASES = {
    "Linear": (lambda: gradkern.nn.Linear(H, 48), lambda: torch.nn.Linear(H, 48), lambda: [_hidden(3, 5, H)]),
    "LayerNorm": (lambda: gradkern.nn.LayerNorm(H), lambda: torch.nn.LayerNorm(H), lambda: [_hidden(3, 5, H)]),
    "RMSNorm": (lambda: gradkern.nn.RMSNorm(H), lambda: LlamaRMSNorm(H), lambda: [_hidden(3, 5, H)]),
    "SwiGLUMLP": (lambda: gradkern.nn.SwiGLUMLP(H, I),
                  lambda: LlamaMLP(LlamaConfig(hidden_size=H, intermediate_size=I)), lambda: [_hidden(3, 5, H)]),
    "RoPEAttention": (lambda: gradkern.nn.RoPEAttention(H, HEADS, rope_theta=500.0),
                      lambda: LlamaAttention(LlamaConfig(hidden_size=H, num_attention_heads=HEADS,
                                                         num_key_value_heads=HEADS, rope_theta=500.0)),
                      lambda: [_hidden(2, 9, H)]),
    "RoPEAttention GQA": (lambda: gradkern.nn.RoPEAttention(H, HEADS, num_key_value_heads=2),
                          lambda: LlamaAttention(LlamaConfig(hidden_size=H, num_attention_heads=HEADS,
                                                             num_key_value_heads=2)),
                          lambda: [_hidden(2, 9, H)]),
    "MambaMixer": (lambda: gradkern.nn.MambaMixer(32, state_size=8),
                   lambda: MambaMixer(MambaConfig(hidden_size=32, state_size=8), 0), lambda: [_hidden(2, 11, 32)]),
    "CrossEntropyLoss": (lambda: gradkern.nn.CrossEntropyLoss(label_smoothing=0.1),
                         lambda: torch.nn.CrossEntropyLoss(label_smoothing=0.1),
                         lambda: [_hidden(20, 37), _targets(20, 37)]),
    "LinearCrossEntropyLoss": (lambda: gradkern.nn.LinearCrossEntropyLoss(H, 37), lambda: LMHeadAndLoss(H, 37),
                               lambda: [_hidden(20, H), _targets(20, 37)]),
}


def _pair(name, dtype):
    """(gradkern module, torch module) with the torch module's parameters."""
    make_gk, make_torch, _ = CASES[name]
    torch.manual_seed(0)
    ref = make_torch()
    with torch.no_grad():           # parameters away from their initial ones and, for norms, from 1
        for p in ref.parameters():
            p.add_(0.1 * torch.randn_like(p))
    gk = make_gk()
    gk.load_state_dict(ref.state_dict())
    return gk.to(dtype), ref.to(dtype)


def _run(module, inputs):
    inputs = [t.detach().clone().requires_grad_(i == 0) for i, t in enumerate(inputs)]
    module.zero_grad(set_to_none=True)
    y = module(*inputs)
    dy = torch.randn(y.shape, generator=torch.Generator().manual_seed(9), dtype=torch.float32).to(y.dtype)
    y.backward(dy)
    grads = {"input": inputs[0].grad}
    grads.update({n: p.grad for n, p in module.named_parameters()})
    return y.detach(), grads


def _close(got, want, rtol, what):
    """|got - want| <= rtol * (|want| + max |want|): relative, with an absolute
    floor at rtol of the largest entry (the sums run in different orders)."""
    got, want = got.double(), want.double()
    tol = rtol * (want.abs() + want.abs().max())
    err = (got - want).abs()
    assert bool((err <= tol).all()), "%s: largest error %.3g (tolerance there %.3g)" % (
        what, float(err.max()), float(tol.flatten()[int(err.argmax())]))


@pytest.mark.parametrize("name", list(CASES))
def test_module_matches_torch_in_float32(name):
    gk, ref = _pair(name, torch.float32)
    inputs = CASES[name][2]()
    y, grads = _run(gk, inputs)
    y_ref, grads_ref = _run(ref, inputs)
    _close(y, y_ref, 1e-5, name + " forward")
    assert grads.keys() == grads_ref.keys()
    for k in grads_ref:
        _close(grads[k], grads_ref[k], 1e-4, "%s d%s" % (name, k))


@pytest.mark.parametrize("name", list(CASES))
def test_module_in_bfloat16_matches_torch_float32_within_bfloat16_tolerance(name):
    """The bf16 module against the torch module in float32 on the same
    (bf16-rounded) parameters and inputs: within a few bf16 roundings."""
    gk, ref = _pair(name, torch.bfloat16)
    ref = ref.float()
    inputs = [t.to(torch.bfloat16) if t.is_floating_point() else t for t in CASES[name][2]()]
    y, grads = _run(gk, inputs)
    y_ref, grads_ref = _run(ref, [t.float() if t.is_floating_point() else t for t in inputs])
    assert y.dtype == torch.bfloat16
    _close(y, y_ref, 3e-2, name + " forward")
    for k in grads_ref:
        assert grads[k].dtype == torch.bfloat16
        _close(grads[k], grads_ref[k], 5e-2, "%s d%s" % (name, k))


@pytest.mark.parametrize("name", list(CASES))
def test_state_dict_loads_both_ways(name):
    gk, ref = _pair(name, torch.float32)
    assert list(gk.state_dict()) == list(ref.state_dict())
    for k, v in ref.state_dict().items():
        assert gk.state_dict()[k].shape == v.shape and gk.state_dict()[k].dtype == v.dtype
    back = copy.deepcopy(ref)
    with torch.no_grad():
        for p in gk.parameters():
            p.mul_(2)
    back.load_state_dict(gk.state_dict())     # strict: the same names and shapes
    for k, v in gk.state_dict().items():
        assert torch.equal(back.state_dict()[k], v)


def test_linear_cross_entropy_loss_gives_the_logits_without_a_target():
    gk, ref = _pair("LinearCrossEntropyLoss", torch.float32)
    h = _hidden(6, H)
    _close(gk(h), torch.nn.functional.linear(h, ref.weight), 1e-5, "logits")


def test_loss_modules_refuse_what_they_do_not_compute():
    with pytest.raises(ValueError, match="reduction='none'"):
        gradkern.nn.CrossEntropyLoss(reduction="none")
    with pytest.raises(ValueError, match="reduction='none'"):
        gradkern.nn.LinearCrossEntropyLoss(8, 4, reduction="none")
    with pytest.raises(ValueError, match="num_key_value_heads 3"):
        gradkern.nn.RoPEAttention(64, 4, num_key_value_heads=3)


def test_a_model_built_from_gradkern_nn_trains():
    """A small LLaMA-style block stack from gradkern.nn trains as the same
    stack of torch / Hugging Face-style modules with the same state_dict."""
    def block(nn_side):
        if nn_side:
            return torch.nn.ModuleDict(dict(norm=gradkern.nn.RMSNorm(H), attn=gradkern.nn.RoPEAttention(H, HEADS, 2),
                                            norm2=gradkern.nn.RMSNorm(H), mlp=gradkern.nn.SwiGLUMLP(H, I)))
        cfg = LlamaConfig(hidden_size=H, intermediate_size=I, num_attention_heads=HEADS, num_key_value_heads=2)
        return torch.nn.ModuleDict(dict(norm=LlamaRMSNorm(H), attn=LlamaAttention(cfg), norm2=LlamaRMSNorm(H),
                                        mlp=LlamaMLP(cfg)))

    def run(b, head, x, target):
        h = x + b["attn"](b["norm"](x))
        h = h + b["mlp"](b["norm2"](h))
        return head(h.reshape(-1, H), target)

    torch.manual_seed(0)
    ref_block, ref_head = block(False), LMHeadAndLoss(H, 37)
    gk_block, gk_head = block(True), gradkern.nn.LinearCrossEntropyLoss(H, 37)
    gk_block.load_state_dict(ref_block.state_dict())
    gk_head.load_state_dict(ref_head.state_dict())
    params = lambda b, h: list(b.parameters()) + list(h.parameters())  # noqa: E731
    opt_ref = torch.optim.AdamW(params(ref_block, ref_head), lr=1e-3)
    opt_gk = torch.optim.AdamW(params(gk_block, gk_head), lr=1e-3)
    for step in range(5):
        x, target = _hidden(2, 9, H) + step, _targets(18, 37)
        losses = []
        for b, h, opt in ((ref_block, ref_head, opt_ref), (gk_block, gk_head, opt_gk)):
            opt.zero_grad()
            loss = run(b, h, x, target)
            loss.backward()
            opt.step()
            losses.append(loss.detach())
        _close(losses[1], losses[0], 1e-5, "loss at step %d" % step)
