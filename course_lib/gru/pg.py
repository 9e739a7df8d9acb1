"""Policy gradients: REINFORCE, baselines, and how noisy the gradient is (chapter 5).

The policy-gradient theorem, for episodes that are one choice a (an arm of a
bandit) or one whole completion a = (a_1, ..., a_T) scored once at the end:

    J(theta)      = E_{a ~ pi_theta} [ R(a) ]                       the expected reward
    grad J(theta) = E_{a ~ pi_theta} [ grad log pi_theta(a) * (R(a) - b) ]
    log pi(a)     = sum_t log pi(a_t | s_t)                          a completion, token by token

b is a *baseline*: any number that does not depend on the sampled a (and, per
token, any function of the state s_t). It leaves the expected gradient alone and
changes only its variance: down a lot when chosen well, up when not (chapter 5
measures both). REINFORCE estimates the expectation with a batch of samples and
takes a gradient step; as a loss to minimise:

    loss = -(1/B) sum_i sum_t mask_it * log pi(a_it | s_it) * (R_i - b_it)

The pieces, in the order the chapter uses them:

    BernoulliBandit, SoftmaxPolicy, analytic_gradient   the smallest problem, with an exact answer
    init_critic                                         a critic's starting point (the losses: `course_lib.core.losses`)
    RunningMeanBaseline, leave_one_out_baseline         baselines that need no network
    grad_variance, gradient_stats, flat_grad            how noisy is an estimate? repeat it and see
    gru_policy, sequence_logprobs                       the same on the code environment

`course_lib.gru.reinforce` trains the GRU by REINFORCE with these pieces, through the RL core's Trainer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np
import torch
import torch.nn as nn

from course_lib.core.rollout import written_rollout
from course_lib.gru.actor import GRUActor
from course_lib.gru.models import choose_next, next_token_mask

# -----------------------------------------------------------------------------
# a k-armed bandit: one step per episode, the exact gradient is known

class BernoulliBandit:
    """k slot machines; arm j pays 1 with probability means[j], else 0 (a test that passes or not)."""

    def __init__(self, means: Sequence[float], seed: int = 0):
        self.means = torch.as_tensor(means, dtype=torch.float64)
        if self.means.dim() != 1 or not ((self.means >= 0) & (self.means <= 1)).all():
            raise ValueError(f"means must be a list of probabilities in [0, 1], got {list(means)}")
        # numpy's generator, not torch's: a torch.Generator with the same seed as the policy's would
        # draw the very numbers the policy drew, and arm 0 would always pay (an easy bug to write)
        self.rng = np.random.default_rng(seed)

    @property
    def k(self) -> int:
        return len(self.means)

    def pull(self, arms: torch.Tensor) -> torch.Tensor:
        """arms [B] -> rewards [B] (float 0/1), one independent draw per pull."""
        u = torch.from_numpy(self.rng.random(tuple(arms.shape)))
        return (u < self.means[arms]).float()


class SoftmaxPolicy(nn.Module):
    """pi(j) = softmax(logits)_j: one learnable number per arm, all 0 at the start (uniform).

    runs=R holds R independent policies in one [R, k] tensor (R learners at once, one
    vectorised update; their parameters never mix).
    """

    def __init__(self, k: int, runs: int | None = None):
        super().__init__()
        self.logits = nn.Parameter(torch.zeros(k) if runs is None else torch.zeros(runs, k))

    def probs(self) -> torch.Tensor:
        return torch.softmax(self.logits, dim=-1)

    def sample(self, n: int, generator: torch.Generator | None = None):
        """n arms drawn from pi ([n], or [R, n]), and their log-probabilities (which carry the gradient)."""
        arms = torch.multinomial(self.probs().detach(), n, replacement=True, generator=generator)
        return arms, torch.log_softmax(self.logits, dim=-1).gather(-1, arms)


def analytic_gradient(probs: torch.Tensor, means: torch.Tensor) -> torch.Tensor:
    """The exact grad J of a softmax policy on a bandit: dJ/dlogit_j = pi_j * (mu_j - J), J = sum_j pi_j mu_j."""
    probs, means = probs.double(), means.double()
    return probs * (means - (probs * means).sum())


# -----------------------------------------------------------------------------
# the losses


@torch.no_grad()
def init_critic(model, value: float) -> None:
    """Make the value head predict `value` everywhere (weights 0, bias = value), e.g. the mean reward.

    An untrained head outputs a different random number at every token, and
    subtracting noise adds noise; starting from a constant it is a mean baseline
    that then learns.
    """
    model.value_head.weight.zero_()
    model.value_head.bias.fill_(float(value))


# -----------------------------------------------------------------------------
# baselines that need no network

class RunningMeanBaseline:
    """b = an exponential moving average of past rewards: b <- decay * b + (1 - decay) * mean(rewards).

    Use `value` for a batch BEFORE calling `update` with that batch's rewards, so the
    baseline never depends on the samples it is subtracted from (that keeps it unbiased).
    """

    def __init__(self, decay: float = 0.9, initial: float = 0.0):
        if not 0 <= decay < 1:
            raise ValueError(f"decay must be in [0, 1), got {decay}")
        self.decay, self.value, self.count = decay, torch.tensor(float(initial)), 0

    def update(self, rewards) -> torch.Tensor:
        """Fold in a batch's rewards ([B]; or [R, B] for R runs at once, giving R baselines)."""
        batch_mean = torch.as_tensor(rewards, dtype=torch.float32).mean(dim=-1)
        # the first batch replaces the initial guess instead of being averaged with it
        self.value = batch_mean if self.count == 0 else self.decay * self.value + (1 - self.decay) * batch_mean
        self.count += 1
        return self.value


def leave_one_out_baseline(rewards: torch.Tensor, group_size: int) -> torch.Tensor:
    """b_i = mean reward of the OTHER samples of the same task (consecutive groups of group_size).

    With several samples per task, the others' mean measures the task's difficulty
    without looking at sample i itself, so the estimate stays unbiased (RLOO;
    GRPO in chapter 10 is a close cousin).
    """
    rewards = torch.as_tensor(rewards)
    if group_size < 2 or len(rewards) % group_size:
        raise ValueError(f"need groups of at least 2 samples that divide the batch; got group_size={group_size} "
                         f"for {len(rewards)} rewards")
    groups = rewards.reshape(-1, group_size)
    others = (groups.sum(dim=1, keepdim=True) - groups) / (group_size - 1)
    return others.reshape(-1)


# -----------------------------------------------------------------------------
# how noisy is a gradient estimate?

@dataclass
class GradientStats:
    mean: torch.Tensor      # [P] the average estimate: close to the true gradient when unbiased
    variance: float         # E ||g - mean||^2: the sum over parameters of each one's variance
    n: int                  # how many estimates were compared

    @property
    def mean_norm(self) -> float:
        return float(self.mean.norm())


def flat_grad(loss: torch.Tensor, params: Sequence[torch.Tensor], retain_graph: bool = False) -> torch.Tensor:
    """The gradient of loss w.r.t. params, as one float64 vector (params without a gradient count as 0)."""
    grads = torch.autograd.grad(loss, list(params), allow_unused=True, retain_graph=retain_graph)
    return torch.cat([(torch.zeros_like(p) if g is None else g).reshape(-1).double() for p, g in zip(params, grads)])


def gradient_stats(grads: torch.Tensor) -> GradientStats:
    """Mean and total variance of n gradient estimates stacked as rows of grads [n, P]."""
    if len(grads) < 2:
        raise ValueError(f"a variance needs at least 2 estimates, got {len(grads)}")
    grads = grads.double()
    return GradientStats(mean=grads.mean(0), variance=float(grads.var(0).sum()), n=len(grads))


def grad_variance(loss_fn: Callable[[int], torch.Tensor], params: Sequence[torch.Tensor],
                  repeats: int) -> GradientStats:
    """Call loss_fn(r) for r = 0..repeats-1 (each a fresh batch), and measure the spread of their gradients.

    Returns the mean gradient and the total variance sum_p Var(g_p), the expected
    squared distance of one estimate from the mean. The true gradient is the mean
    of infinitely many estimates; the variance says how far one batch's estimate
    typically lands from it. (Memory: repeats x number of parameters.)
    """
    params = list(params)
    return gradient_stats(torch.stack([flat_grad(loss_fn(r), params) for r in range(repeats)]))


# -----------------------------------------------------------------------------
# the GRU of chapter 4 as a policy in the environment of chapter 3

def gru_policy(model, tokenizer, *, temperature: float = 1.0, greedy: bool = False,
               generator: torch.Generator | None = None):
    """A `course_lib.gru.batched_env.Policy` that samples each next token from the GRU.

    It reads the prompts once (prefill) on the first step of a batch, then feeds
    only the last written token (the GRU carries the rest in its hidden state), and
    samples from the logits restricted to the environment's action mask (and never
    <pad>/<bos>, like `models.generate`).
    """
    state: dict = {}
    device = model.embed.weight.device

    @torch.no_grad()
    def policy(batch) -> np.ndarray:
        if (batch.steps == 0).all():  # a new batch of episodes: read the prompts
            model.eval()
            prompts = [batch.tokens[i, :n].tolist() for i, n in enumerate(batch.lengths)]
            logits, _, state["hidden"] = model.prefill(prompts)
            state["mask"] = next_token_mask(model.config.vocab_size, tokenizer,
                                            np.flatnonzero(batch.action_mask), device)
        else:  # rows that are done repeat their last token; the environment ignores their action
            last = torch.as_tensor(batch.tokens[np.arange(len(batch)), batch.lengths - 1], device=device)
            logits, _, state["hidden"] = model.step(last, state["hidden"])
        logits = logits.masked_fill(~state["mask"], float("-inf"))
        return choose_next(logits, temperature=temperature, greedy=greedy, generator=generator).cpu().numpy()

    return policy


@dataclass
class SequenceScores:
    logprobs: torch.Tensor  # [B, T] log pi(a_t | s_t) of each written token (under the action mask)
    values: torch.Tensor    # [B, T] the critic's V(s_t), the state just before writing token t
    entropy: torch.Tensor   # [B, T] entropy of pi( . | s_t)
    mask: torch.Tensor      # [B, T] 1.0 on written tokens (<eos> included), 0.0 on padding


def sequence_logprobs(model, tokenizer, prompts: Sequence[str], completions: Sequence[Sequence[int]], *,
                      allowed_ids=None, temperature: float = 1.0) -> SequenceScores:
    """Score written completions with the model, WITH gradient (the sampler ran without it).

    completions are token ids as written (e.g. `Episode.actions`, <eos> included).
    allowed_ids and temperature must be those the tokens were sampled with: the
    policy that wrote them is softmax(logits / temperature) over the allowed ids
    only, so that is the pi whose log-probabilities REINFORCE needs.

    Each distinct prompt is read once (`prefill`, e.g. 8 samples of a task share it);
    its final state starts the GRU over the completions. The state before token t
    is the prompt's for t = 0 and the GRU's output after token t - 1 otherwise;
    gradients flow through both. Positions after a row's last token are padding
    and get mask 0. (The character-level PPO work log reports that its PPO read log-probs and values at
    padded positions until it was fixed, and the mask is that fix: reported there, not run here.)
    """
    ro = written_rollout(tokenizer, prompts, completions)
    allowed = next_token_mask(model.config.vocab_size, tokenizer, allowed_ids)
    # the same re-reading as PPO's (chapter 6): each distinct prompt once, then the GRU over the written ids
    actor = GRUActor(model, allowed=allowed, temperature=temperature)
    logprobs, entropy, values = actor.score(ro, torch.arange(len(completions)))
    return SequenceScores(logprobs=logprobs, values=values, entropy=entropy, mask=ro.mask)
