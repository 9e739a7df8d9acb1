"""Exploring near what the policy already writes: epsilon-greedy decoding (chapter 6).

A pretrained policy that has memorised its training tasks writes, for a new task,
the program of the nearest training sibling: ``return x * 3`` for "multiply by 5".
Often the right program is ONE token away. Sampling every token at a high
temperature rarely finds it: it changes many tokens at once, and most of those
changes break the program. Epsilon-greedy decoding searches the neighbourhood of
the greedy program instead:

    at every step, take the policy's best token, except with probability epsilon
    take a different one, drawn from the policy's own distribution without the best

so an episode is the greedy program with about ``epsilon * length`` changes, each
one a change the policy itself finds plausible, and the tokens after a change are
chosen knowing it (``x * 5`` is followed by the same ``\\n`` as ``x * 3``).

These episodes are *not* samples of the policy, so they never enter the PPO loss
(its ratio assumes on-policy data). What they find goes to self-imitation
(`course_lib.gru.teacher.PassingPrograms`): a program that passed every test, found by
search, that the policy then learns to write greedily.
"""

from __future__ import annotations

from typing import Sequence

import torch

from course_lib.gru.models import GRUPolicy, generate_ids
from course_lib.sandbox import task_reports


def epsilon_greedy(logits: torch.Tensor, *, epsilon: float, temperature: float = 1.0,
                   generator: torch.Generator | None = None) -> torch.Tensor:
    """logits [B, V] (-inf where not allowed) -> token ids [B]: the best token, or with probability
    epsilon another one drawn from softmax(logits / temperature) with the best left out."""
    if not 0.0 <= epsilon <= 1.0:
        raise ValueError(f"epsilon is a probability, got {epsilon}; try 0.04 (about one change per 25 tokens)")
    if temperature <= 0:
        raise ValueError(f"temperature must be > 0 for the changed tokens, got {temperature}")
    best = logits.argmax(-1)
    others = (logits / temperature).scatter(-1, best[:, None], float("-inf"))
    has_other = torch.isfinite(others).any(-1)  # a row with one allowed token has nothing else to pick
    probs = torch.softmax(others.masked_fill(~has_other[:, None], 0.0), -1)
    other = torch.multinomial(probs, 1, generator=generator).squeeze(-1)
    change = (torch.rand(best.shape, generator=generator) < epsilon) & has_other
    return torch.where(change, other, best)


def epsilon_greedy_generate(model: GRUPolicy, tokenizer, prompts: list[str], *, epsilon: float,
                            temperature: float = 1.0, max_new_tokens: int = 160, allowed_ids=None,
                            generator: torch.Generator | None = None) -> list[str]:
    """One epsilon-greedy completion per prompt (the text only, as `models.generate` returns it)."""
    def choose(logits):
        return epsilon_greedy(logits, epsilon=epsilon, temperature=temperature, generator=generator)

    ids = generate_ids(model, tokenizer, prompts, max_new_tokens=max_new_tokens, allowed_ids=allowed_ids,
                       choose=choose)
    return [tokenizer.decode(row) for row in ids]  # decode drops <eos>


def explore(model: GRUPolicy, tokenizer, tasks: Sequence, *, epsilon: float, temperature: float = 1.0,
            max_new_tokens: int = 160, allowed_ids=None, generator: torch.Generator | None = None,
            timeout: float = 2.0) -> list[tuple]:
    """An epsilon-greedy completion for each task (list a task k times for k tries), run against its
    tests in one sandbox batch. Returns (task, completion, TestReport) triples."""
    tasks = list(tasks)
    if any(t.split == "test" for t in tasks):
        raise ValueError("test tasks are never explored: they measure generalisation")
    completions = epsilon_greedy_generate(model, tokenizer, [t.prompt for t in tasks], epsilon=epsilon,
                                          temperature=temperature, max_new_tokens=max_new_tokens,
                                          allowed_ids=allowed_ids, generator=generator)
    reports = task_reports(tasks, completions, timeout=timeout)
    return list(zip(tasks, completions, reports))
