"""The policy network: a character-level GRU with a policy head and a value head (chapter 4).

    token ids --embed--> vectors --GRU--> hidden states --policy_head--> logits (one score per token)
                                                        --value_head---> value  (one number, chapters 5-8)

`generate` writes completions with it: the prompt is read first, then one token
at a time is chosen (greedily or by sampling) and fed back, until <eos> or
`max_new_tokens`. It returns only the new text, never the prompt.

`decode` is the loop that writes a batch with the GRU: `generate`, chapter 6's
epsilon-greedy search and the RL rollout (`course_lib.gru.actor.collect_rollout`)
all call it, each with its own rule for choosing a token. (Chapter 5's
`pg.gru_policy` instead answers the environment one step at a time.)
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Callable

import torch
import torch.nn as nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_sequence

from course_lib.tokenizers import id_mask


@dataclass(frozen=True)
class GRUConfig:
    vocab_size: int        # number of token ids (the tokenizer's len())
    embed_dim: int = 64    # size of the vector each token id is turned into
    hidden_dim: int = 256  # size of the GRU's memory
    num_layers: int = 1    # GRUs stacked on top of each other

    def to_dict(self) -> dict:
        return asdict(self)


class GRUPolicy(nn.Module):
    def __init__(self, config: GRUConfig):
        super().__init__()
        self.config = config
        self.embed = nn.Embedding(config.vocab_size, config.embed_dim)
        self.gru = nn.GRU(config.embed_dim, config.hidden_dim, config.num_layers, batch_first=True)
        self.policy_head = nn.Linear(config.hidden_dim, config.vocab_size)  # logits of the next token
        self.value_head = nn.Linear(config.hidden_dim, 1)  # expected reward from here (trained in ch. 5-6)

    def forward(self, tokens: torch.Tensor, hidden: torch.Tensor | None = None):
        """tokens [B, T] -> logits [B, T, V], values [B, T], hidden [num_layers, B, H].

        Position t only sees tokens 0..t (a GRU reads left to right), so the logits
        at t score the token at t + 1. Padding at the END of a row cannot change
        the outputs before it.
        """
        out, hidden = self.gru(self.embed(tokens), hidden)
        return self.policy_head(out), self.value_head(out).squeeze(-1), hidden

    def step(self, token: torch.Tensor, hidden: torch.Tensor | None = None):
        """One token per row, token [B] -> logits [B, V], values [B], hidden: incremental decoding."""
        logits, values, hidden = self(token[:, None], hidden)
        return logits[:, 0], values[:, 0], hidden

    def prefill(self, sequences: list[list[int]]):
        """Read token sequences of different lengths; return what `step` would after each one's LAST token.

        Packing runs each row only for its own length, so a short prompt's hidden
        state is never touched by the padding that lines it up with longer ones.
        """
        device = self.embed.weight.device
        lengths = torch.tensor([len(s) for s in sequences])
        if (lengths == 0).any():
            raise ValueError("prefill needs at least one token per sequence (start each with <bos>)")
        padded = pad_sequence([torch.tensor(s, dtype=torch.long) for s in sequences], batch_first=True).to(device)
        packed = pack_padded_sequence(self.embed(padded), lengths, batch_first=True, enforce_sorted=False)
        _, hidden = self.gru(packed)
        top = hidden[-1]  # the last layer's state after each row's last token = its output there
        return self.policy_head(top), self.value_head(top).squeeze(-1), hidden

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())


# -----------------------------------------------------------------------------
# writing completions

def next_token_mask(vocab_size: int, tokenizer, allowed_ids=None, device=None) -> torch.Tensor:
    """Which ids may be generated, as a tensor: allowed_ids (all if None), never <pad> or <bos> (they are
    markers, not text). The environment's action mask is made by the same `tokenizers.id_mask`."""
    barred = (tokenizer.pad_id, tokenizer.bos_id)
    return torch.from_numpy(id_mask(vocab_size, allowed_ids, barred=barred)).to(device)


def choose_next(logits: torch.Tensor, *, temperature: float = 1.0, greedy: bool = False,
                generator: torch.Generator | None = None) -> torch.Tensor:
    """logits [B, V] -> token ids [B]: the most likely (greedy) or a sample from softmax(logits / T)."""
    if greedy or temperature == 0:
        return logits.argmax(dim=-1)
    if temperature < 0:
        raise ValueError(f"temperature must be >= 0 (0 means greedy), got {temperature}")
    probs = torch.softmax(logits / temperature, dim=-1)
    return torch.multinomial(probs, 1, generator=generator).squeeze(-1)


@dataclass
class Decoded:
    ids: list[list[int]]     # each row's written ids, <eos> included where the row wrote it
    last_rows: torch.Tensor  # the rows given a token at the last step
    hidden: torch.Tensor     # those rows' hidden state before that token (a cut-off row's bootstrap reads it)


@torch.no_grad()
def decode(model: GRUPolicy, prompts: list[list[int]], choose: Callable[[torch.Tensor], torch.Tensor], *,
           eos_id: int, max_new_tokens: int, prompt_index: torch.Tensor | None = None, drop_finished: bool = False,
           on_token: Callable | None = None) -> Decoded:
    """The GRU's one writing loop: read the prompts (token ids, <bos> first), then one token per running row a step.

    choose: logits [R, V], on the CPU -> ids [R] (the caller's mask, temperature, greedy or sampled rule).
    prompt_index: row i continues prompts[prompt_index[i]] (each distinct prompt read once); None: row i is prompt i.
    drop_finished: a row that wrote <eos> leaves the batch, so a few long rows do not make every row pay; without
        it, every row is fed each step and its later tokens are ignored (a sampler then draws for every row).
    on_token(t, rows, logits, values, ids): after step t's choice, for what a caller keeps (a rollout's log-probs).
    The network runs on its device; each token is chosen on the CPU, so a CPU generator gives a seed the same
    draws on any device.
    """
    was_training = model.training
    model.eval()
    try:
        device = model.embed.weight.device
        logits, values, hidden = model.prefill(prompts)
        logits, values = logits.cpu(), values.cpu()
        if prompt_index is not None:
            logits, values = logits[prompt_index], values[prompt_index]
            hidden = hidden[:, prompt_index.to(device)].contiguous()
        out: list[list[int]] = [[] for _ in range(len(logits))]
        done = torch.zeros(len(logits), dtype=torch.bool)
        rows = torch.arange(len(logits))  # the rows in `logits`, in order
        for t in range(max_new_tokens):
            token = choose(logits)
            if on_token is not None:
                on_token(t, rows, logits, values, token)
            running = ~done[rows]
            for i, tok in zip(rows[running].tolist(), token[running].tolist()):
                out[i].append(tok)
            done[rows[running]] |= token[running] == eos_id
            if done.all() or t == max_new_tokens - 1:
                break
            logits, values, hidden = model.step(token.to(device), hidden)
            logits, values = logits.cpu(), values.cpu()
            if drop_finished:
                keep = ~done[rows]
                rows, logits, values = rows[keep], logits[keep], values[keep]
                hidden = hidden[:, keep.to(device)].contiguous()
    finally:
        model.train(was_training)
    return Decoded(ids=out, last_rows=rows, hidden=hidden)


def generate_ids(model: GRUPolicy, tokenizer, prompts: list[str], *, max_new_tokens: int,
                 temperature: float = 1.0, greedy: bool = False, allowed_ids=None,
                 generator: torch.Generator | None = None, choose=None) -> list[list[int]]:
    """The generated ids of each prompt, <eos> included where the model wrote it.

    All prompts advance in lockstep, one token each per step; a row that wrote
    <eos> is finished and its later (ignored) tokens are not returned.
    choose: another rule, masked logits [B, V] -> ids [B] (chapter 6's epsilon-greedy).
    """
    mask = next_token_mask(model.config.vocab_size, tokenizer, allowed_ids)

    def pick(logits: torch.Tensor) -> torch.Tensor:
        logits = logits.masked_fill(~mask, float("-inf"))
        return (choose(logits) if choose is not None else
                choose_next(logits, temperature=temperature, greedy=greedy, generator=generator))

    return decode(model, [tokenizer.encode(p, add_bos=True) for p in prompts], pick, eos_id=tokenizer.eos_id,
                  max_new_tokens=max_new_tokens).ids


def generate(model: GRUPolicy, tokenizer, prompts: list[str], *, max_new_tokens: int,
             temperature: float = 1.0, greedy: bool = False, allowed_ids=None,
             generator: torch.Generator | None = None) -> list[str]:
    """The completion of each prompt: the generated text only, without the prompt and without <eos>.

    temperature: < 1 sharpens the distribution, > 1 flattens it; 0 is greedy.
    allowed_ids: the action alphabet (e.g. `env.action_alphabet`); include <eos> or rows never stop early.
    generator: a seeded torch.Generator makes sampling repeatable.
    """
    ids = generate_ids(model, tokenizer, prompts, max_new_tokens=max_new_tokens, temperature=temperature,
                       greedy=greedy, allowed_ids=allowed_ids, generator=generator)
    return [tokenizer.decode(row) for row in ids]  # tokenizer.decode drops <eos>
