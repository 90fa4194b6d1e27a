// Hugging Face checkpoints of Mamba (MambaForCausalLM) and LLaMA
// (LlamaForCausalLM) language models: a directory with config.json and
// model.safetensors (or shards listed by model.safetensors.index.json), read
// into a gradkern model and written back (as one model.safetensors).
//
// config.json fields read (others are ignored): architectures (must list
// MambaForCausalLM or LlamaForCausalLM) or model_type "mamba"/"llama";
// vocab_size, hidden_size, num_hidden_layers; hidden_act (must be silu);
// tie_word_embeddings (Hugging Face's default is true for Mamba, false for
// LLaMA; false gives the model its own head weight, lm_head). Mamba:
// state_size, expand, conv_kernel, time_step_rank, intermediate_size (must
// be expand x hidden_size), layer_norm_epsilon, use_bias (must be false),
// use_conv_bias (must be true). LLaMA: num_attention_heads,
// num_key_value_heads (default: the heads), intermediate_size, rms_norm_eps,
// rope_theta (default 10000), head_dim (if given, hidden_size / heads),
// rope_scaling (must be null), attention_bias and mlp_bias (must be false).
// A field out of range or asking for what gradkern does not implement is
// refused, naming it.
//
// Tensors (F32, F16 or BF16; converted to f32). Mamba, with L the layer, E =
// expand x hidden_size, R the time step rank, N the state size, W the conv
// kernel:
//   backbone.embeddings.weight (V, D)    -> embedding   (also read: backbone.embedding.weight)
//   backbone.norm_f.weight (D)           -> norm_f
//   backbone.layers.L.norm.weight (D)    -> layers.L.norm
//   ...mixer.in_proj.weight (2E, D)       -> in_proj
//   ...mixer.conv1d.weight (E, 1, W)      -> conv_w (E, W)
//   ...mixer.conv1d.bias (E)              -> conv_b
//   ...mixer.x_proj.weight (R + 2N, E)    -> x_proj
//   ...mixer.dt_proj.weight (E, R)        -> dt_proj
//   ...mixer.dt_proj.bias (E)             -> dt_bias
//   ...mixer.A_log (E, N), mixer.D (E)    -> A_log, D
//   ...mixer.out_proj.weight (D, E)       -> out_proj
// LLaMA, with H heads, G key/value heads, Dh = D / H, F the MLP size:
//   model.embed_tokens.weight (V, D)     -> embedding
//   model.norm.weight (D)                -> norm_f
//   model.layers.L.input_layernorm.weight          -> layers.L.attn_norm
//   ...self_attn.q_proj (H Dh, D), k_proj (G Dh, D), v_proj (G Dh, D)
//                                        -> wqkv, their rows stacked in that order
//   ...self_attn.o_proj.weight (D, H Dh) -> wo
//   ...post_attention_layernorm.weight   -> mlp_norm
//   ...mlp.up_proj (F, D), mlp.gate_proj (F, D)    -> w_up_gate, up rows first
//   ...mlp.down_proj.weight (D, F)       -> w_down
// (RoPE is rotate-half in both.) lm_head.weight (V, D): with
// tie_word_embeddings false, it is the head (lm_head) and must be there;
// with true, it may be there and must equal the embedding. A missing tensor, a wrong shape or dtype, or a tensor
// gradkern does not know is an error naming it.
//
// Sharded checkpoints: without model.safetensors, model.safetensors.index.json
// maps each tensor name to its shard file in the directory ({"weight_map":
// {"name": "model-00001-of-00002.safetensors", ...}}; other keys ignored).
// Each shard is read once; a shard file that is missing or not a plain name
// in the directory, a tensor listed twice or listed for a shard that does not
// hold it, and a shard's tensor the map does not list for that shard are
// errors naming the file and tensor.
#ifndef GK_NN_HF_H
#define GK_NN_HF_H

#include "model.h"
#include "safetensors.h"

// Read the model directory `dir` into *m (initialised here; gk_model_free it).
// *dtype (may be NULL): the dtype of its tensors.
gk_status gk_hf_load(const char *dir, gk_model *m, gk_st_dtype *dtype);
// Write m (LLaMA, or Mamba with selection) to the directory `dir` (which
// must exist) as config.json and model.safetensors, tensors in `dtype` (F32,
// F16 or BF16), each file written atomically.
gk_status gk_hf_save(const char *dir, const gk_model *m, gk_st_dtype dtype);

#endif
