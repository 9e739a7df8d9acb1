"""A fast sampler for Llama-family models, on a CPU or a GPU: the rollout engine of chapters 10-11.

Reinforcement learning on a language model is mostly generation, and Hugging Face's `generate`
is general, not fast: every decode step grows the key-value cache by concatenation, copies the
shared keys of grouped-query attention once per head, and keeps computing rows that already ended.
This engine runs the same Llama forward pass (`LlamaForCausalLM`: SmolLM2, DeepSeek-Coder, the tiny
coder) with

    a snapshot       the policy's weights read once per call, a LoRA adapter's B A added in, the
                     query/key/value and gate/up projections fused into one matrix each
    a static cache   keys and values written in place into buffers sized for the whole answer
    grouped queries  a query head attends to its key head's cache directly, without copies
    leaving rows     rows that ended (<eos>, a stop sequence) leave the batch, so every decode step
                     computes tokens someone reads
    bfloat16         optional (engine "fast-bf16"): bfloat16 weights and matmul inputs, for processors
                     with AVX512-BF16; its distribution differs from the learner's a little more, which
                     the RL core measures and corrects (`rl.sampler_correction`)
    int8 weights     measured, not used (`Snapshot(model, "int8")`): fbgemm's dynamically quantised
                     matmuls quantise each activation matrix with one scale, and SmolLM2's activations
                     have outliers, so its next-token distribution moves far from the learner's
                     (benchmarks/generation_throughput.py records the KL)

It samples only: the learner still scores the sampled ids with the torch model itself
(`course_lib.lm.lm_policy.LMActor`), so gradients and the old policy's log-probabilities never
come from here; the two agree to float32 rounding (tests/test_decode.py bounds the KL between
them on the same prefixes). `evaluation.generate(engine="fast")` is the way in.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import torch
import torch.nn.functional as F

ENGINES = ("hf", "fast", "fast-bf16")  # fast-bf16: the fast engine with bfloat16 weights
PRECISIONS = ("float32", "bfloat16", "int8")


# -----------------------------------------------------------------------------
# the weights, read once per call

def _effective_weight(module) -> torch.Tensor:
    """A Linear's weight as the policy uses it now: base + the active LoRA adapters' scaled B A (peft)."""
    base = getattr(module, "base_layer", None)
    if base is None:
        return module.weight.detach()
    weight = base.weight.detach()
    if getattr(module, "merged", False) or getattr(module, "disable_adapters", False):
        return weight
    for name in module.active_adapters:
        if name in module.lora_A:
            weight = weight + module.get_delta_weight(name).detach()
    return weight


def _llama_parts(model):
    """(embed, layers, final norm, lm_head, rotary, config) of a LlamaForCausalLM, bare or wrapped by peft."""
    inner = model.get_base_model() if hasattr(model, "get_base_model") else model  # peft: the model inside
    body = getattr(inner, "model", None)
    if not hasattr(inner, "lm_head") or not hasattr(body, "layers") or not hasattr(body, "rotary_emb"):
        raise TypeError(f"the fast engine runs Llama-family models (LlamaForCausalLM); got {type(inner).__name__}: "
                        "use engine='hf'")
    return body.embed_tokens, body.layers, body.norm, inner.lm_head, body.rotary_emb, inner.config


class _Linear:
    """y = x W^T in the snapshot's precision: a float32 matmul; bfloat16 weights and inputs (about twice the
    float32 rate on processors with AVX512-BF16, far slower without it); or fbgemm's int8 matmul with the
    activations quantised on the fly (measured, not offered: see the module's docstring)."""

    def __init__(self, weight: torch.Tensor, precision: str):
        self.precision = precision
        if precision == "int8":
            scale = weight.abs().amax(dim=1).clamp(min=1e-8) / 127.0
            qweight = torch.quantize_per_channel(weight.float().contiguous(), scale.double(),
                                                 torch.zeros_like(scale, dtype=torch.long), 0, torch.qint8)
            self.packed = torch.ops.quantized.linear_prepack(qweight, None)
        elif precision == "bfloat16":
            self.weight = weight.to(torch.bfloat16).contiguous()
        else:
            self.weight_t = weight.float().t().contiguous()  # [in, out]: x @ W^T as one plain matmul

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        if self.precision == "int8":
            return torch.ops.quantized.linear_dynamic(x, self.packed, True)
        if self.precision == "bfloat16":
            return F.linear(x.to(torch.bfloat16), self.weight).float()
        return x @ self.weight_t


@dataclass
class _Layer:
    input_norm: torch.Tensor
    qkv: _Linear
    o: _Linear
    post_norm: torch.Tensor
    gate_up: _Linear
    down: _Linear


class Snapshot:
    """The policy's weights as the engine uses them: fused, detached from autograd, in `precision`
    (PRECISIONS: float32, bfloat16, or int8, which no engine uses)."""

    def __init__(self, model, precision: str = "float32"):
        if precision not in PRECISIONS:
            raise ValueError(f"unknown precision {precision!r}; choose one of {PRECISIONS}")
        embed, layers, norm, lm_head, rotary, config = _llama_parts(model)
        self.config, self.rotary, self.precision = config, rotary, precision
        self.device = embed.weight.device  # the engine runs where the policy is (a CPU or a GPU)
        self.n_heads = config.num_attention_heads
        self.n_kv = getattr(config, "num_key_value_heads", None) or self.n_heads
        self.head_dim = getattr(config, "head_dim", None) or config.hidden_size // self.n_heads
        self.eps = config.rms_norm_eps
        self.embed = embed.weight.detach().float()
        self.norm = norm.weight.detach().float()
        self.lm_head = _Linear(_effective_weight(lm_head), precision)
        self.layers = []
        for layer in layers:
            a, m = layer.self_attn, layer.mlp
            for part, bias in (("q_proj", a.q_proj), ("k_proj", a.k_proj), ("v_proj", a.v_proj), ("o_proj", a.o_proj)):
                if getattr(getattr(bias, "base_layer", bias), "bias", None) is not None:
                    raise TypeError(f"the fast engine expects Llama projections without bias ({part} has one): "
                                    "use engine='hf'")
            qkv = torch.cat([_effective_weight(a.q_proj), _effective_weight(a.k_proj), _effective_weight(a.v_proj)])
            gate_up = torch.cat([_effective_weight(m.gate_proj), _effective_weight(m.up_proj)])
            self.layers.append(_Layer(layer.input_layernorm.weight.detach().float(), _Linear(qkv, precision),
                                      _Linear(_effective_weight(a.o_proj), precision),
                                      layer.post_attention_layernorm.weight.detach().float(),
                                      _Linear(gate_up, precision), _Linear(_effective_weight(m.down_proj), precision)))

    def rms_norm(self, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        return weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps))


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    return x * cos + rotated * sin


# -----------------------------------------------------------------------------
# the forward pass: a prompt (prefill), then one token per row per step (decode)

class _Batch:
    """The rows being written: their static key-value cache, their lengths, where each row's text starts."""

    def __init__(self, snap: Snapshot, input_ids: torch.Tensor, attention_mask: torch.Tensor, max_new_tokens: int):
        B, P = input_ids.shape
        self.snap, self.width, device = snap, P, snap.device
        self.k = [torch.zeros(B, snap.n_kv, P + max_new_tokens, snap.head_dim, device=device) for _ in snap.layers]
        self.v = [torch.zeros_like(k) for k in self.k]
        self.valid = torch.zeros(B, P + max_new_tokens, dtype=torch.bool, device=device)  # cache slots a row may attend to
        self.valid[:, :P] = attention_mask.bool()
        self.position = attention_mask.sum(1) - 1  # each row's last real position (left padding excluded)
        self.length = 0  # cache slots written so far, the same for every row

    def keep(self, rows: torch.Tensor) -> None:
        """Only these rows go on: the others' cache is dropped (one copy, so every later step is smaller)."""
        self.k = [k[rows] for k in self.k]
        self.v = [v[rows] for v in self.v]
        self.valid, self.position = self.valid[rows], self.position[rows]

    def _attention(self, i: int, q, k, v, start: int, mask) -> torch.Tensor:
        s = self.snap
        B, T = q.shape[0], q.shape[2]
        self.k[i][:, :, start:start + T] = k
        self.v[i][:, :, start:start + T] = v
        keys = self.k[i][:, :, :start + T]
        values = self.v[i][:, :, :start + T]
        group = s.n_heads // s.n_kv
        # [B, H, T, d] -> [B, KV, group * T, d]: each key head answers its group's queries, no copy of the keys
        q = q.reshape(B, s.n_kv, group * T, s.head_dim)
        out = F.scaled_dot_product_attention(q, keys, values, attn_mask=mask)
        return out.reshape(B, s.n_heads, T, s.head_dim)

    def forward(self, ids: torch.Tensor, positions: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Logits of the last position of each row, after writing these T tokens' keys and values at self.length."""
        s = self.snap
        B, T = ids.shape
        start = self.length
        x = s.embed[ids]
        cos, sin = s.rotary(x, positions)
        cos, sin = cos.float().unsqueeze(1), sin.float().unsqueeze(1)
        H, KV, d = s.n_heads, s.n_kv, s.head_dim
        for i, layer in enumerate(s.layers):
            h = s.rms_norm(x, layer.input_norm)
            qkv = layer.qkv(h)
            q = qkv[..., :H * d].view(B, T, H, d).transpose(1, 2)
            k = qkv[..., H * d:(H + KV) * d].view(B, T, KV, d).transpose(1, 2)
            v = qkv[..., (H + KV) * d:].view(B, T, KV, d).transpose(1, 2)
            q, k = _rotate(q, cos, sin), _rotate(k, cos, sin)
            attn = self._attention(i, q, k, v, start, mask)
            x = x + layer.o(attn.transpose(1, 2).reshape(B, T, H * d))
            h = s.rms_norm(x, layer.post_norm)
            gate, up = layer.gate_up(h).chunk(2, dim=-1)
            x = x + layer.down(F.silu(gate) * up)
        self.length = start + T
        return s.lm_head(s.rms_norm(x[:, -1], s.norm))

    def prefill(self, input_ids: torch.Tensor) -> torch.Tensor:
        B, P = input_ids.shape
        group = self.snap.n_heads // self.snap.n_kv
        positions = (self.valid[:, :P].long().cumsum(-1) - 1).clamp(min=0)
        causal = torch.ones(P, P, dtype=torch.bool, device=self.snap.device).tril()
        mask = causal[None] & self.valid[:, None, :P]            # [B, P, P]: earlier real tokens only
        mask = mask | torch.eye(P, dtype=torch.bool, device=self.snap.device)[None]  # a padding row sees itself (no NaN)
        mask = mask[:, None].repeat(1, 1, group, 1)               # [B, 1, group * P, P]: queries grouped by key head
        return self.forward(input_ids, positions, mask)

    def decode(self, tokens: torch.Tensor) -> torch.Tensor:
        self.valid[:, self.length] = True
        self.position = self.position + 1
        mask = self.valid[:, None, None, :self.length + 1]       # [B, 1, 1, S]: every real slot so far
        return self.forward(tokens[:, None], self.position[:, None], mask)


# -----------------------------------------------------------------------------
# sampling

@dataclass(frozen=True)
class Written:
    """One row's answer: the ids written (<eos> included when it ended the row) and how it ended."""
    ids: tuple
    finish: str                       # "eos", "stop" or "length"
    logprobs: tuple = ()              # the sampler's log-probabilities of the ids (at the temperature)


def left_padded(rows: Sequence[Sequence[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(input_ids, attention_mask) of rows of ids, left-padded to the longest: every row's next token
    then sits at the same position, as batched generation needs."""
    width = max(len(r) for r in rows)
    input_ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    attention_mask = torch.zeros((len(rows), width), dtype=torch.long)
    for r, ids in enumerate(rows):
        input_ids[r, width - len(ids):] = torch.tensor(ids, dtype=torch.long)
        attention_mask[r, width - len(ids):] = 1
    return input_ids, attention_mask


@torch.no_grad()
def sample(model, rows: Sequence[Sequence[int]], *, temperature: float, max_new_tokens: int, eos_id: int,
           decode=None, stop_sequences: Sequence[str] = (), generator: torch.Generator | None = None,
           precision: str = "float32", snapshot: Snapshot | None = None) -> list[Written]:
    """Write up to max_new_tokens ids after each row of prompt ids, all rows in one batch.

    temperature 0 is greedy; otherwise every token is drawn from softmax(logits / temperature)
    (no top-k, no top-p) with `generator`. A row ends at eos_id, or once decode(its ids) holds a
    stop sequence, or at the limit; a row that ended leaves the batch at the next compaction
    (when a quarter of the batch has ended), so the work shrinks with the rows still writing.
    """
    snap = snapshot or Snapshot(model, precision)
    B, device = len(rows), snap.device
    unique = list(dict.fromkeys(tuple(r) for r in rows))  # a prompt sampled n times is read once
    input_ids, attention_mask = (t.to(device) for t in left_padded(unique, pad_id=0))  # padding is masked: any id
    batch = _Batch(snap, input_ids, attention_mask, max_new_tokens)
    logits = batch.prefill(input_ids)
    where = {r: i for i, r in enumerate(unique)}
    copies = torch.tensor([where[tuple(r)] for r in rows], device=device) if len(unique) < B else None
    if copies is not None:  # each row starts from its prompt's cache
        batch.keep(copies)
        logits = logits[copies]
    written: list[list[int]] = [[] for _ in range(B)]
    logps: list[list[float]] = [[] for _ in range(B)]
    finish = ["length"] * B
    active = list(range(B))  # which original row each batch row is
    running = [True] * B  # rows of the batch still writing
    for step in range(max_new_tokens):
        logits = logits.float()
        if temperature > 0:
            logp = torch.log_softmax(logits / temperature, dim=-1)
            tokens = torch.multinomial(logp.exp(), 1, generator=generator).squeeze(1)
        else:
            logp = torch.log_softmax(logits, dim=-1)
            tokens = logits.argmax(-1)
        chosen = logp.gather(1, tokens[:, None]).squeeze(1)
        token_list, chosen_list = tokens.tolist(), chosen.tolist()  # one copy to the host per step, not one per row
        for b in (b for b in range(len(running)) if running[b]):
            r, t = active[b], token_list[b]
            written[r].append(t)
            logps[r].append(chosen_list[b])
            if t == eos_id:
                finish[r], running[b] = "eos", False
            elif stop_sequences and decode is not None and any(s in decode(written[r]) for s in stop_sequences):
                finish[r], running[b] = "stop", False
        if not any(running) or step == max_new_tokens - 1:
            break
        if running.count(False) * 4 >= len(running):  # a quarter has ended: drop them from the batch
            kept = [b for b in range(len(running)) if running[b]]
            keep = torch.tensor(kept, device=device)
            batch.keep(keep)
            active, tokens, running = [active[b] for b in kept], tokens[keep], [True] * len(kept)
        logits = batch.decode(tokens)
    return [Written(tuple(w), f, tuple(lp)) for w, f, lp in zip(written, finish, logps)]


def is_llama(model) -> bool:
    """Whether the fast engine can run this model (a LlamaForCausalLM, bare or under peft)."""
    try:
        _llama_parts(model)
    except (TypeError, AttributeError):
        return False
    return True


@torch.no_grad()
def forced_logits(snapshot: Snapshot, prompt: Sequence[int], ids: Sequence[int]) -> torch.Tensor:
    """The engine's logits before each of `ids` after `prompt`, fed one token at a time as when sampling:
    [len(ids), vocab]. What the sampler's distribution was at every prefix, to compare with the learner's."""
    prompt_ids = torch.tensor([list(prompt)], dtype=torch.long, device=snapshot.device)
    batch = _Batch(snapshot, prompt_ids, torch.ones_like(prompt_ids), len(ids))
    rows = [batch.prefill(prompt_ids)]
    for t in list(ids)[:-1]:
        rows.append(batch.decode(torch.tensor([t], device=snapshot.device)))
    return torch.cat(rows).float()


@torch.no_grad()
def kl_to_learner(snapshot: Snapshot, model, prompt: Sequence[int], ids: Sequence[int],
                  temperature: float) -> torch.Tensor:
    """KL(sampler || learner) at each of `ids` after `prompt`, at the sampling temperature: [len(ids)]. The
    sampler's distributions come from `forced_logits`, the learner's from one forward pass of `model` over
    prompt + ids, as the learner scores what was sampled."""
    full = torch.tensor([list(prompt) + list(ids)], device=snapshot.device)
    learner = model(input_ids=full).logits[0, len(prompt) - 1:len(prompt) - 1 + len(ids)]
    return token_kl(forced_logits(snapshot, prompt, ids), learner, temperature)


def token_kl(sampler_logits: torch.Tensor, learner_logits: torch.Tensor, temperature: float) -> torch.Tensor:
    """KL(sampler || learner) per row of two [N, V] logits (any engine's and the learner's at the same
    positions), between their softmaxes at the sampling temperature, in float32: [N]."""
    s = torch.log_softmax(sampler_logits.float() / temperature, -1)
    t = torch.log_softmax(learner_logits.float() / temperature, -1)
    return (s.exp() * (s - t)).sum(-1)
