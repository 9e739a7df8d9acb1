"""One update of the RL core, for every policy: epochs of minibatches of one loss (chapters 5-6, 10).

    Policy              what the core asks of a policy: score(ro, rows) -> log pi(a_t), entropy, V(s_t) of the
                        rollout's own ids, with gradients; reference_logprobs(ro, rows) for a KL term
    LossSettings        how `learn` turns one rollout into gradient steps (the loss, epochs, clips, weights)
    rl_loss             the RL part of the loss on one minibatch: PPO's clipped surrogate or REINFORCE's -A log p,
                        + value loss + entropy bonus + KL to a reference
    sampler_correction  truncated importance weights when another engine sampled the ids than the one that learns
    learn               the epochs of minibatches, with whatever extra terms the caller adds (teacher terms, SFT)

`course_lib.core.rl.Trainer.step` calls `learn` once per step, after the advantages.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Protocol

import numpy as np
import torch

from course_lib.core.losses import masked_mean, ppo_loss, reinforce_loss, value_loss
from course_lib.core.rollout import Rollout


LOSSES = ("clip", "reinforce")


class Policy(Protocol):
    """A policy the core can train. rows index the rollout's episodes; every tensor returned is
    [len(rows), T], T = the longest of those episodes, and 0 on padding."""

    def score(self, ro: Rollout, rows: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
        """log pi(a_t | s_t) of the ids in ro.actions (with gradients), the entropy H_t (or None) and V(s_t) (or None)."""

    def reference_logprobs(self, ro: Rollout, rows: torch.Tensor) -> torch.Tensor:
        """log pi_ref(a_t | s_t) under the frozen reference policy, without gradients: the same numbers
        for the same rows whenever asked, with no randomness (`learn` asks once per set of rows)."""


@dataclass(frozen=True)
class LossSettings:
    """How `learn` turns one rollout into gradient steps."""
    loss: str = "clip"                  # "clip": PPO's clipped surrogate; "reinforce": -A * log pi(episode)
    epochs: int = 2                     # passes over the rollout ("reinforce": 1, since the data is on-policy once)
    minibatch_size: int | None = None   # episodes per gradient step; None: all of them
    micro_batch_size: int | None = None  # episodes scored and back-propagated at once within a minibatch (less
                                        # memory, the same step: gradients accumulate); None: the whole minibatch
    clip_eps: float = 0.2               # PPO's ratio clip
    critic: bool = False                # train the policy's value head on the returns
    value_clip_eps: float | None = 0.2  # clip the critic's move around the rollout's values; None: unclipped
    vf_coef: float = 0.5                # weight of the value loss
    ent_coef: float = 0.0               # weight of the entropy bonus
    kl_coef: float = 0.0                # weight of KL(pi || pi_ref); > 0 asks the policy for reference_logprobs
    target_kl: float | None = None      # stop the epochs once approximate KL passes this; None: never
    max_grad_norm: float = 1.0          # global gradient-norm clip
    scale: float = 1.0                  # weight of the whole RL loss (chapter 8's ablation sets 0)

    def __post_init__(self):
        if self.loss not in LOSSES:
            raise ValueError(f"unknown loss {self.loss!r}; choose one of {LOSSES}")
        if self.epochs < 1:
            raise ValueError(f"epochs must be at least 1, got {self.epochs}")
        if self.micro_batch_size is not None and self.micro_batch_size < 1:
            raise ValueError(f"micro_batch_size must be at least 1 (or None: no accumulation), got {self.micro_batch_size}")
        if self.micro_batch_size is not None and self.loss == "reinforce" and self.critic:
            raise ValueError("micro_batch_size: REINFORCE's loss averages over episodes and its critic's over tokens, so "
                             "the micro-batches could not be weighted exactly; leave micro_batch_size=None")


def rl_loss(new_logprobs, entropy, new_values, ro: Rollout, rows, adv, returns, ref_logprobs, s: LossSettings):
    """The RL part of the loss on one minibatch (all tensors cut to the minibatch's length T), and its diagnostics."""
    T = new_logprobs.shape[1]
    mask = ro.mask[rows, :T]
    if s.loss == "reinforce":
        loss = reinforce_loss(new_logprobs, adv[rows, :T], mask=mask)
        stats = {"policy_loss": loss.item()}
        if entropy is not None:
            stats["entropy"] = masked_mean(entropy.detach(), mask).item()
        if new_values is not None:  # the critic's error, logged; trained only when it is the baseline
            critic_loss = value_loss(new_values, returns[rows, :T], mask)
            stats["value_loss"] = critic_loss.item()
            if s.critic:
                loss = loss + s.vf_coef * critic_loss
        stats["loss"] = loss.item()
        return loss, stats
    return ppo_loss(new_logprobs, ro.logprobs[rows, :T], adv[rows, :T], mask, clip_eps=s.clip_eps,
                    new_values=new_values if s.critic else None, old_values=ro.values[rows, :T],
                    returns=returns[rows, :T], value_clip_eps=s.value_clip_eps, entropy=entropy,
                    vf_coef=s.vf_coef, ent_coef=s.ent_coef, ref_logprobs=ref_logprobs, kl_coef=s.kl_coef)


def sampler_correction(ro: Rollout, cap: float) -> tuple[torch.Tensor | None, dict]:
    """Truncated importance weights for a sampler that is not the learner, and how far apart the two are.

    A fast engine (int8 weights, another runtime) samples from pi_sampler, slightly different from
    the learner's pi_old, which scores the same ids (`ro.logprobs`). Weighting each token's advantage
    by w_t = min(pi_old(a_t) / pi_sampler(a_t), cap) makes the update the one pi_old's own samples
    would give in expectation, with the weight's variance bounded by the cap (truncated importance
    sampling, as verl and TRL apply it behind vLLM). Returns (weights [B, T] or None when the sampler
    is the learner or cap is 0, diagnostics): sampler_kl, KL(pi_sampler || pi_old) per token
    estimated on the sampled ids (the mean of log pi_sampler - log pi_old), and the weights' mean and
    the fraction of tokens cut at the cap.
    """
    if ro.sampler_logprobs is None:
        return None, {}
    mask = ro.mask
    log_ratio = (ro.logprobs - ro.sampler_logprobs) * mask  # log pi_old - log pi_sampler on each sampled token
    stats = {"sampler_kl": masked_mean(-log_ratio, mask).item(),
             "sampler_max_abs_log_ratio": float(log_ratio.abs().max())}
    if not cap:
        return None, stats
    weights = log_ratio.exp().clamp(max=cap) * mask
    stats.update(is_weight_mean=masked_mean(weights, mask).item(),
                 is_capped_frac=masked_mean((log_ratio.exp() > cap).float(), mask).item())
    return weights, stats


def learn(policy: Policy, ro: Rollout, adv: torch.Tensor, returns: torch.Tensor, s: LossSettings, optimizer,
          params, rng: np.random.Generator, *, add_terms: Callable[[torch.Tensor, dict], torch.Tensor] | None = None,
          backward: Callable[[torch.Tensor], None] | None = None) -> tuple[list[dict], int, bool]:
    """Epochs of minibatches of the loss; returns (each minibatch's diagnostics, epochs done, stopped early).

    Each epoch visits the episodes in a new random order (rng), minibatch_size at a time (rows kept
    sorted). add_terms(loss, diagnostics) -> the loss with extra terms added (behaviour cloning,
    self-imitation, SFT on a teacher's answers), writing their diagnostics; backward(loss) replaces loss.backward()
    (a multi-process run averages gradients there). The epochs stop early when approximate KL > target_kl.
    With s.micro_batch_size, a minibatch's gradient is accumulated over micro-batches (`accumulate`).
    """
    B = ro.actions.shape[0]
    size = s.minibatch_size or B
    logs: list[dict] = []
    reference = frozen_reference(policy, ro) if s.kl_coef > 0 else None
    for epoch in range(1 if s.loss == "reinforce" else s.epochs):
        order = rng.permutation(B)
        for start in range(0, B, size):
            rows = torch.as_tensor(np.sort(order[start:start + size]))
            optimizer.zero_grad()
            if s.micro_batch_size and s.micro_batch_size < len(rows):
                mb = accumulate(policy, ro, rows, adv, returns, s, add_terms=add_terms, backward=backward,
                                reference=reference)
            else:
                new_logprobs, entropy, new_values = policy.score(ro, rows)
                ref_logprobs = reference(rows) if reference is not None else None  # same rows, same numbers: once
                loss, mb = rl_loss(new_logprobs, entropy, new_values, ro, rows, adv, returns, ref_logprobs, s)
                loss = s.scale * loss
                if add_terms is not None:
                    loss = add_terms(loss, mb)
                (backward or torch.Tensor.backward)(loss)
            mb["grad_norm"] = float(torch.nn.utils.clip_grad_norm_(params, s.max_grad_norm))
            optimizer.step()
            logs.append(mb)
            if s.target_kl is not None and mb.get("approx_kl", 0.0) > s.target_kl:
                return logs, epoch, True  # the policy moved too far from the one that collected the data
    return logs, epoch + 1, False


def frozen_reference(policy: Policy, ro: Rollout) -> Callable[[torch.Tensor], torch.Tensor]:
    """rows -> policy.reference_logprobs(ro, rows), computed once for each set of rows: the reference is
    frozen, so every epoch that visits the same rows (a whole-batch minibatch) reads the first epoch's
    numbers instead of running the reference model again. Minibatches drawn anew each epoch rarely
    repeat; their [rows, T] tensors stay until `learn` returns, a small price."""
    cache: dict[tuple, torch.Tensor] = {}

    def reference(rows: torch.Tensor) -> torch.Tensor:
        key = tuple(rows.tolist())
        if key not in cache:
            cache[key] = policy.reference_logprobs(ro, rows)
        return cache[key]
    return reference


def accumulate(policy: Policy, ro: Rollout, rows: torch.Tensor, adv, returns, s: LossSettings, *,
               add_terms=None, backward=None, reference=None) -> dict:
    """One minibatch's gradient, summed over micro-batches of s.micro_batch_size episodes: the same gradient
    as one pass over all rows, with the activations of one micro-batch in memory at a time.

    Each loss is a mean, so each micro-batch's loss is weighted by its share of what the mean counts:
    tokens for the clipped surrogate (its value, entropy and KL terms are token means too), episodes for
    REINFORCE's. The extra terms (add_terms) join the last micro-batch's loss, so there is one backward
    per micro-batch whatever the data (a multi-process backward must be called as often on every process).
    The diagnostics are what one pass would log: token means pooled by token share, REINFORCE's loss by
    episode share, the ratio's standard deviation from the pooled moments.
    """
    parts = rows.split(s.micro_batch_size)
    if s.kl_coef > 0 and reference is None:
        reference = frozen_reference(policy, ro)
    tokens = ro.mask[rows].sum(dtype=torch.float64).clamp(min=1)
    token_shares = [float(ro.mask[p].sum(dtype=torch.float64) / tokens) for p in parts]
    row_shares = [len(p) / len(rows) for p in parts]
    loss_shares = row_shares if s.loss == "reinforce" else token_shares
    run_backward = backward or torch.Tensor.backward
    mb: dict = {}
    second_moment = 0.0  # E[ratio^2], to pool the ratio's standard deviation
    for i, part in enumerate(parts):
        new_logprobs, entropy, new_values = policy.score(ro, part)
        ref_logprobs = reference(part) if reference is not None else None
        loss, part_stats = rl_loss(new_logprobs, entropy, new_values, ro, part, adv, returns, ref_logprobs, s)
        loss = s.scale * loss_shares[i] * loss
        if i == len(parts) - 1 and add_terms is not None:
            extra: dict = {}
            extra_loss = add_terms(torch.zeros(()), extra)  # the extra terms alone, once per minibatch
            loss = loss + extra_loss
        run_backward(loss)
        for key, value in part_stats.items():
            share = loss_shares[i] if key in ("loss", "policy_loss") else token_shares[i]
            if key == "ratio_std":
                second_moment += share * (value ** 2 + part_stats["ratio_mean"] ** 2)
            else:
                mb[key] = mb.get(key, 0.0) + share * value
    if "ratio_mean" in mb:
        mb["ratio_std"] = max(second_moment - mb["ratio_mean"] ** 2, 0.0) ** 0.5
    if add_terms is not None:
        mb.update({k: v for k, v in extra.items() if k != "loss"})
        if "loss" in extra:  # as in `learn`: add_terms that log the loss log the whole of it
            mb["loss"] = s.scale * mb["loss"] + extra["loss"]
    return mb
