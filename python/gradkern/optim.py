"""Optimizers and gradient clipping shaped like their torch twins, running
gradkern's gk_adamw_step, gk_sgd_step and gk_clip_grad_norm.

    opt = gradkern.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.1)
    loss.backward()
    gradkern.clip_grad_norm_(model.parameters(), 1.0)
    opt.step(); opt.zero_grad()

AdamW and SGD are torch.optim.Optimizer subclasses (param groups,
add_param_group, zero_grad, state_dict / load_state_dict). step() updates
all parameters of a group in one library call (one per distinct step count,
which is one call unless parameters joined at different times). State per
parameter: 'step' (a float tensor, as torch), 'exp_avg' and 'exp_avg_sq'
(AdamW) or 'momentum_buffer' (SGD) in float32 (float64 for float64
parameters), and 'master': float32 master weights for float16 and bfloat16
parameters, which are updated in f32 and rounded into the parameter.

The library writes the parameters (and clip_grad_norm_ the gradients) in
place behind autograd's back: their version counters do not move, so step
only once the graphs that saved the parameters have been backpropagated
(as any training loop does).
"""
import ctypes
import math

import torch

from . import _lib
from ._core import check, lib, to_gk_tensor

__all__ = ["AdamW", "SGD", "clip_grad_norm_"]

_HALF = (torch.float16, torch.bfloat16)


def _state_dtype(dtype):
    return torch.float64 if dtype == torch.float64 else torch.float32


def _array(tensors):
    """A gk_tensor[n] viewing the tensors (None entries stay zeroed: data NULL)."""
    arr = (_lib.gk_tensor * max(1, len(tensors)))()
    for i, t in enumerate(tensors):
        if t is not None:
            to_gk_tensor(t, arr[i])
    return arr


def _params_with_grads(group, name):
    out = []
    for p in group["params"]:
        if p.grad is None:
            continue
        if p.grad.is_sparse:
            raise RuntimeError("gradkern.optim.%s does not support sparse gradients" % name)
        if p.device.type != "cpu":
            raise RuntimeError("gradkern.optim.%s: parameters must be on the CPU, got %s" % (name, p.device))
        out.append(p)
    return out


class _GkOptimizer(torch.optim.Optimizer):
    """Common state handling: float32 state and masters survive
    load_state_dict (torch casts floating state to the parameter dtype)."""

    _F32_STATE = ("exp_avg", "exp_avg_sq", "momentum_buffer", "master")

    def _master(self, p, state):
        if p.dtype in _HALF and "master" not in state:
            state["master"] = p.detach().to(torch.float32, memory_format=torch.preserve_format).clone()
        return state.get("master")

    def load_state_dict(self, state_dict):
        super().load_state_dict(state_dict)
        saved = state_dict["state"]
        ids = [i for g in state_dict["param_groups"] for i in g["params"]]
        params = [p for g in self.param_groups for p in g["params"]]
        for i, p in zip(ids, params):
            for key in self._F32_STATE:
                v = saved.get(i, {}).get(key)
                if isinstance(v, torch.Tensor):
                    self.state[p][key] = v.detach().to(device=p.device, dtype=_state_dtype(p.dtype)).clone()


class AdamW(_GkOptimizer):
    """torch.optim.AdamW (amsgrad=False, maximize=False) over gradkern's
    gk_adamw_step: p *= 1 - lr wd; m = lerp(m, g, 1 - beta1);
    v = beta2 v + (1 - beta2) g^2; p -= lr / (1 - beta1^t) m / (sqrt(v) /
    sqrt(1 - beta2^t) + eps)."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2, amsgrad=False, *,
                 maximize=False, foreach=None, capturable=False):
        if not 0.0 <= lr:
            raise ValueError("Invalid learning rate: {}".format(lr))
        if not 0.0 <= eps:
            raise ValueError("Invalid epsilon value: {}".format(eps))
        if not 0.0 <= betas[0] < 1.0:
            raise ValueError("Invalid beta parameter at index 0: {}".format(betas[0]))
        if not 0.0 <= betas[1] < 1.0:
            raise ValueError("Invalid beta parameter at index 1: {}".format(betas[1]))
        if not 0.0 <= weight_decay:
            raise ValueError("Invalid weight_decay value: {}".format(weight_decay))
        if amsgrad or maximize or capturable:
            raise ValueError("gradkern.optim.AdamW: amsgrad, maximize and capturable are not supported")
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, amsgrad=False, maximize=False,
                        foreach=foreach, capturable=False)
        super().__init__(params, defaults)

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            cfg = _lib.gk_adamw_config()
            check(lib.gk_adamw_config_init(ctypes.byref(cfg)), "gk_adamw_config_init")
            cfg.lr, cfg.eps, cfg.weight_decay = float(group["lr"]), float(group["eps"]), float(group["weight_decay"])
            cfg.beta1, cfg.beta2 = float(group["betas"][0]), float(group["betas"][1])
            by_step = {}
            for p in _params_with_grads(group, "AdamW"):
                state = self.state[p]
                if len(state) == 0:
                    sd = _state_dtype(p.dtype)
                    state["step"] = torch.tensor(0.0)
                    state["exp_avg"] = torch.zeros_like(p, dtype=sd, memory_format=torch.preserve_format)
                    state["exp_avg_sq"] = torch.zeros_like(p, dtype=sd, memory_format=torch.preserve_format)
                self._master(p, state)
                state["step"] += 1
                by_step.setdefault(int(state["step"].item()), []).append(p)
            for step, ps in by_step.items():
                masters = [self.state[p].get("master") for p in ps]
                check(lib.gk_adamw_step(
                    ctypes.byref(cfg), len(ps), _array(ps), _array([p.grad for p in ps]),
                    _array([self.state[p]["exp_avg"] for p in ps]),
                    _array([self.state[p]["exp_avg_sq"] for p in ps]),
                    _array(masters) if any(m is not None for m in masters) else None, step), "gk_adamw_step")
        return loss


class SGD(_GkOptimizer):
    """torch.optim.SGD (maximize=False) over gradkern's gk_sgd_step: with
    weight decay, momentum, dampening and Nesterov momentum."""

    def __init__(self, params, lr=1e-3, momentum=0, dampening=0, weight_decay=0, nesterov=False, *,
                 maximize=False, foreach=None):
        if lr < 0.0:
            raise ValueError("Invalid learning rate: {}".format(lr))
        if momentum < 0.0:
            raise ValueError("Invalid momentum value: {}".format(momentum))
        if weight_decay < 0.0:
            raise ValueError("Invalid weight_decay value: {}".format(weight_decay))
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        if maximize:
            raise ValueError("gradkern.optim.SGD: maximize is not supported")
        defaults = dict(lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay,
                        nesterov=nesterov, maximize=False, foreach=foreach)
        super().__init__(params, defaults)

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            cfg = _lib.gk_sgd_config()
            check(lib.gk_sgd_config_init(ctypes.byref(cfg)), "gk_sgd_config_init")
            cfg.lr, cfg.momentum = float(group["lr"]), float(group["momentum"])
            cfg.dampening, cfg.weight_decay = float(group["dampening"]), float(group["weight_decay"])
            cfg.nesterov = int(bool(group["nesterov"]))
            momentum = cfg.momentum != 0
            # step 1 creates the momentum buffer (overwritten with the gradient), as torch
            by_first = {True: [], False: []}
            for p in _params_with_grads(group, "SGD"):
                state = self.state[p]
                self._master(p, state)
                first = momentum and state.get("momentum_buffer") is None
                if first:
                    state["momentum_buffer"] = torch.empty_like(p, dtype=_state_dtype(p.dtype),
                                                                memory_format=torch.preserve_format)
                by_first[first or not momentum].append(p)
            for first, ps in by_first.items():
                if not ps:
                    continue
                masters = [self.state[p].get("master") for p in ps]
                check(lib.gk_sgd_step(
                    ctypes.byref(cfg), len(ps), _array(ps), _array([p.grad for p in ps]),
                    _array([self.state[p]["momentum_buffer"] for p in ps]) if momentum else None,
                    _array(masters) if any(m is not None for m in masters) else None, 1 if first else 2),
                    "gk_sgd_step")
        return loss


def clip_grad_norm_(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False):
    """As torch.nn.utils.clip_grad_norm_ (norm_type 2 only): the L2 norm of
    all gradients together (squares summed in f64, in a fixed order) is
    returned as a tensor of the gradients' dtype; when max_norm / (norm +
    1e-6) < 1 every gradient is scaled by it in place.

    A non-finite norm (inf or NaN) raises gradkern.Error (a RuntimeError)
    with error_if_nonfinite=True; with False (torch 1.13's default) the norm
    is returned as torch does, but gradkern scales nothing then (torch would
    multiply the gradients by 0 or NaN)."""
    if isinstance(parameters, torch.Tensor):
        parameters = [parameters]
    grads = [p.grad for p in parameters if p.grad is not None]
    if float(norm_type) != 2.0:
        raise ValueError("gradkern.clip_grad_norm_: norm_type = %r; only the L2 norm (2) is supported"
                         % (norm_type,))
    if not grads:
        return torch.tensor(0.0)
    dtype = grads[0].dtype
    for g in grads[1:]:
        dtype = torch.promote_types(dtype, g.dtype)
    total = ctypes.c_double()
    status = lib.gk_clip_grad_norm(len(grads), _array(grads), float(max_norm), ctypes.byref(total))
    if status == _lib.ERR_NON_FINITE and not error_if_nonfinite:
        assert not math.isfinite(total.value)
    else:
        check(status, "gk_clip_grad_norm")
    return torch.tensor(total.value, dtype=dtype)

