"""A small Mamba causal language model in plain PyTorch, its modules written
the way Hugging Face's transformers writes MambaForCausalLM (the same
module and parameter names and forward signatures; the mixer's forward is
that file's slow_forward, its plain-torch path: a depthwise nn.Conv1d with
padding k-1 cut to the sequence, then the selective scan step by step in
float32), without the transformers package. The model gradkern.patch is
tested on (test_patch.py) and benchmarked with (bench/vs_torch.py)."""
import math

import torch
from torch import nn

from hf_llama import LlamaRMSNorm


class MambaConfig:
    def __init__(self, vocab_size=256, hidden_size=64, state_size=16, num_hidden_layers=2, expand=2,
                 conv_kernel=4, time_step_rank=None, layer_norm_epsilon=1e-5, use_bias=False, use_conv_bias=True,
                 residual_in_fp32=True, tie_word_embeddings=True):
        self.vocab_size, self.hidden_size, self.state_size = vocab_size, hidden_size, state_size
        self.num_hidden_layers, self.expand, self.conv_kernel = num_hidden_layers, expand, conv_kernel
        self.intermediate_size = expand * hidden_size
        self.time_step_rank = math.ceil(hidden_size / 16) if time_step_rank is None else time_step_rank
        self.layer_norm_epsilon, self.use_bias, self.use_conv_bias = layer_norm_epsilon, use_bias, use_conv_bias
        self.residual_in_fp32, self.tie_word_embeddings = residual_in_fp32, tie_word_embeddings


class MambaMixer(nn.Module):
    """in_proj -> (x, gate); x -> causal depthwise conv -> SiLU -> x_proj ->
    (time_step, B, C); delta = softplus(dt_proj(time_step));
    h_t = exp(delta A) h_{t-1} + delta B_t x_t, y_t = C_t . h_t + D x_t;
    out_proj(y * silu(gate))."""

    def __init__(self, config, layer_idx):
        super().__init__()
        self.hidden_size = config.hidden_size
        self.ssm_state_size = config.state_size
        self.conv_kernel_size = config.conv_kernel
        self.intermediate_size = config.intermediate_size
        self.time_step_rank = int(config.time_step_rank)
        self.layer_idx = layer_idx
        self.use_conv_bias = config.use_conv_bias
        self.conv1d = nn.Conv1d(in_channels=self.intermediate_size, out_channels=self.intermediate_size,
                                bias=config.use_conv_bias, kernel_size=config.conv_kernel,
                                groups=self.intermediate_size, padding=config.conv_kernel - 1)
        self.activation = "silu"
        self.act = nn.SiLU()
        self.in_proj = nn.Linear(self.hidden_size, self.intermediate_size * 2, bias=config.use_bias)
        self.x_proj = nn.Linear(self.intermediate_size, self.time_step_rank + self.ssm_state_size * 2, bias=False)
        self.dt_proj = nn.Linear(self.time_step_rank, self.intermediate_size, bias=True)
        A = torch.arange(1, self.ssm_state_size + 1, dtype=torch.float32)[None, :]
        self.A_log = nn.Parameter(torch.log(A.expand(self.intermediate_size, -1).contiguous()))
        self.D = nn.Parameter(torch.ones(self.intermediate_size))
        self.out_proj = nn.Linear(self.intermediate_size, self.hidden_size, bias=config.use_bias)
        self.use_bias = config.use_bias
        # Mamba's time-step initialisation: softplus(dt_proj.bias) log-uniform in [1e-3, 1e-1]
        with torch.no_grad():
            dt = torch.exp(torch.rand(self.intermediate_size) * (math.log(0.1) - math.log(1e-3)) + math.log(1e-3))
            self.dt_proj.bias.copy_(dt + torch.log(-torch.expm1(-dt)))

    def slow_forward(self, input_states, cache_params=None, cache_position=None, attention_mask=None):
        batch_size, seq_len, _ = input_states.shape
        dtype = input_states.dtype
        projected_states = self.in_proj(input_states).transpose(1, 2)          # (B, 2 D_in, L)
        hidden_states, gate = projected_states.chunk(2, dim=1)
        if attention_mask is not None:
            hidden_states = hidden_states * attention_mask.unsqueeze(1)
        ssm_state = torch.zeros((batch_size, self.intermediate_size, self.ssm_state_size), dtype=dtype)
        hidden_states = self.act(self.conv1d(hidden_states)[..., :seq_len])    # (B, D_in, L)
        if attention_mask is not None:
            hidden_states = hidden_states * attention_mask.unsqueeze(1)
        ssm_parameters = self.x_proj(hidden_states.transpose(1, 2))
        time_step, B, C = torch.split(ssm_parameters, [self.time_step_rank, self.ssm_state_size, self.ssm_state_size],
                                      dim=-1)
        discrete_time_step = nn.functional.softplus(self.dt_proj(time_step)).transpose(1, 2)   # (B, D_in, L)
        A = -torch.exp(self.A_log.float())                                                      # (D_in, N)
        discrete_A = torch.exp(A[None, :, None, :] * discrete_time_step[:, :, :, None])        # (B, D_in, L, N)
        discrete_B = discrete_time_step[:, :, :, None] * B[:, None, :, :].float()
        deltaB_u = discrete_B * hidden_states[:, :, :, None].float()
        scan_outputs = []
        for i in range(seq_len):
            ssm_state = discrete_A[:, :, i, :] * ssm_state + deltaB_u[:, :, i, :]
            scan_output = torch.matmul(ssm_state.to(dtype), C[:, i, :].unsqueeze(-1))
            scan_outputs.append(scan_output[:, :, 0])
        scan_output = torch.stack(scan_outputs, dim=-1)                                         # (B, D_in, L)
        scan_output = scan_output + (hidden_states * self.D[None, :, None])
        scan_output = scan_output * self.act(gate)
        return self.out_proj(scan_output.transpose(1, 2))                                       # (B, L, H)

    def forward(self, hidden_states, cache_params=None, cache_position=None, attention_mask=None):
        return self.slow_forward(hidden_states, cache_params, cache_position, attention_mask)


class MambaRMSNorm(LlamaRMSNorm):
    """Hugging Face's Mamba norm: the same computation as LLaMA's, its own class name."""


class MambaBlock(nn.Module):
    def __init__(self, config, layer_idx):
        super().__init__()
        self.residual_in_fp32 = config.residual_in_fp32
        self.norm = MambaRMSNorm(config.hidden_size, eps=config.layer_norm_epsilon)
        self.mixer = MambaMixer(config, layer_idx=layer_idx)

    def forward(self, hidden_states, cache_params=None, cache_position=None, attention_mask=None):
        residual = hidden_states
        hidden_states = self.norm(hidden_states.to(dtype=self.norm.weight.dtype))
        if self.residual_in_fp32:
            residual = residual.to(torch.float32)
        hidden_states = self.mixer(hidden_states, cache_params=cache_params, cache_position=cache_position,
                                   attention_mask=attention_mask)
        return residual + hidden_states


class MambaModel(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.embeddings = nn.Embedding(config.vocab_size, config.hidden_size)
        nn.init.normal_(self.embeddings.weight, std=0.02)        # Hugging Face's initializer_range
        self.layers = nn.ModuleList([MambaBlock(config, layer_idx=i) for i in range(config.num_hidden_layers)])
        self.norm_f = MambaRMSNorm(config.hidden_size, eps=config.layer_norm_epsilon)

    def forward(self, input_ids, attention_mask=None):
        hidden_states = self.embeddings(input_ids)
        for layer in self.layers:
            hidden_states = layer(hidden_states, attention_mask=attention_mask)
        return self.norm_f(hidden_states)


class MambaForCausalLM(nn.Module):
    """forward(input_ids, labels) -> (loss, logits): labels are the inputs
    shifted by one inside, as Hugging Face does; lm_head's weight is the
    embeddings' (tied)."""

    def __init__(self, config):
        super().__init__()
        self.config = config
        self.backbone = MambaModel(config)
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=False)
        if config.tie_word_embeddings:
            self.lm_head.weight = self.backbone.embeddings.weight
        self.loss_fct = nn.CrossEntropyLoss()

    def forward(self, input_ids, labels=None):
        hidden_states = self.backbone(input_ids)
        logits = self.lm_head(hidden_states.to(self.lm_head.weight.dtype)).float()
        loss = None
        if labels is not None:
            shift_logits = logits[..., :-1, :].reshape(-1, self.config.vocab_size)
            loss = self.loss_fct(shift_logits, labels[..., 1:].reshape(-1))
        return loss, logits
