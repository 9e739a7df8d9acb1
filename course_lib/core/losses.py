"""PPO's mathematics: GAE, the clipped surrogate loss and its diagnostics.

Everything here works on padded batches of episodes, shaped ``[B, T]`` (B
episodes, at most T steps each) with a ``mask`` that is 1 on real steps and 0
on padding. The same functions serve the GRU policy of chapters 5-8 and the
LoRA language models of chapters 10-11, where a "step" is one generated token.

Order of the maths (Schulman et al. 2016, 2017):

1. GAE turns rewards and value estimates into advantages  -> ``compute_gae``
2. advantages are normalised over the batch                -> ``normalize_advantages``
3. the clipped surrogate + value loss - entropy bonus      -> ``ppo_loss``
4. diagnostics: approximate KL, clip fraction, explained variance, computed where they arise.
"""

from __future__ import annotations

import torch


def masked_mean(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean over the real steps only (padding must not dilute the average)."""
    return (x * mask).sum() / mask.sum().clamp(min=1)


# --- 1. Generalised advantage estimation ----------------------------------------------


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


# --- The policy-gradient losses of chapter 5 ----------------------------------------------

def reinforce_loss(logprobs: torch.Tensor, returns: torch.Tensor, baseline=None,
                   mask: torch.Tensor | None = None) -> torch.Tensor:
    """-(1/B) sum_i sum_t mask * log pi(a_it | s_it) * (R_it - b_it): its gradient is REINFORCE's estimate.

    logprobs  [B] (one action per episode) or [B, T] (one per token), with gradient
    returns   [B] (one reward per episode, used at every step) or [B, T]
    baseline  None, a number, [B] or [B, T]; detached: it must not be trained by this loss
    mask      [B, T], 1 on real steps, 0 on padding (whose log-probs are then ignored)

    Summing over the steps of an episode (not averaging) is what the theorem says:
    log pi(completion) is the sum of its tokens' log-probs.
    """
    if logprobs.dim() == 1:
        logprobs = logprobs[:, None]
    B, T = logprobs.shape
    returns = torch.as_tensor(returns, dtype=logprobs.dtype)
    advantages = returns[:, None].expand(B, T) if returns.dim() == 1 else returns
    if baseline is not None:
        baseline = torch.as_tensor(baseline, dtype=logprobs.dtype).detach()
        advantages = advantages - (baseline[:, None] if baseline.dim() == 1 else baseline)
    if mask is None:
        mask = torch.ones(B, T, dtype=logprobs.dtype)
    mask = mask.to(logprobs.dtype)
    # where() and not a product: a padded position may hold -inf or nan, and 0 * -inf is nan
    per_step = torch.where(mask > 0, logprobs * advantages.detach(), torch.zeros_like(logprobs))
    return -per_step.sum(dim=1).mean()


def value_loss(values: torch.Tensor, returns: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    """(1/2) mean over real steps of (V(s_t) - R)^2: teaches the critic to predict the reward from each state."""
    if values.dim() == 1:
        values = values[:, None]
    returns = torch.as_tensor(returns, dtype=values.dtype)
    targets = returns[:, None].expand_as(values) if returns.dim() == 1 else returns
    mask = torch.ones_like(values) if mask is None else mask.to(values.dtype)
    return 0.5 * masked_mean((values - targets.detach()) ** 2, mask)
