"""The Llama architecture by hand (chapter 9): causal attention, the configs of DeepSeek-Coder-1.3B and
of the tiny coder, and parameter counts (LoRA's too) from a config alone: no weights, no download.

DeepSeek-Coder, SmolLM2 and the tiny coder are all `LlamaForCausalLM`s; only these numbers differ.
"""

from __future__ import annotations

import math
from typing import Sequence

import torch

LORA_TARGETS = ("q_proj", "v_proj")  # the projections the course's LoRA adapts in every layer

# DeepSeek-Coder-1.3B-base's architecture as published by DeepSeek in the model's config.json on
# the Hugging Face hub (copied here so that counts need no download; not loaded from the hub).
DEEPSEEK_CODER_1_3B_ARCHITECTURE = dict(
    vocab_size=32256, hidden_size=2048, intermediate_size=5504, num_hidden_layers=24,
    num_attention_heads=16, num_key_value_heads=16, max_position_embeddings=16384,
    rms_norm_eps=1e-6, rope_theta=100000.0, rope_scaling={"type": "linear", "factor": 4.0},
    hidden_act="silu", tie_word_embeddings=False, bos_token_id=32013, eos_token_id=32014)

# The tiny coder's defaults: the same architecture, about 1/1300 of the parameters.
TINY_ARCHITECTURE = dict(vocab_size=1024, hidden_size=128, intermediate_size=352, num_hidden_layers=4,
                         num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=1024)


# -----------------------------------------------------------------------------
# attention, the one new idea of the transformer (what LlamaAttention computes per head)

def causal_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Scaled dot-product attention with a causal mask; q, k, v are [..., T, d].

    Each position t mixes the values of positions 0..t, weighted by how well its
    query matches their keys: softmax(q k^T / sqrt(d)) with the future masked out.
    Returns (output [..., T, d], weights [..., T, T]); every row of weights sums to 1.
    """
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    T = q.size(-2)
    future = torch.ones(T, T, dtype=torch.bool, device=q.device).triu(1)
    weights = scores.masked_fill(future, float("-inf")).softmax(dim=-1)
    return weights @ v, weights


# -----------------------------------------------------------------------------
# architectures and parameter counts (from a config alone: no weights needed)

def llama_config(**fields):
    """A transformers LlamaConfig (imported lazily: importing course_lib stays cheap)."""
    from transformers import LlamaConfig
    return LlamaConfig(**fields)


def deepseek_coder_1_3b_config():
    """DeepSeek-Coder-1.3B-base's LlamaConfig, built from the literal above (no download)."""
    return llama_config(**DEEPSEEK_CODER_1_3B_ARCHITECTURE)


def tiny_coder_config(**changes):
    """The tiny coder's LlamaConfig: TINY_ARCHITECTURE with changes; ids 0, 1, 2 are <pad>, <bos>, <eos>."""
    fields = {**TINY_ARCHITECTURE, **changes}
    return llama_config(**fields, tie_word_embeddings=False, pad_token_id=0, bos_token_id=1, eos_token_id=2)


def projection_shapes(config) -> dict[str, tuple[int, int]]:
    """(in_features, out_features) of each linear layer in one Llama decoder layer."""
    h, i = config.hidden_size, config.intermediate_size
    head_dim = getattr(config, "head_dim", None) or h // config.num_attention_heads
    q = config.num_attention_heads * head_dim
    kv = (config.num_key_value_heads or config.num_attention_heads) * head_dim
    return {"q_proj": (h, q), "k_proj": (h, kv), "v_proj": (h, kv), "o_proj": (q, h),
            "gate_proj": (h, i), "up_proj": (h, i), "down_proj": (i, h)}


def parameter_count(config) -> int:
    """Parameters of a LlamaForCausalLM with this config (no biases, as in Llama and DeepSeek-Coder)."""
    h, v = config.hidden_size, config.vocab_size
    per_layer = sum(a * b for a, b in projection_shapes(config).values()) + 2 * h  # + two RMSNorm gains
    head = 0 if config.tie_word_embeddings else v * h
    return v * h + config.num_hidden_layers * per_layer + h + head  # embeddings, layers, final norm, lm_head


def lora_parameter_count(config, rank: int, targets: Sequence[str] = LORA_TARGETS) -> int:
    """Trainable parameters of LoRA of this rank on the target projections of every layer.

    A d_in -> d_out layer W gets B (d_out x r) and A (r x d_in): r * (d_in + d_out) numbers,
    against d_in * d_out in W itself.
    """
    shapes = projection_shapes(config)
    unknown = [t for t in targets if t not in shapes]
    if unknown:
        raise ValueError(f"unknown LoRA targets {unknown}; a Llama layer has {list(shapes)}")
    return config.num_hidden_layers * sum(rank * (shapes[t][0] + shapes[t][1]) for t in targets)


def trainable_parameter_count(model) -> int:
    return sum(p.numel() for p in model.parameters() if p.requires_grad)
