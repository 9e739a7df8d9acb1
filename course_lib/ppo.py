"""PPO's mathematics: GAE, the clipped surrogate loss and its diagnostics.

Everything here works on padded batches of episodes, shaped ``[B, T]`` (B
episodes, at most T steps each) with a ``mask`` that is 1 on real steps and 0
on padding. The same functions serve the GRU policy of chapters 5-8 and the
LoRA language models of chapters 10-11, where a "step" is one generated token.

Order of the maths (Schulman et al. 2016, 2017):

1. GAE turns rewards and value estimates into advantages  -> ``compute_gae``
2. advantages are normalised over the batch                -> ``normalize_advantages``
3. the clipped surrogate + value loss - entropy bonus      -> ``ppo_loss``
4. diagnostics: approx-KL, clip fraction, explained variance, computed where they arise.
"""

from __future__ import annotations

import math

import torch


def masked_mean(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean over the real steps only (padding must not dilute the average)."""
    return (x * mask).sum() / mask.sum().clamp(min=1)


# --- 1. Generalised advantage estimation ----------------------------------------------

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


# --- 3. The loss ------------------------------------------------------------------------

def ppo_loss(new_logprobs: torch.Tensor, old_logprobs: torch.Tensor, advantages: torch.Tensor,
             mask: torch.Tensor, *, clip_eps: float = 0.2,
             new_values: torch.Tensor | None = None, old_values: torch.Tensor | None = None,
             returns: torch.Tensor | None = None, value_clip_eps: float | None = None,
             entropy: torch.Tensor | None = None, vf_coef: float = 0.5, ent_coef: float = 0.0,
             ref_logprobs: torch.Tensor | None = None, kl_coef: float = 0.0):
    """The PPO objective for one minibatch, as a loss to minimise, plus its diagnostics.

    L = -E[min(r A, clip(r, 1-eps, 1+eps) A)]          clipped surrogate, r = pi_new / pi_old
        + vf_coef * E[(V - R)^2] / 2                     value loss (optionally clipped)
        - ent_coef * E[H]                                entropy bonus: keeps exploring
        + kl_coef * E[KL(pi_new || pi_ref)]              optional pull towards a reference policy

    All expectations are means over real (mask = 1) steps. Pass only what you
    use: without ``new_values`` there is no value loss (GRPO has no critic).
    """
    mask = mask.to(new_logprobs.dtype)
    log_ratio = new_logprobs - old_logprobs
    ratio = log_ratio.exp()
    surrogate = ratio * advantages
    clipped = ratio.clamp(1 - clip_eps, 1 + clip_eps) * advantages
    policy_loss = -masked_mean(torch.min(surrogate, clipped), mask)
    loss = policy_loss

    stats = {"policy_loss": policy_loss.item()}
    if new_values is not None:
        value_error = (new_values - returns) ** 2
        if value_clip_eps is not None:
            # Like the policy, the critic may not move far from where it was when the data was collected.
            v_clipped = old_values + (new_values - old_values).clamp(-value_clip_eps, value_clip_eps)
            value_error = torch.max(value_error, (v_clipped - returns) ** 2)
        value_loss = 0.5 * masked_mean(value_error, mask)
        loss = loss + vf_coef * value_loss
        stats["value_loss"] = value_loss.item()
    if entropy is not None:
        mean_entropy = masked_mean(entropy, mask)
        loss = loss - ent_coef * mean_entropy
        stats["entropy"] = mean_entropy.item()
    if ref_logprobs is not None:
        # k3 estimator of KL(pi_new || pi_ref): unbiased and always >= 0 (Schulman's note on KL).
        ref_log_ratio = ref_logprobs - new_logprobs
        kl_ref = masked_mean(ref_log_ratio.exp() - 1 - ref_log_ratio, mask)
        loss = loss + kl_coef * kl_ref
        stats["kl_ref"] = kl_ref.item()

    with torch.no_grad():  # diagnostics, computed where they arise
        stats["approx_kl"] = masked_mean((ratio - 1) - log_ratio, mask).item()
        stats["clip_frac"] = masked_mean(((ratio - 1).abs() > clip_eps).to(mask.dtype), mask).item()
        stats["ratio_mean"] = masked_mean(ratio, mask).item()
        stats["ratio_std"] = masked_mean((ratio - stats["ratio_mean"]) ** 2, mask).sqrt().item()
    stats["loss"] = loss.item()
    return loss, stats


# --- 4. Diagnostics and schedules --------------------------------------------------------

def explained_variance(values: torch.Tensor, returns: torch.Tensor, mask: torch.Tensor) -> float:
    """1 - Var(R - V) / Var(R): 1 is a perfect critic, 0 no better than a constant, < 0 worse."""
    mask = mask.to(returns.dtype)
    var_returns = masked_mean((returns - masked_mean(returns, mask)) ** 2, mask)
    residual = returns - values
    var_residual = masked_mean((residual - masked_mean(residual, mask)) ** 2, mask)
    if var_returns.item() == 0:
        return float("nan")
    return (1 - var_residual / var_returns).item()


def warmup_cosine(step: int, total_steps: int, warmup_steps: int, min_ratio: float = 0.1) -> float:
    """Learning-rate multiplier: linear warm-up, then cosine decay to ``min_ratio``."""
    if total_steps <= 0:
        raise ValueError(f"total_steps must be positive, got {total_steps}")
    if step < warmup_steps:
        return (step + 1) / warmup_steps
    progress = min(1.0, (step - warmup_steps) / max(1, total_steps - warmup_steps))
    return min_ratio + (1 - min_ratio) * 0.5 * (1 + math.cos(math.pi * progress))
