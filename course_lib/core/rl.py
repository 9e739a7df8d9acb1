"""The RL core: one update for every policy, the GRU of chapters 5-8 and the LoRA language model of 10-11.

An update learns from a `course_lib.core.rollout.Rollout` (the sampled ids, their log-probabilities
under the policy that sampled them, the critic's values if any, and each episode's reward on
its last token), whichever policy wrote it:

    Policy        what the core asks of a policy (`course_lib.core.update.Policy`): score(ro, rows) -> log pi(a_t),
                  entropy, V(s_t) of the rollout's own ids, with gradients; reference_logprobs(ro, rows) for a KL term
    advantages    per-token advantages and returns (`course_lib.core.advantages`), by one of four estimators:
                      "gae"       GAE(gamma, lambda) from the critic's values (PPO with a critic)
                      "baseline"  R - b(s_t), the baseline held in the rollout's values (chapter 5's REINFORCE:
                                  0, a running mean, leave-one-out, or a critic's V)
                      "batch"     R - the batch's mean reward, optionally divided by its std (REINFORCE, PPO without a critic)
                      "group"     R - the mean of its prompt's group, divided by the group's std (GRPO)
    METHODS       each method's parts: its estimator, loss, critic, KL term and teacher terms, the one table
                  that both policies' trainers and settings read
    learn         epochs of minibatches of one loss (`course_lib.core.update`): PPO's clipped surrogate (or
                  REINFORCE's -A log p) + value loss + entropy bonus + KL to a reference + the caller's extra terms
    Trainer       one step in the order of the maths: collect (rollout + reward) -> advantages -> learn -> record

`course_lib.gru.reinforce.ReinforceTrainer` (chapter 5's GRU), `course_lib.gru.trainer.PPOTrainer` (chapters 6-8)
and `course_lib.lm.llm_rl.LMTrainer` (the language model, chapters 10-11) are Trainers: they say how to
collect a rollout and what to log, and share `Trainer.step`, so a chapter swaps the policy, never the loop.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable

import torch

from course_lib.config import Config, coerce, option, require
from course_lib.core.advantages import advantages
from course_lib.core.rollout import Rollout
from course_lib.core.update import learn, sampler_correction

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
        self.rollout_splits = splits = coerce(self.__dataclass_fields__["rollout_splits"], self.rollout_splits,
                                              "the settings")  # "train,val" or ("train", "val") alike
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
        self.refuse_unused()

    def unused(self, method: str | None = None) -> dict[str, str]:
        """The settings a run by `method` (none: this one's) would not read: {name: why}. A policy's settings add
        their own."""
        name = method or self.method
        method = METHODS[name]
        why = {}
        if method.loss == "reinforce":
            why.update(epochs=f"{name} makes one pass of -A log p", clip_eps=f"{name}'s loss has no ratio to clip")
        if method.estimator != "gae":
            why["gae_lambda"] = f"{name}'s advantages are not GAE's"
        if not method.critic:
            why["vf_coef"] = f"{name} learns no critic"
        return why

    def with_method(self, method: str):
        """These settings for another method, to compare methods on one set of settings: what the method does not
        read (`unused`) returns to its default, and so does kl_coef when its loss has no KL term."""
        fields = self.__dataclass_fields__
        reset = set(self.unused(method))  # read before validating, which would refuse them
        if not METHODS[method].uses_kl:
            reset.add("kl_coef")
        return self.replace(method=method, **{name: fields[name].default for name in reset})

    def refuse_unused(self) -> None:
        """A setting the run would not read (`unused`) must keep its default: set to anything else, it is an
        error that names it, rather than a knob that silently does nothing."""
        fields = self.__dataclass_fields__
        for name, why in self.unused().items():
            default = fields[name].default
            require(getattr(self, name) == default,
                    f"{name}={getattr(self, name)!r}: {why}, so the setting would be ignored; leave it at its "
                    f"default ({default!r}) or choose a method that uses it")

    @property
    def kl_weight(self) -> float:
        """The KL term's weight this run uses: kl_coef, or the method's own (METHODS) when kl_coef is none."""
        return kl_weight(self.method, self.kl_coef)


# =====================================================================================
# The trainer: one step for every policy
# =====================================================================================

@dataclass(kw_only=True)
class StepInfo:
    """What `Trainer.collect` hands the step's other parts besides the Rollout.

    A policy's Trainer subclasses it with the fields its extra terms and its record read (the GRU's learning
    rate and explored programs, say); the core fills in these three as the step runs.
    """
    started: float = 0.0                         # time.perf_counter() when the step began
    sampler: dict = field(default_factory=dict)  # `sampler_correction`'s diagnostics ({} when the learner sampled)
    learn_s: float = 0.0                         # the seconds `learn` took


class Trainer:
    """One RL step, the same for every policy: collect -> advantages -> learn -> record.

    A subclass says what is particular to its policy; its __init__ sets
        model             the torch module trained (put in train mode while it learns, eval mode after)
        actor             the `Policy` that scores the rollout's ids for the loss
        loss_settings     `LossSettings`;  optimizer, params (what is clipped and stepped), rng (minibatch order)
        estimator         one of advantages.ESTIMATORS, with advantage_options (the keywords of `advantages`)
    and it gives
        collect()         1-2. sample episodes from the current policy and score them in the sandbox:
                          the Rollout, and a `StepInfo` of what the step's other parts need
        extra_terms(info) optional: the `add_terms` of `learn` (behaviour cloning, self-imitation, SFT)
        record(...)       5. the step's row of diagnostics
    """

    estimator: str = "gae"
    advantage_options: dict = {}
    backward: Callable[[torch.Tensor], None] | None = None  # None: loss.backward()
    sampler_cap: float = 0.0  # truncated importance sampling's cap when another engine samples (0: off)

    def collect(self) -> tuple[Rollout, StepInfo]:
        raise NotImplementedError

    def extra_terms(self, info: StepInfo) -> Callable[[torch.Tensor, dict], torch.Tensor] | None:
        return None

    def record(self, ro: Rollout, info: StepInfo, adv: torch.Tensor, returns: torch.Tensor, logs: list[dict],
               epochs_done: int, early_stop: bool) -> dict:
        raise NotImplementedError

    def step(self) -> dict:
        started = time.perf_counter()
        ro, info = self.collect()                                                    # 1-2. rollout, reward
        info.started = started
        adv, returns = advantages(ro, self.estimator, **self.advantage_options)      # 3. advantages
        weights, info.sampler = sampler_correction(ro, self.sampler_cap)
        if weights is not None:  # the sampler is not the learner: importance weights, truncated
            adv = adv * weights
        t = time.perf_counter()
        self.model.train()
        logs, epochs_done, early_stop = learn(self.actor, ro, adv, returns, self.loss_settings,  # 4. learn
                                              self.optimizer, self.params, self.rng,
                                              add_terms=self.extra_terms(info), backward=self.backward)
        self.model.eval()
        info.learn_s = time.perf_counter() - t
        return self.record(ro, info, adv, returns, logs, epochs_done, early_stop)    # 5. log
