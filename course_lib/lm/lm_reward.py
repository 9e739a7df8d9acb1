"""The language model's tasks and reward (chapters 10 and 11): which tasks a rollout may draw from, running
each answer against its task's tests in the sandbox, and the DeepSeek-Coder LoRA-RL report's reward
R = 1[all tests pass] - length_alpha * tokens / 100 (chapter 7's `ShapedReward`).
`course_lib.lm.llm_rl` (the loop) and `course_lib.lm.trl_grpo` (TRL's trainer) both use them."""

from __future__ import annotations

from typing import Sequence

import torch

from course_lib.core import rl
from course_lib.lm.protocol import answer_code
from course_lib.rewards import RewardSpec, ShapedReward, token_length_penalty
from course_lib.sandbox import task_reports
from course_lib.tasks import load_humaneval


# -----------------------------------------------------------------------------
# 1. the tasks whose tests give the rewards

def rollout_tasks(tasks, *, humaneval_train: bool = False) -> list:
    """The course's train and val tasks among `tasks`, plus HumanEval's 131 training problems if asked
    (the DeepSeek-Coder LoRA-RL report's protocol; HumanEval's 33 test problems are never among them)."""
    return [t for t in tasks if t.split in rl.ROLLOUT_SPLITS] + (load_humaneval("train") if humaneval_train else [])


def rollout_pool(tasks, splits: Sequence[str]) -> list:
    """The tasks of `splits` to roll out on; a held-out test task among `tasks` is an error, and so is an empty pool."""
    held_out = [t.id for t in tasks if t.split not in rl.ROLLOUT_SPLITS]
    if held_out:
        raise ValueError(f"RL may not use {len(held_out)} held-out test task(s), e.g. {held_out[:3]}: "
                         f"pass only train/val tasks")
    pool = [t for t in tasks if t.split in splits]
    if not pool:
        raise ValueError(f"no task of the splits {tuple(splits)} among the {len(tasks)} given")
    return pool


# -----------------------------------------------------------------------------
# 2. reward and 3. advantages

def test_reports(tasks: Sequence, texts: Sequence[str], style: str, timeout: float = 2.0) -> list:
    """Run the function each answer holds (`protocol.answer_code`) against its task's tests, in the sandbox."""
    return task_reports(tasks, [answer_code(t, text, style) for t, text in zip(tasks, texts)], timeout=timeout)


def lm_reward(length_alpha: float) -> ShapedReward:
    """The DeepSeek-Coder LoRA-RL report's reward as chapter 7's `ShapedReward` "pass=1,tokens=alpha":
    1 if every test passes else 0, minus alpha * (generated tokens / 100)."""
    return ShapedReward(RewardSpec((("pass", 1.0), ("tokens", float(length_alpha)))))


def length_penalised_reward(passed: Sequence[bool], n_tokens: Sequence[int], alpha: float) -> torch.Tensor:
    """`lm_reward(alpha)` of outcomes already known (passed or not, length in tokens), as a tensor."""
    reward = lm_reward(alpha)
    return torch.tensor([reward.weighted({"pass": float(p), "tokens": token_length_penalty(n_tokens=n)})
                         for p, n in zip(passed, n_tokens)])
