"""REINFORCE on the code environment (chapter 5): the RL core's Trainer with the GRU and four baselines.

One update, in the order of the maths (`rl.Trainer.step`, the step PPO takes in chapter 6 and the
language model in chapter 10):

    1. SAMPLE    samples_per_task episodes of every task from the current policy, in the environment
                 (`batched_env.rollout_batch` with `pg.gru_policy`); the sandbox scores each program: R
    2. BASELINE  b(s_t), which never depends on the episode's own tokens: 0, a running mean of earlier
                 batches, the mean of the other samples of the same task, or the critic's V(s_t)
    3. ADVANTAGE R - b(s_t) on every token (`rl.advantages(ro, "baseline")`)
    4. LEARN     ONE gradient step on -(R - b) log pi (+ the critic's squared error if it is the baseline),
                 then the batch is thrown away: it was sampled by a policy that no longer exists
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from course_lib.core import rl, update
from course_lib.core.rollout import written_rollout
from course_lib.gru.actor import GRUActor
from course_lib.gru.batched_env import rollout_batch
from course_lib.gru.env import course_alphabet
from course_lib.gru.models import next_token_mask
from course_lib.gru.pg import RunningMeanBaseline, gru_policy, leave_one_out_baseline
from course_lib.progress import tqdm
from course_lib.rewards import fraction_passed

BASELINES = ("none", "mean", "leave_one_out", "value")


@dataclass(kw_only=True)
class ReinforceStep(rl.StepInfo):
    rewards: torch.Tensor  # [B] each episode's reward


class ReinforceTrainer(rl.Trainer):
    """REINFORCE (and, with baseline="value", its actor-critic form) on CodeGenEnv, as an `rl.Trainer`.

    baseline: "none", "mean" (`pg.RunningMeanBaseline` of past batches), "leave_one_out" (the other
    samples of the same task) or "value" (the GRU's value head, trained alongside: a critic).
    The model is trained in place (copy it first to keep the original).
    """

    def __init__(self, model, tokenizer, tasks, *, samples_per_task: int, lr: float, baseline: str = "mean",
                 vf_coef: float = 0.5, max_new_tokens: int = 160, alphabet=None, seed: int = 0,
                 clip_norm: float = 1.0, reward_fn=None):
        if baseline not in BASELINES:
            raise ValueError(f"unknown baseline {baseline!r}; choose one of {BASELINES}")
        if baseline == "leave_one_out" and samples_per_task < 2:
            raise ValueError(f"leave_one_out compares samples of the same task: samples_per_task must be >= 2, "
                             f"got {samples_per_task}")
        self.model, self.tokenizer, self.tasks, self.baseline = model, tokenizer, list(tasks), baseline
        self.samples_per_task, self.max_new_tokens, self.seed = samples_per_task, max_new_tokens, seed
        self.alphabet = course_alphabet(tokenizer) if alphabet is None else alphabet
        self.reward_fn = fraction_passed if reward_fn is None else reward_fn
        torch.manual_seed(seed)
        self.generator = torch.Generator(device=model.embed.weight.device).manual_seed(seed)
        self.optimizer = torch.optim.Adam(model.parameters(), lr=lr)
        self.params = list(model.parameters())
        self.rng = np.random.default_rng(seed)  # the core's minibatch order (one minibatch: no effect)
        self.running = RunningMeanBaseline()
        allowed = next_token_mask(model.config.vocab_size, tokenizer, self.alphabet)
        self.actor = GRUActor(model, allowed=allowed, temperature=1.0)
        self.estimator = "baseline"
        self.loss_settings = update.LossSettings(loss="reinforce", epochs=1, critic=baseline == "value", vf_coef=vf_coef,
                                             max_grad_norm=clip_norm)
        self.history: list[dict] = []

    def collect(self):
        """1. sample and score; 2. put each episode's baseline b(s_t) in the rollout's values."""
        update, n = len(self.history), self.samples_per_task
        policy = gru_policy(self.model, self.tokenizer, generator=self.generator)
        episodes = rollout_batch(policy, self.tasks, n=n, seed=self.seed + 1000 * update, tokenizer=self.tokenizer,
                                 max_new_tokens=self.max_new_tokens, alphabet=self.alphabet, reward_fn=self.reward_fn)
        rewards = torch.tensor([e.reward for e in episodes])
        tasks = [t for t in self.tasks for _ in range(n)]
        ro = written_rollout(self.tokenizer, [t.prompt for t in tasks], [e.actions for e in episodes],
                             rewards=rewards, tasks=tasks, episodes=episodes)
        if self.baseline == "value":  # the critic's V(s_t), read before learning
            with torch.no_grad():
                ro.values = self.actor.score(ro, torch.arange(len(episodes)))[2]
            return ro, ReinforceStep(rewards=rewards)
        if self.baseline == "mean":
            b = torch.full_like(rewards, float(self.running.value))  # past batches only (0 before the first)
            self.running.update(rewards)
        elif self.baseline == "leave_one_out":
            b = leave_one_out_baseline(rewards, n)
        else:
            b = torch.zeros_like(rewards)
        ro.values = b[:, None] * ro.mask
        return ro, ReinforceStep(rewards=rewards)

    def record(self, ro, info: ReinforceStep, adv, returns, logs, epochs_done, early_stop) -> dict:
        mb = logs[-1]
        row = {"update": len(self.history), "reward": float(info.rewards.mean()), "rewards": info.rewards.tolist(),
               "pass_rate": float(np.mean([e.all_passed for e in ro.episodes])),
               "length": float(ro.mask.sum(1).mean()), "grad_norm": mb["grad_norm"],
               "entropy": mb["entropy"], "value_loss": mb["value_loss"]}
        self.history.append(row)
        return row


def train_reinforce(model, tokenizer, tasks, *, updates: int, progress: bool = True, **settings) -> list[dict]:
    """`updates` steps of a `ReinforceTrainer(model, tokenizer, tasks, **settings)`; one dict per update:
    the mean reward and every episode's reward, the pass rate, the mean length, the gradient's norm,
    the policy's entropy and the critic's loss."""
    trainer = ReinforceTrainer(model, tokenizer, tasks, **settings)
    for _ in tqdm(range(updates), desc=f"REINFORCE ({trainer.baseline})", disable=not progress, unit="update"):
        trainer.step()
    return trainer.history
