"""The RL core: one update for every policy, the GRU of chapters 5-8 and the LoRA language model of 10-11.

An update learns from a `course_lib.core.rollout.Rollout` (the sampled ids, their log-probabilities
under the policy that sampled them, the critic's values if any, and each episode's reward on
its last token), whichever policy wrote it:

    Policy        what the core asks of a policy: score(ro, rows) -> log pi(a_t), entropy, V(s_t) of the
                  rollout's own ids, with gradients; reference_logprobs(ro, rows) for a KL term
    advantages    per-token advantages and returns (`course_lib.core.advantages`), by one of four estimators:
                      "gae"       GAE(gamma, lambda) from the critic's values (PPO with a critic)
                      "baseline"  R - b(s_t), the baseline held in the rollout's values (chapter 5's REINFORCE:
                                  0, a running mean, leave-one-out, or a critic's V)
                      "batch"     R - the batch's mean reward, optionally divided by its std (REINFORCE, PPO without a critic)
                      "group"     R - the mean of its prompt's group, divided by the group's std (GRPO)
    METHODS       each method's parts: its estimator, loss, critic, KL term and teacher terms, the one table
                  that both policies' trainers and settings read
    learn         epochs of minibatches of one loss: PPO's clipped surrogate (or REINFORCE's -A log p)
                  + value loss + entropy bonus + KL to a reference + whatever extra terms the caller adds
    Trainer       one step in the order of the maths: collect (rollout + reward) -> advantages -> learn -> record

`course_lib.gru.reinforce.ReinforceTrainer` (chapter 5's GRU), `course_lib.gru.trainer.PPOTrainer` (chapters 6-8)
and `course_lib.lm.llm_rl.LMTrainer` (the language model, chapters 10-11) are Trainers: they say how to
collect a rollout and what to log, and share `Trainer.step`, so a chapter swaps the policy, never the loop.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, Protocol

import numpy as np
import torch

from course_lib.config import Config, option, require
from course_lib.core.advantages import advantages, episode_advantages  # noqa: F401 (rl.episode_advantages: chapter 10)
from course_lib.core.losses import masked_mean, ppo_loss, reinforce_loss, value_loss
from course_lib.core.rollout import Rollout

LOSSES = ("clip", "reinforce")
ROLLOUT_SPLITS = ("train", "val")  # the splits whose tests may give reward; test is never trained on

@dataclass(frozen=True)
class Method:
    """What a method takes from the core, for either policy: the one place a method's parts are written down.

    estimator      how advantages are built (one of `course_lib.core.advantages.ESTIMATORS`)
    loss           the policy loss (one of LOSSES)
    critic         whether it learns a critic (a value head) on the returns
    normalise      whether the advantages are divided by their standard deviation (the batch's, or the group's)
    kl_coef        its own weight of KL(policy || reference), used when a run leaves kl_coef unset;
                   None: its loss has no KL term, so a run may not ask for one
    teacher_terms  whether a trainer adds its teacher terms (SFT on a teacher's and on its own best answers)
    """
    estimator: str
    loss: str
    critic: bool
    normalise: bool
    kl_coef: float | None
    teacher_terms: bool = False

    @property
    def uses_kl(self) -> bool:
        """Whether its loss has the KL term, so that a run may weigh it (kl_coef)."""
        return self.kl_coef is not None

    @property
    def grouped(self) -> bool:
        """Whether it compares several samples of the same prompt (its advantages are the group's)."""
        return self.estimator == "group"


METHODS = {
    # A = R - the batch's mean reward; one pass of -A log p, which has no KL term
    "reinforce": Method("batch", "reinforce", critic=False, normalise=False, kl_coef=None),
    # GAE from the critic's values, normalised; the clipped surrogate; no KL unless asked (the DeepSeek-Coder report's)
    "ppo": Method("gae", "clip", critic=True, normalise=True, kl_coef=0.0),
    # A = (R - its group's mean) / the group's std; the clipped surrogate + 0.05 KL (the teacher-guided GRPO README's)
    "grpo": Method("group", "clip", critic=False, normalise=True, kl_coef=0.05),
    # GRPO, plus SFT terms on a teacher's and its own best answers
    "teacher-grpo": Method("group", "clip", critic=False, normalise=True, kl_coef=0.05, teacher_terms=True),
}


def kl_weight(method: str, kl_coef: float | None) -> float:
    """The weight of the KL term a run uses: kl_coef, or the method's own when it is None (0: no KL term)."""
    return kl_coef if kl_coef is not None else METHODS[method].kl_coef or 0.0


def with_kl_weight(settings: dict) -> dict:
    """A dict of RLSettings' fields with kl_coef as the weight it stands for (none: the method's own), so that
    settings are compared by what the run does, not by how they were written."""
    return {**settings, "kl_coef": kl_weight(settings["method"], settings.get("kl_coef"))}


class Policy(Protocol):
    """A policy the core can train. rows index the rollout's episodes; every tensor returned is
    [len(rows), T], T = the longest of those episodes, and 0 on padding."""

    def score(self, ro: Rollout, rows: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
        """log pi(a_t | s_t) of the ids in ro.actions (with gradients), the entropy H_t (or None) and V(s_t) (or None)."""

    def reference_logprobs(self, ro: Rollout, rows: torch.Tensor) -> torch.Tensor:
        """log pi_ref(a_t | s_t) under the frozen reference policy, without gradients: the same numbers
        for the same rows whenever asked, with no randomness (`learn` asks once per set of rows)."""


# =====================================================================================
# Settings: the core's knobs, declared once for every trainer's command
# =====================================================================================

@dataclass
class RLSettings(Config):
    """The knobs of the RL core that both policies' settings share: `course_lib.gru.ppo_config.PPOConfig` (the GRU)
    and `course_lib.lm.llm_rl.RLConfig` (the language model) extend it, and give their own default where the
    policy wants another (`course_lib.config.override`). Each knob has one help text and one check."""
    method: str = option("ppo", "how the update is built (METHODS): ppo: a critic, GAE and the clipped loss; "
                                "grpo: A = (R - the mean of the task's group of samples) / the group's std, the "
                                "clipped loss, no critic (critic, gae_lambda and vf_coef unused); reinforce: A = R - "
                                "the batch's mean, one pass of -A log p (no clip, entropy bonus, KL or early stop); "
                                "teacher-grpo: grpo with the teacher terms", choices=tuple(METHODS))
    seed: int = option(0, "seeds the run's random draws (the task order, the sampling, the minibatch order): "
                          "same seed, same run on CPU")
    temperature: float = option(1.0, "rollout sampling temperature, softmax(logits / T) (> 0; above 1 explores more); "
                                     "the loss's log-probabilities use the same T")
    max_new_tokens: int = option(64, "a completion is cut after this many tokens without <eos>")
    lr: float = option(1e-3, "learning rate of the trained parameters (the GRU: Adam, the peak of a warm-up and "
                             "cosine decay; the language model: AdamW, constant)")
    epochs: int = option(2, "passes over each rollout batch; REINFORCE makes one, since its data is on-policy only "
                            "before its first step")
    clip_eps: float = option(0.2, "the clip of ppo and grpo: the ratio pi_new / pi_old is clipped to [1 - eps, "
                                  "1 + eps], so one batch cannot move the policy far")
    gae_lambda: float = option(0.95, "GAE lambda (with a critic): 0 one-step TD (biased, low variance), 1 Monte Carlo")
    vf_coef: float = option(0.5, "weight of the value loss (with a critic)")
    kl_coef: float | None = option(None, "weight of KL(policy || reference: the frozen starting policy), which keeps "
                                         "the policy near what it learnt before RL; 0: off; none: the method's own ("
                                         + ", ".join(f"{n} {m.kl_coef:g}" for n, m in METHODS.items() if m.uses_kl)
                                         + "); reinforce's loss has no KL term", float, nullable=True)
    group_size: int = option(4, "samples (episodes) per drawn task: its group, which grpo's advantages compare "
                                "with each other (at least 2 there); the prompt is read once for all of them")
    max_grad_norm: float = option(1.0, "global gradient-norm clip: the gradient of all the trained parameters "
                                       "together is scaled down to this norm when above it")
    sandbox_timeout: float = option(2.0, "seconds one program may run in the sandbox")
    rollout_splits: tuple = option(ROLLOUT_SPLITS, "splits whose tasks are rolled out for reward: train, val "
                                                   "(comma- or space-separated); test is refused (never trained on)")

    def validate(self) -> None:
        require(self.method in METHODS, f"unknown method {self.method!r}; choose one of {tuple(METHODS)}")
        for name in ("epochs", "max_new_tokens", "group_size"):
            require(getattr(self, name) >= 1, f"{name} must be at least 1, got {getattr(self, name)}")
        for name in ("lr", "clip_eps", "max_grad_norm", "sandbox_timeout"):
            require(getattr(self, name) > 0, f"{name} must be positive, got {getattr(self, name)}")
        require(not METHODS[self.method].grouped or self.group_size >= 2,
                f"{self.method} compares the samples of the same task: group_size must be >= 2, got {self.group_size}")
        splits = self.rollout_splits
        self.rollout_splits = splits = tuple(str(x).strip() for x in (splits.split(",") if isinstance(splits, str)
                                                                      else splits) if str(x).strip())
        require(splits, "rollout_splits: name at least one split to roll out, e.g. train,val")
        require(set(splits) <= set(ROLLOUT_SPLITS),
                f"rollout_splits={','.join(splits)}: only train and val may give reward; test tasks are never trained "
                "on (they measure generalisation)" if "test" in splits else
                f"rollout_splits={','.join(splits)}: unknown split; choose among {', '.join(ROLLOUT_SPLITS)}")
        require(self.temperature > 0, f"rollouts must sample: temperature must be positive (greedy decoding is for "
                                      f"evaluation), got {self.temperature}")
        require(self.vf_coef >= 0, f"vf_coef must be >= 0, got {self.vf_coef}")
        require(self.kl_coef is None or self.kl_coef >= 0, f"kl_coef must be >= 0 (or none), got {self.kl_coef}")
        require(METHODS[self.method].uses_kl or not self.kl_coef,
                f"kl_coef={self.kl_coef}: {self.method}'s loss has no KL term, so the setting would be ignored; leave "
                f"kl_coef unset (none) or 0, or choose a method with one: "
                f"{', '.join(n for n, m in METHODS.items() if m.uses_kl)}")
        require(0 <= self.gae_lambda <= 1, f"gae_lambda must be in [0, 1], got {self.gae_lambda}")

    @property
    def kl_weight(self) -> float:
        """The KL term's weight this run uses: kl_coef, or the method's own (METHODS) when kl_coef is none."""
        return kl_weight(self.method, self.kl_coef)


# =====================================================================================
# Learning: epochs of minibatches of one loss
# =====================================================================================

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
    target_kl: float | None = None      # stop the epochs once approx-KL passes this; None: never
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
    (a multi-process run averages gradients there). The epochs stop early when approx-KL > target_kl.
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


# =====================================================================================
# The trainer: one step for every policy
# =====================================================================================

class Trainer:
    """One RL step, the same for every policy: collect -> advantages -> learn -> record.

    A subclass says what is particular to its policy; its __init__ sets
        model             the torch module trained (put in train mode while it learns, eval mode after)
        actor             the `Policy` that scores the rollout's ids for the loss
        loss_settings     `LossSettings`;  optimizer, params (what is clipped and stepped), rng (minibatch order)
        estimator         one of advantages.ESTIMATORS, with advantage_options (the keywords of `advantages`)
    and it gives
        collect()         1-2. sample episodes from the current policy and score them in the sandbox:
                          the Rollout, and a dict of what the step's other parts need (its context)
        extra_terms(ctx)  optional: the `add_terms` of `learn` (behaviour cloning, self-imitation, SFT)
        record(...)       5. the step's row of diagnostics
    """

    estimator: str = "gae"
    advantage_options: dict = {}
    backward: Callable[[torch.Tensor], None] | None = None  # None: loss.backward()
    sampler_cap: float = 0.0  # truncated importance sampling's cap when another engine samples (0: off)

    def collect(self) -> tuple[Rollout, dict]:
        raise NotImplementedError

    def extra_terms(self, ctx: dict) -> Callable[[torch.Tensor, dict], torch.Tensor] | None:
        return None

    def record(self, ro: Rollout, ctx: dict, adv: torch.Tensor, returns: torch.Tensor, logs: list[dict],
               epochs_done: int, early_stop: bool) -> dict:
        raise NotImplementedError

    def step(self) -> dict:
        ctx_start = time.perf_counter()
        ro, ctx = self.collect()                                                     # 1-2. rollout, reward
        ctx["started"] = ctx_start
        adv, returns = advantages(ro, self.estimator, **self.advantage_options)      # 3. advantages
        weights, ctx["sampler"] = sampler_correction(ro, self.sampler_cap)
        if weights is not None:  # the sampler is not the learner: importance weights, truncated
            adv = adv * weights
        t = time.perf_counter()
        self.model.train()
        logs, epochs_done, early_stop = learn(self.actor, ro, adv, returns, self.loss_settings,  # 4. learn
                                              self.optimizer, self.params, self.rng,
                                              add_terms=self.extra_terms(ctx), backward=self.backward)
        self.model.eval()
        ctx["learn_s"] = time.perf_counter() - t
        return self.record(ro, ctx, adv, returns, logs, epochs_done, early_stop)     # 5. log
