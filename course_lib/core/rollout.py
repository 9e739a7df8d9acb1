"""The GRU policy's side of RL (chapters 5-8): which tasks to roll out, sampling episodes, re-reading them.

    TaskSampler        draws each update's tasks, leaning towards those not yet solved
    ShuffledPasses     draws them in shuffled passes over the pool, every task once before any repeats
                       (the language model's rollouts, chapters 10-11); the same interface as TaskSampler
    collect_rollout    samples B episodes in lockstep and scores them with ONE sandbox batch: a Rollout
    written_rollout    a Rollout of completions written elsewhere (chapter 5's environment episodes)
    evaluate_actions   re-reads a Rollout's tokens with the current weights: log pi(a_t), entropy, V(s_t)
    GRUActor           the GRU as the RL core (`course_lib.core.rl`) sees it: score(ro, rows) and its reference

`course_lib.gru.trainer` (the PPO loop) and `course_lib.gru.teacher` (teacher episodes, behaviour cloning)
both build on these; neither imports the other's internals.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np
import torch

# =====================================================================================
# Which tasks are rolled out: a sampler that leans towards the tasks not yet solved
# =====================================================================================


# =====================================================================================
# 1-2. ROLLOUT and REWARD: B episodes in lockstep, one sandbox batch at the end
# =====================================================================================

@dataclass
class Episode:
    """What happened in one episode, as the sandbox scored it."""
    task_id: str
    completion: str          # the text written, without <eos>
    actions: list[int]       # every id the policy chose, <eos> included
    terminated: bool         # ended by <eos>
    truncated: bool          # cut off at max_new_tokens
    reward: float            # reward_fn's value (nan when not scored)
    passed: int = 0          # tests passed ...
    total: int = 0           # ... out of
    status: str = ""         # the sandbox's verdict (passed, failed, syntax_error, ...)
    out_of_mask: int = 0     # how many actions were outside the action mask

    @property
    def steps(self) -> int:
        return len(self.actions)

    @property
    def all_passed(self) -> bool:
        return self.total > 0 and self.passed == self.total


def pass_rate(episodes: Sequence[Episode]) -> float:
    """Fraction of episodes whose completion passes all of its tests."""
    return float(np.mean([e.all_passed for e in episodes])) if episodes else float("nan")


@dataclass
class Rollout:
    """One update's episodes. Episodes of the same task share one prompt (read once), and the
    generated ids are padded to [B, T] (T = the longest episode's number of tokens)."""
    tasks: list
    episodes: list             # course_lib.core.rollout.Episode, one per row, scored by the sandbox
    prompts: list              # the distinct prompts, as id lists starting with <bos>
    prompt_index: torch.Tensor  # [B] which prompt each episode continues
    actions: torch.Tensor      # [B, T] generated ids (padding: <pad>)
    logprobs: torch.Tensor     # [B, T] log pi_old(action) under the tempered, masked rollout policy
    values: torch.Tensor       # [B, T] the critic's V(s_t) at rollout time
    mask: torch.Tensor         # [B, T] 1 on real steps, 0 on padding
    rewards: torch.Tensor      # [B, T] 0 everywhere except each episode's last step
    bootstrap: torch.Tensor    # [B] V(state after the last step) for truncated episodes, else 0
    sampler_logprobs: torch.Tensor | None = None  # [B, T] log-probabilities under the engine that sampled the ids,
                                                  # when it is not the learner itself (`rl.sampler_correction`)


def distinct_texts(prompts: Sequence[str], encode: Callable[[str], list]):
    """The distinct prompt texts, encoded (in order of first appearance), and the index of each one's."""
    order = list(dict.fromkeys(prompts))
    where = {p: i for i, p in enumerate(order)}
    return [encode(p) for p in order], torch.tensor([where[p] for p in prompts], dtype=torch.long)


def last_token_rewards(rewards, mask: torch.Tensor) -> torch.Tensor:
    """[B, T]: each episode's reward on its last real token (mask 1), 0 everywhere else."""
    B, T = mask.shape
    token_rewards = torch.zeros(B, T)
    token_rewards[torch.arange(B), mask.sum(1).long().clamp(min=1) - 1] = torch.as_tensor(rewards, dtype=torch.float32)
    return token_rewards


def written_rollout(tokenizer, prompts: Sequence[str], completions: Sequence[Sequence[int]], *,
                    rewards: Sequence[float] | None = None, tasks=None, episodes=None,
                    encode: Callable[[str], list] | None = None, pad_id: int | None = None) -> Rollout:
    """A Rollout of completions already written (token ids, <eos> included): chapter 5's environment
    episodes, or a language model's samples. Padded to [B, T] with its mask, each reward (if given) on its
    episode's last token, and log pi_old and V left at 0 (a policy's `score` reads them when needed).
    encode: prompt text -> ids (default: the course tokenizer's <bos> + ids); pad_id: default tokenizer.pad_id."""
    B, T = len(completions), max(1, max(len(c) for c in completions))
    pad_id = tokenizer.pad_id if pad_id is None else pad_id
    actions, mask = torch.full((B, T), pad_id, dtype=torch.long), torch.zeros(B, T)
    for i, c in enumerate(completions):
        actions[i, :len(c)], mask[i, :len(c)] = torch.as_tensor(list(c), dtype=torch.long), 1.0
    token_rewards = last_token_rewards(rewards, mask) if rewards is not None else torch.zeros(B, T)
    encoded, prompt_index = distinct_texts(prompts, encode or (lambda p: tokenizer.encode(p, add_bos=True)))
    return Rollout(tasks=list(tasks) if tasks is not None else [None] * B, episodes=list(episodes or []),
                   prompts=encoded, prompt_index=prompt_index, actions=actions, logprobs=torch.zeros(B, T),
                   values=torch.zeros(B, T), mask=mask, rewards=token_rewards, bootstrap=torch.zeros(B))


def minibatch(ro: Rollout, rows: torch.Tensor):
    """The rows' distinct prompts, their prompt index into those, and the slice of length T they need."""
    used = sorted(set(ro.prompt_index[rows].tolist()))
    remap = {old: new for new, old in enumerate(used)}
    T = int(ro.mask[rows].sum(1).max())
    return ([ro.prompts[i] for i in used], torch.tensor([remap[i] for i in ro.prompt_index[rows].tolist()]), T)


