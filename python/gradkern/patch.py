"""gradkern.patch(model): run a PyTorch LLaMA-style model's RMSNorm, SwiGLU
MLP, attention (RoPE and causal attention), LM head and cross-entropy
through gradkern, in one call, in place.

    model = MyLlamaForCausalLM(config)
    gradkern.patch(model)            # {'rms_norm': 5, 'mlp': 2, 'attention': 2, 'cross_entropy': 1,
                                     #  'lm_head_loss': 1}

Modules are recognised by what they hold, as Hugging Face writes its LLaMA
modules, and only their `forward` is replaced (an instance attribute): the
parameters, buffers and state_dict() stay the model's own, so checkpoints
load into the patched and the unpatched model alike, and
gradkern.unpatch(model) gives back the original forwards.

- RMSNorm: a module whose class name ends in "RMSNorm", with a `weight` of
  one dim and `variance_epsilon` or `eps`: y = rms_norm(x) * weight.
- SwiGLU MLP: `gate_proj`, `up_proj`, `down_proj` (nn.Linear) and `act_fn`
  an nn.SiLU: down_proj(up_proj(x) * silu(gate_proj(x))), the product fused.
- Attention: `q_proj`, `k_proj`, `v_proj`, `o_proj`, `num_heads`,
  `head_dim` (and `num_key_value_heads` for grouped-query attention) and a
  RoPE theta in `rope_theta` or `rotary_emb.base`: rotate-half RoPE on q and
  k in their (B, T, H, Dh) layout, causal attention on (B, H, T, Dh) views
  (no copy), keeping only the row log-sum-exp for backward instead of the
  (T, T) probabilities. Called with anything but hidden states (an
  attention mask, position ids, a cache), the original forward runs.
- nn.CrossEntropyLoss without class weights: gradkern.cross_entropy, whose
  forward writes the gradient of the logits in the same pass.
- The LM head fused with the loss: a causal LM module holding `model` or
  `backbone` (the decoder, returning the hidden states or a tuple whose
  first item they are), `lm_head` (nn.Linear without bias) and a forward(input_ids,
  labels=None). Called with labels, the patched forward computes the loss
  of the shifted labels (the logits at t against labels at t+1, as Hugging
  Face shifts them) with gradkern.linear_cross_entropy, chunk by chunk, so
  the (tokens, vocabulary) logits are never stored whole, and returns a
  CausalLMOutput: .loss, and .logits None; it unpacks and indexes like the
  (loss, logits) tuple (loss, _ = model(ids, labels=ids) works as before).
  Called without labels it runs the original forward (which returns the
  logits). The loss options (ignore_index,
  reduction, label_smoothing) are the module's `loss_fct`'s if it has one
  (an nn.CrossEntropyLoss), else -100, 'mean', 0. The logits are computed
  in the hidden states' dtype.
- Mamba mixer: `in_proj`, `conv1d` (a depthwise nn.Conv1d, groups = channels,
  padding = kernel - 1), `x_proj`, `dt_proj` (with bias), `A_log`, `D`,
  `out_proj` and `act` an nn.SiLU, as Hugging Face's MambaMixer:
      x, z = in_proj(h) split in two (B, D, L) views, no copy
      x = causal_conv1d(x, conv1d.weight, conv1d.bias, 'silu')
      dt, B, C = x_proj(x) split; delta = dt_proj.weight dt (its bias is the
      scan's delta_bias, softplus inside the scan)
      y = selective_scan(x, delta, -exp(A_log), B, C, D, z, dt_proj.bias,
                         delta_softplus=True)
      out_proj(y)
  Called with a cache or an attention mask, the original forward runs.

The model's dtype and shapes are whatever its tensors are (float32, float64,
float16, bfloat16; CPU).
"""

import collections
import functools
import inspect

import torch

from . import functional as _F
from . import mamba as _M
from . import transformer as _T

__all__ = ["patch", "unpatch", "CausalLMOutput"]


# ---------------------------------------------------------------- the forwards
# Each takes the module whose parameters it uses, as Hugging Face names them;
# gradkern.patch installs them on a model's modules and gradkern.nn's
# modules are built on them.

def rms_norm_forward(module, hidden_states):
    """rms_norm(x) * module.weight, eps from `variance_epsilon` or `eps`."""
    w = module.weight
    eps = float(getattr(module, "variance_epsilon", getattr(module, "eps", 1e-6)))
    return _F.rms_norm(hidden_states, w.shape, w, eps)


def swiglu_mlp_forward(module, x):
    """down_proj(up_proj(x) * silu(gate_proj(x))), the product fused."""
    return module.down_proj(_F.swiglu(module.up_proj(x), gate=module.gate_proj(x)))


def rope_attention_forward(module, hidden_states):
    """Causal self-attention of (B, T, hidden) with rotate-half RoPE on q and
    k: num_heads, head_dim, num_key_value_heads (grouped-query attention),
    the theta in rope_theta or rotary_emb.base."""
    H, Dh = int(module.num_heads), int(module.head_dim)
    Hkv = int(getattr(module, "num_key_value_heads", H))
    theta = float(getattr(module, "rope_theta", None) or module.rotary_emb.base)
    B, T = hidden_states.shape[0], hidden_states.shape[1]
    q = _T.rope(module.q_proj(hidden_states).view(B, T, H, Dh), theta)
    k = _T.rope(module.k_proj(hidden_states).view(B, T, Hkv, Dh), theta)
    v = module.v_proj(hidden_states).view(B, T, Hkv, Dh)
    o = _T.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True)
    return module.o_proj(o.transpose(1, 2).reshape(B, T, H * Dh))


def mamba_mixer_forward(module, hidden_states):
    """Hugging Face's MambaMixer on (B, L, hidden), without a cache."""
    rank = module.dt_proj.in_features
    d_state = module.A_log.shape[1]
    x, z = module.in_proj(hidden_states).transpose(1, 2).chunk(2, dim=1)       # (B, D, L) each
    conv = module.conv1d
    x = _M.causal_conv1d(x, conv.weight.squeeze(1), conv.bias, activation="silu")
    dt, B, C = torch.split(module.x_proj(x.transpose(1, 2)), [rank, d_state, d_state], dim=-1)
    delta = torch.nn.functional.linear(dt, module.dt_proj.weight).transpose(1, 2)  # (B, D, L)
    A = -torch.exp(module.A_log.float())
    y = _M.selective_scan(x, delta, A, B.transpose(1, 2), C.transpose(1, 2), module.D.float(), z=z,
                          delta_bias=module.dt_proj.bias.float(), delta_softplus=True)
    return module.out_proj(y.transpose(1, 2))


def loss_options(loss_fct):
    """ignore_index, reduction and label_smoothing of an nn.CrossEntropyLoss
    (or of anything holding them), else -100, 'mean', 0."""
    return dict(ignore_index=int(getattr(loss_fct, "ignore_index", -100)),
                reduction=getattr(loss_fct, "reduction", "mean"),
                label_smoothing=float(getattr(loss_fct, "label_smoothing", 0.0)))


def cross_entropy_forward(module, input, target):
    """gradkern.cross_entropy with the module's loss options."""
    return _T.cross_entropy(input, target, **loss_options(module))


def shifted_lm_loss(hidden, weight, labels, loss_fct=None):
    """The loss of the logits hidden @ weight^T at t against labels at t+1,
    as Hugging Face shifts them, with gradkern.linear_cross_entropy: the
    (tokens, vocabulary) logits are never stored whole."""
    return _T.linear_cross_entropy(hidden[..., :-1, :], weight, labels[..., 1:], **loss_options(loss_fct))


CausalLMOutput = collections.namedtuple("CausalLMOutput", ["loss", "logits"])
CausalLMOutput.__doc__ = """What a causal LM patched with the fused LM head returns when given labels:
.loss, and .logits None (they were never stored whole); it unpacks and
indexes like the (loss, logits) tuple of the unpatched model."""


# ---------------------------------------------------------------- patching

def _unless_extra_arguments(fast, module, original):
    """forward(hidden_states) by `fast`; with anything more (an attention
    mask, position ids, a cache) the original forward runs."""
    def forward(hidden_states, *args, **kwargs):
        if args or any(v is not None for v in kwargs.values()):
            return original(hidden_states, *args, **kwargs)
        return fast(module, hidden_states)
    return forward


def _lm_head_loss_forward(module, original):
    def forward(input_ids, labels=None, **kwargs):
        if labels is None:
            return original(input_ids, labels=labels, **kwargs)
        decoder = module.model if isinstance(getattr(module, "model", None), torch.nn.Module) else module.backbone
        out = decoder(input_ids, **kwargs)
        hidden = out if isinstance(out, torch.Tensor) else out[0]
        return CausalLMOutput(shifted_lm_loss(hidden, module.lm_head.weight, labels, getattr(module, "loss_fct", None)),
                              None)
    return forward


def _is_causal_lm(m):
    head = getattr(m, "lm_head", None)
    decoder = getattr(m, "model", None)
    if not isinstance(decoder, torch.nn.Module):
        decoder = getattr(m, "backbone", None)
    if not (isinstance(head, torch.nn.Linear) and head.bias is None and isinstance(decoder, torch.nn.Module)):
        return False
    loss_fct = getattr(m, "loss_fct", None)
    if loss_fct is not None and not _is_cross_entropy(loss_fct):
        return False
    try:
        return "labels" in inspect.signature(m.forward).parameters
    except (TypeError, ValueError):
        return False


def _is_mamba_mixer(m):
    names = ("in_proj", "x_proj", "dt_proj", "out_proj")
    if not all(isinstance(getattr(m, n, None), torch.nn.Linear) for n in names):
        return False
    conv, A_log, D = getattr(m, "conv1d", None), getattr(m, "A_log", None), getattr(m, "D", None)
    if not (isinstance(conv, torch.nn.Conv1d) and isinstance(A_log, torch.Tensor) and isinstance(D, torch.Tensor)):
        return False
    channels, width = conv.out_channels, conv.kernel_size[0]
    return (conv.in_channels == channels and conv.groups == channels and conv.padding == (width - 1,)
            and conv.stride == (1,) and conv.dilation == (1,) and A_log.dim() == 2 and A_log.shape[0] == channels
            and m.dt_proj.bias is not None and isinstance(getattr(m, "act", None), torch.nn.SiLU)
            and m.in_proj.out_features == 2 * channels)


def _is_rms_norm(m):
    w = getattr(m, "weight", None)
    return (type(m).__name__.endswith("RMSNorm") and isinstance(w, torch.Tensor) and w.dim() == 1
            and (hasattr(m, "variance_epsilon") or hasattr(m, "eps")))


def _is_swiglu_mlp(m):
    return (all(isinstance(getattr(m, n, None), torch.nn.Linear) for n in ("gate_proj", "up_proj", "down_proj"))
            and isinstance(getattr(m, "act_fn", None), torch.nn.SiLU))


def _is_attention(m):
    if not all(isinstance(getattr(m, n, None), torch.nn.Linear) for n in ("q_proj", "k_proj", "v_proj", "o_proj")):
        return False
    if not (hasattr(m, "num_heads") and hasattr(m, "head_dim")):
        return False
    rotary = getattr(m, "rotary_emb", None)
    return getattr(m, "rope_theta", None) is not None or getattr(rotary, "base", None) is not None


def _is_cross_entropy(m):
    return (isinstance(m, torch.nn.CrossEntropyLoss) and m.weight is None and m.reduction in ("mean", "sum"))


def patch(model, *, rms_norm=True, mlp=True, attention=True, cross_entropy=True, lm_head_loss=True,
          mamba_mixer=True):
    """Replace the forward of every recognised module of `model` (itself
    included) with gradkern's; returns how many of each kind were patched
    (a dict). Patching twice changes nothing more. lm_head_loss=False keeps
    the LM head and the loss apart (the logits are then returned and stored)."""
    counts = {"rms_norm": 0, "mlp": 0, "attention": 0, "cross_entropy": 0, "lm_head_loss": 0, "mamba_mixer": 0}
    for m in model.modules():
        if "forward" in vars(m):                      # patched already (or a custom forward)
            continue
        if lm_head_loss and _is_causal_lm(m):
            kind, fwd = "lm_head_loss", _lm_head_loss_forward(m, m.forward)
        elif mamba_mixer and _is_mamba_mixer(m):
            kind, fwd = "mamba_mixer", _unless_extra_arguments(mamba_mixer_forward, m, m.forward)
        elif rms_norm and _is_rms_norm(m):
            kind, fwd = "rms_norm", functools.partial(rms_norm_forward, m)
        elif mlp and _is_swiglu_mlp(m):
            kind, fwd = "mlp", functools.partial(swiglu_mlp_forward, m)
        elif attention and _is_attention(m):
            kind, fwd = "attention", _unless_extra_arguments(rope_attention_forward, m, m.forward)
        elif cross_entropy and _is_cross_entropy(m):
            kind, fwd = "cross_entropy", functools.partial(cross_entropy_forward, m)
        else:
            continue
        m.forward = fwd
        m._gradkern_patched = kind
        counts[kind] += 1
    return counts


def unpatch(model):
    """Give back the original forwards of the modules patch() replaced."""
    for m in model.modules():
        if getattr(m, "_gradkern_patched", None):
            del m.forward
            del m._gradkern_patched
    return model
