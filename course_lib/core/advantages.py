"""Advantages: how much better than expected each token's outcome was (chapters 5-6, 10).

Everything here works on padded batches of episodes, shaped ``[B, T]`` (B episodes, at most T steps
each) with a ``mask`` that is 1 on real steps and 0 on padding; a "step" is one generated token.

    compute_gae            GAE(gamma, lambda) from a critic's values (Schulman et al. 2016)
    normalize_advantages   zero mean, unit variance over the batch's real steps
    group_advantages       R minus the mean of the episode's group (its prompt's samples), over the group's std (GRPO)
    advantages             a rollout's per-token advantages and returns by one of ESTIMATORS, what `course_lib.core.rl`
                           learns from (`episode_advantages`: one per episode, from one reward per episode)
"""

from __future__ import annotations

import torch

from course_lib.core.losses import masked_mean
from course_lib.core.rollout import Rollout

ESTIMATORS = ("gae", "baseline", "batch", "group")


def compute_gae(rewards: torch.Tensor, values: torch.Tensor, mask: torch.Tensor, *,
                gamma: float, lam: float, bootstrap_values: torch.Tensor | None = None):
    """Advantages and returns by GAE(gamma, lambda), backwards through each episode.

    delta_t = r_t + gamma * V(s_{t+1}) - V(s_t)
    A_t     = delta_t + gamma * lam * A_{t+1}

    After an episode's last real step, V(s_{t+1}) is ``bootstrap_values`` (shape
    [B], default 0): the value of whatever follows the last step. In the code
    environment nothing follows either ending: an episode that wrote EOS
    *terminated*, and one cut at the length limit (*truncated*) is scored as it
    stands and paid at the cut, so both pass 0. Pass the critic's value of the
    next state only where a truncation interrupts a task that would go on
    earning reward (a time limit in a control task); there, treating the cut as
    an ending would be the bug.
    """
    B, T = rewards.shape
    mask = mask.to(rewards.dtype)
    if bootstrap_values is None:
        bootstrap_values = torch.zeros(B, dtype=rewards.dtype)
    advantages = torch.zeros_like(rewards)
    next_advantage = torch.zeros(B, dtype=rewards.dtype)
    next_value = bootstrap_values.to(rewards.dtype)
    for t in reversed(range(T)):
        real = mask[:, t]
        has_next = mask[:, t + 1] if t + 1 < T else torch.zeros(B, dtype=rewards.dtype)
        # The state after step t is either step t+1 (same episode) or the bootstrap.
        v_next = has_next * next_value + (1 - has_next) * bootstrap_values
        a_next = has_next * next_advantage
        delta = rewards[:, t] + gamma * v_next - values[:, t]
        advantage = (delta + gamma * lam * a_next) * real
        advantages[:, t] = advantage
        next_advantage, next_value = advantage, values[:, t]
    returns = (advantages + values) * mask
    return advantages, returns


def normalize_advantages(advantages: torch.Tensor, mask: torch.Tensor, eps: float = 1e-8) -> torch.Tensor:
    """Zero mean, unit variance over the real steps: keeps the step size independent of reward scale."""
    mean = masked_mean(advantages, mask)
    var = masked_mean((advantages - mean) ** 2, mask)
    return (advantages - mean) / (var.sqrt() + eps) * mask


def group_advantages(rewards: torch.Tensor, group_size: int, *, normalise: bool = True,
                     eps: float = 1e-6, min_std: float = 0.0) -> torch.Tensor:
    """(R - mean of its group) / (max(std of its group, min_std) + eps); rewards come in consecutive groups.

    A group whose samples all earned the same reward gets advantage 0: it says nothing
    about which sample was better. normalise=False keeps R - mean (a plain baseline).
    min_std > 0 stops a group whose rewards differ only a little (by a length penalty,
    say) from having those small differences blown up to +-1.
    """
    if rewards.numel() % group_size:
        raise ValueError(f"{rewards.numel()} rewards do not split into groups of {group_size}")
    groups = rewards.view(-1, group_size)
    centred = groups - groups.mean(dim=1, keepdim=True)
    if normalise:
        centred = centred / (groups.std(dim=1, unbiased=False, keepdim=True).clamp(min=min_std) + eps)
    return centred.reshape(-1)


def advantages(ro: Rollout, estimator: str, *, gamma: float = 1.0, lam: float = 0.95, group_size: int = 1,
               normalise: bool = True, min_std: float = 0.0) -> tuple[torch.Tensor, torch.Tensor]:
    """(advantages, returns), each [B, T] and 0 on padding.

    gae       GAE on ro.rewards and ro.values (bootstrapped by ro.bootstrap); normalise: over the batch's tokens
    baseline  R - ro.values on every token: REINFORCE with the baseline b(s_t) the rollout holds (never normalised)
    batch  each episode's reward R minus the batch mean (normalise: divided by the batch's std), on every token
    group  R minus the mean of its group of group_size consecutive episodes (the same prompt), divided
           by the group's std (floored at min_std), on every token
    The returns are the critic's targets: GAE's, or R on every token.
    """
    if estimator not in ESTIMATORS:
        raise ValueError(f"unknown advantage estimator {estimator!r}; choose one of {ESTIMATORS}")
    mask = ro.mask
    if estimator == "gae":
        adv, returns = compute_gae(ro.rewards, ro.values, mask, gamma=gamma, lam=lam, bootstrap_values=ro.bootstrap)
        return (normalize_advantages(adv, mask) if normalise else adv), returns
    episode_reward = ro.rewards.sum(1)  # the reward sits on each episode's last token
    if estimator == "baseline":
        return (episode_reward[:, None] - ro.values) * mask, episode_reward[:, None] * mask
    per_episode = episode_advantages(episode_reward, estimator, group_size=group_size, normalise=normalise,
                                     min_std=min_std)
    return per_episode[:, None] * mask, episode_reward[:, None] * mask


def episode_advantages(rewards: torch.Tensor, estimator: str, *, group_size: int = 1, normalise: bool = True,
                       min_std: float = 0.0) -> torch.Tensor:
    """One advantage per episode from one reward per episode: "batch" (R - the batch's mean, normalise: / its
    std) or "group" (R - its group's mean, / the group's std; groups of group_size consecutive episodes)."""
    if estimator not in ("batch", "group"):
        raise ValueError(f"{estimator!r} needs per-token values: episode advantages are 'batch' or 'group'")
    size = rewards.numel() if estimator == "batch" else group_size
    return group_advantages(rewards, size, normalise=normalise, min_std=min_std)
