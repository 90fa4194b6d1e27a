"""gradkern.nn: torch.nn modules for building new models, whose forward and
backward run gradkern.

Each has the parameters, names and state_dict() layout of its torch or
Hugging Face counterpart (the modules gradkern.patch recognises), so a
checkpoint loads into either, and runs the forward gradkern.patch installs
on that counterpart (gradkern.patch's functions: one copy of the code):

    Linear(in_features, out_features, bias=True)     torch.nn.Linear: weight (out, in), bias (out,)
    LayerNorm(normalized_shape, eps=1e-5, ...)       torch.nn.LayerNorm: weight, bias
    RMSNorm(hidden_size, eps=1e-6)                   LlamaRMSNorm: weight (hidden,), variance_epsilon
    SwiGLUMLP(hidden_size, intermediate_size)        LlamaMLP: gate_proj, up_proj, down_proj (no bias)
    RoPEAttention(hidden_size, num_heads,            LlamaAttention: q_proj, k_proj, v_proj, o_proj
                  num_key_value_heads=None,          (no bias), causal, rotate-half RoPE, grouped-query
                  rope_theta=10000.0)                attention when num_key_value_heads < num_heads
    MambaMixer(hidden_size, state_size=16,           Hugging Face's MambaMixer: in_proj, conv1d, x_proj,
               expand=2, conv_kernel=4, ...)         dt_proj, A_log, D, out_proj
    CrossEntropyLoss(ignore_index=-100,              torch.nn.CrossEntropyLoss (no class weights;
                     reduction='mean',               reduction 'mean' or 'sum'); its forward also
                     label_smoothing=0.0)            writes the gradient of the logits
    LinearCrossEntropyLoss(in_features,              an LM head (nn.Linear without bias: weight
                           num_classes, ...)         (classes, in)) fused with the loss: forward(hidden,
                                                     target) never stores the logits whole;
                                                     forward(hidden) gives the logits

Every submodule that is a linear layer is a gradkern.nn.Linear. The modules
take device= and dtype= as torch's do (CPU; float32, float64, float16,
bfloat16).
"""
import math

import torch

from . import functional as _F
from . import transformer as _T
from .patch import (
    cross_entropy_forward,
    loss_options,
    mamba_mixer_forward,
    rms_norm_forward,
    rope_attention_forward,
    swiglu_mlp_forward,
)

__all__ = ["Linear", "LayerNorm", "RMSNorm", "SwiGLUMLP", "RoPEAttention", "MambaMixer", "CrossEntropyLoss",
           "LinearCrossEntropyLoss"]


class Linear(torch.nn.Linear):
    """torch.nn.Linear: y = x weight^T + bias, by gradkern.linear."""

    def forward(self, x):
        return _T.linear(x, self.weight, self.bias)


class LayerNorm(torch.nn.LayerNorm):
    """torch.nn.LayerNorm, by gradkern.layer_norm."""

    def forward(self, x):
        return _F.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)


class RMSNorm(torch.nn.Module):
    """y = x / sqrt(mean(x^2) + eps) * weight over the last dim (LlamaRMSNorm)."""

    def __init__(self, hidden_size, eps=1e-6, device=None, dtype=None):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(hidden_size, device=device, dtype=dtype))
        self.variance_epsilon = eps

    def forward(self, hidden_states):
        return rms_norm_forward(self, hidden_states)


class SwiGLUMLP(torch.nn.Module):
    """down_proj(up_proj(x) * silu(gate_proj(x))) (LlamaMLP)."""

    def __init__(self, hidden_size, intermediate_size, bias=False, device=None, dtype=None):
        super().__init__()
        kw = dict(bias=bias, device=device, dtype=dtype)
        self.gate_proj = Linear(hidden_size, intermediate_size, **kw)
        self.up_proj = Linear(hidden_size, intermediate_size, **kw)
        self.down_proj = Linear(intermediate_size, hidden_size, **kw)
        self.act_fn = torch.nn.SiLU()   # no parameters: the layout of LlamaMLP, the op fused in forward

    def forward(self, x):
        return swiglu_mlp_forward(self, x)


class RoPEAttention(torch.nn.Module):
    """Causal self-attention on (B, T, hidden_size) with rotate-half RoPE on q
    and k (LlamaAttention without a mask or cache): num_heads query heads of
    head_dim = hidden_size / num_heads, num_key_value_heads key/value heads."""

    def __init__(self, hidden_size, num_heads, num_key_value_heads=None, rope_theta=10000.0, bias=False,
                 device=None, dtype=None):
        super().__init__()
        if hidden_size % num_heads:
            raise ValueError("gradkern.nn.RoPEAttention: hidden_size %d is not a multiple of num_heads %d"
                             % (hidden_size, num_heads))
        num_key_value_heads = num_heads if num_key_value_heads is None else num_key_value_heads
        if num_heads % num_key_value_heads:
            raise ValueError("gradkern.nn.RoPEAttention: num_heads %d is not a multiple of num_key_value_heads %d"
                             % (num_heads, num_key_value_heads))
        self.hidden_size, self.num_heads, self.num_key_value_heads = hidden_size, num_heads, num_key_value_heads
        self.head_dim = hidden_size // num_heads
        self.rope_theta = float(rope_theta)
        kw = dict(bias=bias, device=device, dtype=dtype)
        self.q_proj = Linear(hidden_size, num_heads * self.head_dim, **kw)
        self.k_proj = Linear(hidden_size, num_key_value_heads * self.head_dim, **kw)
        self.v_proj = Linear(hidden_size, num_key_value_heads * self.head_dim, **kw)
        self.o_proj = Linear(num_heads * self.head_dim, hidden_size, **kw)

    def forward(self, hidden_states):
        return rope_attention_forward(self, hidden_states)


class MambaMixer(torch.nn.Module):
    """Hugging Face's MambaMixer on (B, L, hidden_size), without a cache:
    in_proj -> (x, z); x -> causal depthwise conv1d -> SiLU -> x_proj ->
    (dt, B, C); delta = softplus(dt_proj(dt)); selective scan with
    A = -exp(A_log), D, gated by silu(z); out_proj. Initialised as Mamba
    is: A_log = log(1..state_size) per channel, D = 1, softplus(dt_proj.bias)
    log-uniform in [1e-3, 1e-1]."""

    def __init__(self, hidden_size, state_size=16, expand=2, conv_kernel=4, time_step_rank=None, use_bias=False,
                 use_conv_bias=True, device=None, dtype=None):
        super().__init__()
        inner = expand * hidden_size
        rank = math.ceil(hidden_size / 16) if time_step_rank is None else int(time_step_rank)
        self.hidden_size, self.ssm_state_size, self.conv_kernel_size = hidden_size, state_size, conv_kernel
        self.intermediate_size, self.time_step_rank = inner, rank
        kw = dict(device=device, dtype=dtype)
        self.conv1d = torch.nn.Conv1d(inner, inner, conv_kernel, groups=inner, padding=conv_kernel - 1,
                                      bias=use_conv_bias, **kw)
        self.act = torch.nn.SiLU()      # the layout of Hugging Face's mixer; SiLU runs inside the conv
        self.in_proj = Linear(hidden_size, 2 * inner, bias=use_bias, **kw)
        self.x_proj = Linear(inner, rank + 2 * state_size, bias=False, **kw)
        self.dt_proj = Linear(rank, inner, bias=True, **kw)
        A = torch.arange(1, state_size + 1, dtype=torch.float32, device=device).expand(inner, -1)
        self.A_log = torch.nn.Parameter(torch.log(A).to(dtype or torch.get_default_dtype()).contiguous())
        self.D = torch.nn.Parameter(torch.ones(inner, **kw))
        self.out_proj = Linear(inner, hidden_size, bias=use_bias, **kw)
        with torch.no_grad():
            dt = torch.exp(torch.rand(inner, device=device) * (math.log(0.1) - math.log(1e-3)) + math.log(1e-3))
            self.dt_proj.bias.copy_(dt + torch.log(-torch.expm1(-dt)))   # softplus^-1(dt)

    def forward(self, hidden_states):
        return mamba_mixer_forward(self, hidden_states)


def _check_loss_options(name, reduction):
    if reduction not in ("mean", "sum"):
        raise ValueError("gradkern.nn.%s: reduction=%r; supported: 'mean', 'sum'" % (name, reduction))


class CrossEntropyLoss(torch.nn.CrossEntropyLoss):
    """torch.nn.CrossEntropyLoss of (N, C) logits and (N,) class indices,
    without class weights, by gradkern.cross_entropy."""

    def __init__(self, ignore_index=-100, reduction="mean", label_smoothing=0.0):
        _check_loss_options("CrossEntropyLoss", reduction)
        super().__init__(ignore_index=ignore_index, reduction=reduction, label_smoothing=label_smoothing)

    def forward(self, input, target):
        return cross_entropy_forward(self, input, target)


class LinearCrossEntropyLoss(torch.nn.Module):
    """An LM head fused with the cross-entropy: weight (num_classes,
    in_features) as an nn.Linear without bias (lm_head.weight's layout).
    forward(hidden, target): the loss of hidden @ weight^T against target
    (hidden (..., in_features), target of hidden's leading shape), computed
    chunk by chunk so the logits are never stored whole; forward(hidden):
    the logits."""

    def __init__(self, in_features, num_classes, ignore_index=-100, reduction="mean", label_smoothing=0.0,
                 device=None, dtype=None):
        super().__init__()
        _check_loss_options("LinearCrossEntropyLoss", reduction)
        self.in_features, self.num_classes = in_features, num_classes
        self.ignore_index, self.reduction, self.label_smoothing = ignore_index, reduction, label_smoothing
        self.weight = torch.nn.Parameter(torch.empty(num_classes, in_features, device=device, dtype=dtype))
        torch.nn.init.kaiming_uniform_(self.weight, a=math.sqrt(5))   # nn.Linear's initialisation

    def forward(self, hidden, target=None):
        if target is None:
            return _T.linear(hidden, self.weight)
        return _T.linear_cross_entropy(hidden, self.weight, target, **loss_options(self))
