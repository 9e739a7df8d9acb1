"""The PPO trainer: a GRU policy learns, by reinforcement, to write functions that pass tests (chapter 6).

    python -m course_lib ppo --seed 0 --out runs/ppo/seed0        # pretrain, then PPO, then evaluate
    python -m course_lib eval --checkpoint runs/ppo/seed0/policy.pt

The maths lives in `course_lib.ppo` (GAE, the clipped loss, the diagnostics);
this module is the loop around it. One *update* is, in the order of the maths:

    1. ROLLOUT   sample B episodes of the tasks in lockstep with the action mask,
                 recording each token's log-probability and the critic's value
    2. REWARD    one sandbox batch scores every program; the reward (`reward`: a spec of
                 course_lib.rewards terms, chapter 7) sits on the last token
    3. GAE       advantages and returns (optionally bootstrapping episodes cut by the length limit)
    4. LEARN     a few epochs of minibatches of the clipped PPO loss, with gradient-norm
                 clipping, a warm-up + cosine learning rate, and an early stop when the
                 approximate KL to the rollout policy grows past `target_kl`
    5. LOG       one line per update to metrics.jsonl: reward, pass rates, approx-KL,
                 clip fraction, explained variance, entropy, ratio, losses, learning rate

Which tasks are rolled out: `train` and `val` (val: its TESTS give the reward; its
solutions are never read). `test` tasks are never rolled out; only the final
evaluation sees them. Two optional teacher terms are added to the PPO loss
(chapter 8 studies them): behaviour cloning on the TRAIN solutions (so RL does not
make the policy forget what it knew) and self-imitation of the policy's OWN samples
that passed every test (so a program found once by sampling is kept). Teacher
*episodes* (course_lib.teacher) add known-good programs to each update's batch, and
`bc_schedule` fades the behaviour-cloning weight over the run. Exploration (course_lib.explore,
chapter 6) searches near the greedy program for the val tasks no program has passed yet:
its epsilon-greedy episodes feed self-imitation only, never the PPO loss.

Everything a run needs to continue is saved in ``OUT/train_state.pt``: a run stopped
and resumed writes the same metrics as one that never stopped (CPU, same seed).
"""

from __future__ import annotations

import copy
import dataclasses
import json
import math
import random
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from course_lib import rl
from course_lib.ppo import explained_variance, warmup_cosine
from course_lib.rollout import GRUActor, TaskSampler, collect_rollout
from course_lib.teacher import (BC_SCHEDULES, TEACHER_SOURCES, PassingPrograms, bc_weight, draw_teacher,
                                merge_rollouts, teacher_losses, teacher_pool, teacher_rollout)

STATE_FILE = "train_state.pt"        # everything needed to resume
POLICY_FILE = "policy.pt"            # the trained policy, a course checkpoint (load_checkpoint reads it)
PRETRAINED_FILE = "pretrained.pt"    # the starting point, a course checkpoint
METRICS_FILE = "metrics.jsonl"
CONFIG_FILE = "config.json"
CHECKPOINT_DIR = "checkpoints"       # OUT/checkpoints/update_NNNN.pt: the last keep_checkpoints states
PLOT_FILE = "training.png"           # the run's curves, drawn at the end (course_lib.plots)
EVAL_FILE = "eval.json"
TIMING_KEYS = ("wall_s", "rollout_s", "explore_s", "learn_s", "tokens_per_s")  # differ between two runs of the same seed


class ConfigError(ValueError):
    """A hyperparameter has a value the trainer cannot use. The message says which and why."""


# =====================================================================================
# Hyperparameters: every knob in one place, each with its one-line help
# =====================================================================================

def _opt(default, help: str, type=None, choices=None):
    return field(default=default, metadata={"help": help, "type": type or builtins_type(default),
                                            "choices": choices})


def builtins_type(value):
    return {bool: bool, int: int, float: float, str: str}.get(type(value), str)


@dataclass
class PPOConfig:
    # --- the run -----------------------------------------------------------------
    seed: int = _opt(0, "seeds torch, numpy and python's random: same seed, same run (on CPU)")
    pretrained: str | None = _opt(None, "course checkpoint to start from; none: pretrain first (chapter 4)", str)
    tasks_dir: str | None = _opt(None, "folder of task TOML files, or one .jsonl/.parquet file; none: the course's tasks/", str)
    task_fields: str | None = _opt(None, "for a .jsonl/.parquet tasks file: field renames ours=theirs, e.g. "
                                         "'prompt=question,solution=answer'", str)
    rl_splits: str = _opt("train,val", "splits rolled out for reward (comma-separated); 'test' is refused")
    threads: int = _opt(2, "torch CPU threads for the network (the sandbox runs between its steps, not beside "
                           "them); two runs side by side on 2 cores: 1 each")
    # --- pretraining (only when no --pretrained) ----------------------------------
    hidden_dim: int | None = _opt(None, "GRU memory size; none: 256 when pretraining, the checkpoint's with --pretrained", int)
    embed_dim: int | None = _opt(None, "size of each token's vector; none: 64 when pretraining, the checkpoint's", int)
    pretrain_regime: str = _opt("memorise", "pretraining data, see course_lib.pretrain", choices=("memorise", "broad"))
    pretrain_epochs: int = _opt(150, "passes over the pretraining data")
    pretrain_lr: float = _opt(1e-2, "pretraining learning rate (cosine-decayed)")
    pretrain_batch_size: int = _opt(64, "examples per pretraining batch (64: all 46 train tasks in one batch)")
    # --- rollouts -------------------------------------------------------------------
    updates: int = _opt(20, "number of PPO updates (rollout + learning) in the run")
    episodes_per_update: int = _opt(128, "episodes sampled in lockstep per update (B)")
    episodes_per_task: int = _opt(8, "episodes per drawn task (its prompt is read once for all of them)")
    temperature: float = _opt(1.5, "sampling temperature of the rollout policy softmax(logits / T); > 1 explores more")
    max_new_tokens: int = _opt(160, "an episode is truncated after this many tokens without <eos>")
    unsolved_weight: float = _opt(1.0, "task sampling: 0 uniform; 1 weight each task by 1 - its recent pass rate")
    min_task_weight: float = _opt(0.05, "task sampling: floor on a task's weight, so solved tasks are still visited")
    train_share: float = _opt(0.25, "task sampling: share of each update's tasks drawn from train (the rest: val)")
    sandbox_timeout: float = _opt(2.0, "seconds one program may run in the sandbox")
    reward: str = _opt("fraction=1", "reward terms and weights (chapter 7, course_lib.rewards), e.g. "
                                     "'pass=1,fraction=0.5,syntax=0.1,length=0.002,quality=0.1'")
    # --- GAE ------------------------------------------------------------------------
    gamma: float = _opt(1.0, "discount per token (1: a program is worth its reward however long)")
    gae_lambda: float = _opt(0.95, "GAE lambda: 0 one-step TD (biased, low variance), 1 Monte Carlo")
    critic: bool = _opt(True, "learn V(s) and build advantages from it by GAE; off: no value loss, V = 0, so "
                              "every token's advantage is its episode's return (normalised: a batch baseline)")
    bootstrap_truncated: bool = _opt(False, "add gamma * V(next state) after an episode cut by max_new_tokens "
                                            "(off: CodeGenEnv pays the cut program in full at the cut)")
    # --- the PPO loss ----------------------------------------------------------------
    clip_eps: float = _opt(0.2, "policy clipping: the ratio pi_new / pi_old is clipped to [1 - eps, 1 + eps]")
    value_clip_eps: float | None = _opt(0.2, "value clipping around the rollout's values; none: unclipped", float)
    ppo_coef: float = _opt(1.0, "weight of the whole PPO objective (clipped policy loss, value loss, entropy, KL); "
                                "0 leaves behaviour cloning, self-imitation and exploration alone (an ablation)")
    vf_coef: float = _opt(0.5, "weight of the value loss")
    ent_coef: float = _opt(0.01, "weight of the entropy bonus (more: more exploration)")
    norm_adv: bool = _opt(True, "normalise advantages to zero mean, unit variance per update")
    kl_coef: float = _opt(0.0, "weight of KL(policy || frozen pretrained policy); 0: off")
    # --- optimisation ---------------------------------------------------------------
    epochs: int = _opt(2, "passes over each update's episodes")
    minibatch_size: int = _opt(64, "episodes per gradient step")
    lr: float = _opt(3e-3, "peak learning rate (Adam)")
    warmup_updates: int = _opt(3, "updates of linear learning-rate warm-up")
    min_lr_ratio: float = _opt(0.1, "the cosine decays the learning rate to lr * min_lr_ratio")
    max_grad_norm: float = _opt(1.0, "global gradient-norm clipping")
    target_kl: float | None = _opt(0.05, "stop an update's epochs once approx-KL exceeds this; none: never", float)
    # --- teacher terms (chapter 8) -----------------------------------------------------
    bc_coef: float = _opt(2.0, "weight of behaviour cloning on TRAIN solutions (keeps what pretraining taught)")
    sil_coef: float = _opt(0.5, "weight of self-imitation: cross-entropy on the policy's own passing programs")
    teacher_batch_size: int = _opt(32, "examples per gradient step for the two terms above")
    sil_per_task: int = _opt(4, "self-imitation keeps at most this many passing programs per task (the shortest)")
    bc_schedule: str = _opt("constant", "how bc_coef fades over the updates", choices=BC_SCHEDULES)
    bc_final: float = _opt(0.0, "with a fading bc_schedule: the last update's weight is bc_coef * bc_final")
    teacher_source: str = _opt("off", "teacher episodes: train reference solutions, the pretrained policy's passing "
                                       "greedy programs, or both", choices=TEACHER_SOURCES)
    teacher_episodes: int = _opt(0, "teacher programs added to each update's batch as extra episodes (0: none)")
    # --- exploration near the greedy program (course_lib.explore) ---------------------------
    explore_episodes: int = _opt(512, "epsilon-greedy episodes per update on the val tasks no program has passed "
                                      "yet; what passes goes to self-imitation, never to the PPO loss (0: none)")
    explore_epsilon: float = _opt(0.03, "chance per token that an exploring episode leaves the greedy choice")
    explore_temperature: float = _opt(1.0, "temperature of the token drawn when it leaves the greedy choice")
    # --- logging and saving --------------------------------------------------------------
    eval_every: int = _opt(5, "greedy pass rates on train and val every this many updates (0: never)")
    save_every: int = _opt(10, "write train_state.pt every this many updates (and at the end)")
    keep_checkpoints: int = _opt(0, "also keep each save as checkpoints/update_NNNN.pt, the last this many (0: none)")
    plots: bool = _opt(True, "draw training.png (reward, pass rate, KL, entropy, clip fraction, EV) at the end")

    def __post_init__(self):
        self.validate()

    # -- helpers ------------------------------------------------------------------------
    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict, where: str = "the config") -> "PPOConfig":
        known = {f.name: f for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - set(known))
        if unknown:
            raise ConfigError(f"{where}: unknown setting(s) {unknown}; known: {sorted(known)}")
        values = {}
        for name, value in data.items():
            values[name] = _coerce(known[name], value, where)
        config = cls(**values)
        config.validate()
        return config

    def save(self, path) -> None:
        Path(path).write_text(json.dumps(self.to_dict(), indent=1) + "\n")

    @classmethod
    def load(cls, path) -> "PPOConfig":
        try:
            data = json.loads(Path(path).read_text())
        except FileNotFoundError:
            raise ConfigError(f"config file {path} does not exist") from None
        except json.JSONDecodeError as e:
            raise ConfigError(f"config file {path} is not valid JSON: {e}") from None
        if not isinstance(data, dict):
            raise ConfigError(f"config file {path}: expected a JSON object of settings")
        return cls.from_dict(data, where=str(path))

    def replace(self, **changes) -> "PPOConfig":
        config = dataclasses.replace(self, **changes)
        config.validate()
        return config

    @property
    def splits(self) -> tuple[str, ...]:
        return tuple(s.strip() for s in self.rl_splits.split(",") if s.strip())

    def validate(self) -> None:
        def need(ok, msg):
            if not ok:
                raise ConfigError(msg)
        splits = self.splits
        need(splits, "rl_splits: name at least one split to roll out, e.g. 'train,val'")
        need(set(splits) <= {"train", "val"},
             f"rl_splits={self.rl_splits!r}: only 'train' and 'val' may give reward; 'test' tasks are never "
             "trained on (they measure generalisation)" if "test" in splits else
             f"rl_splits={self.rl_splits!r}: unknown split; choose among 'train' and 'val'")
        for name in ("hidden_dim", "embed_dim"):
            need(getattr(self, name) is None or getattr(self, name) >= 1, f"{name} must be at least 1 or none")
        for name in ("updates", "episodes_per_update", "epochs", "minibatch_size", "max_new_tokens",
                     "pretrain_epochs", "pretrain_batch_size", "teacher_batch_size",
                     "sil_per_task", "episodes_per_task", "threads"):
            need(getattr(self, name) >= 1, f"{name} must be at least 1, got {getattr(self, name)}")
        for name in ("lr", "pretrain_lr", "temperature", "clip_eps", "max_grad_norm", "sandbox_timeout"):
            need(getattr(self, name) > 0, f"{name} must be positive, got {getattr(self, name)}")
        for name in ("ppo_coef", "vf_coef", "ent_coef", "kl_coef", "bc_coef", "sil_coef", "unsolved_weight",
                     "min_task_weight", "warmup_updates", "eval_every"):
            need(getattr(self, name) >= 0, f"{name} must be >= 0, got {getattr(self, name)}")
        need(0 <= self.train_share <= 1, f"train_share must be in [0, 1], got {self.train_share}")
        from course_lib.rewards import RewardSpec, RewardSpecError
        try:
            RewardSpec.parse(self.reward)
        except RewardSpecError as e:
            raise ConfigError(f"reward: {e}") from None
        need(0 <= self.gamma <= 1, f"gamma must be in [0, 1], got {self.gamma}")
        need(0 <= self.gae_lambda <= 1, f"gae_lambda must be in [0, 1], got {self.gae_lambda}")
        need(0 < self.min_lr_ratio <= 1, f"min_lr_ratio must be in (0, 1], got {self.min_lr_ratio}")
        need(self.minibatch_size <= self.episodes_per_update,
             f"minibatch_size ({self.minibatch_size}) cannot exceed episodes_per_update ({self.episodes_per_update})")
        need(self.episodes_per_update % self.episodes_per_task == 0,
             f"episodes_per_update ({self.episodes_per_update}) must be a multiple of episodes_per_task "
             f"({self.episodes_per_task})")
        need(self.value_clip_eps is None or self.value_clip_eps > 0, "value_clip_eps must be positive or none")
        need(self.target_kl is None or self.target_kl > 0, "target_kl must be positive or none")
        need(self.save_every >= 1, f"save_every must be at least 1, got {self.save_every}")
        need(self.keep_checkpoints >= 0, f"keep_checkpoints must be >= 0, got {self.keep_checkpoints}")
        need(self.teacher_episodes >= 0, f"teacher_episodes must be >= 0, got {self.teacher_episodes}")
        need(self.teacher_source in TEACHER_SOURCES,
             f"teacher_source must be one of {TEACHER_SOURCES}, got {self.teacher_source!r}")
        need((self.teacher_source == "off") == (self.teacher_episodes == 0),
             f"teacher_source={self.teacher_source!r} with teacher_episodes={self.teacher_episodes}: set both "
             "(e.g. --teacher-source reference --teacher-episodes 16) or neither")
        need(self.explore_episodes >= 0, f"explore_episodes must be >= 0, got {self.explore_episodes}")
        need(0 <= self.explore_epsilon <= 1, f"explore_epsilon is a probability per token; got "
             f"{self.explore_epsilon}, try 0.04")
        need(self.explore_temperature > 0, f"explore_temperature must be positive, got {self.explore_temperature}")
        need(self.bc_schedule in BC_SCHEDULES, f"bc_schedule must be one of {BC_SCHEDULES}, got {self.bc_schedule!r}")
        need(0 <= self.bc_final <= 1, f"bc_final must be in [0, 1], got {self.bc_final}")
        need(self.pretrain_regime in ("memorise", "broad"),
             f"pretrain_regime must be 'memorise' or 'broad', got {self.pretrain_regime!r}")


def _coerce(f: dataclasses.Field, value, where: str):
    """A JSON or command-line value to the field's type, or a ConfigError that names the field."""
    typ = f.metadata["type"]
    if value is None or (isinstance(value, str) and value.lower() in ("none", "null")):
        if f.default is None or f.name in ("value_clip_eps", "target_kl"):
            return None
        raise ConfigError(f"{where}: {f.name} cannot be none")
    try:
        if typ is bool:
            if isinstance(value, bool):
                return value
            if isinstance(value, str) and value.lower() in ("true", "yes", "1", "false", "no", "0"):
                return value.lower() in ("true", "yes", "1")
            raise ValueError
        if typ is int and isinstance(value, float) and not value.is_integer():
            raise ValueError
        if typ in (int, float) and isinstance(value, bool):
            raise ValueError
        return typ(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{where}: {f.name} expects {typ.__name__}, got {value!r}") from None


# The teacher terms (behaviour cloning, self-imitation, teacher episodes) live in course_lib.teacher.


# =====================================================================================
# Evaluation: greedy pass rates per split and novelty
# =====================================================================================

def evaluate_policy(model, tokenizer, tasks, *, allowed_ids, max_new_tokens: int = 160,
                    timeout: float = 2.0) -> dict:
    """Greedy decoding on every task; the pass rate of each split (and near/far), and each task's result."""
    from course_lib.models import generate
    from course_lib.sandbox import run_tests_batch

    tasks = list(tasks)
    completions = generate(model, tokenizer, [t.prompt for t in tasks], max_new_tokens=max_new_tokens,
                           greedy=True, allowed_ids=allowed_ids)
    reports = run_tests_batch([(t.program(c), t.tests) for t, c in zip(tasks, completions)], timeout=timeout)
    per_task = [{"id": t.id, "split": t.split, "novelty": t.novelty, "passed": r.all_passed,
                 "fraction": round(r.fraction, 4), "status": getattr(r.status, "value", str(r.status)),
                 "completion": c} for t, c, r in zip(tasks, completions, reports)]
    out = {}
    for split in ("train", "val", "test"):
        for novelty in (None, "near", "far"):
            rows = [r for r in per_task if r["split"] == split and (novelty is None or r["novelty"] == novelty)]
            if rows:
                key = f"{split}_pass_rate" if novelty is None else f"{split}_{novelty}_pass_rate"
                out[key] = round(sum(r["passed"] for r in rows) / len(rows), 4)
    out["per_task"] = per_task
    return out


# =====================================================================================
# The trainer
# =====================================================================================

class PPOTrainer:
    """Holds the policy, optimiser, sampler and logs of one run; `train()` runs the updates.

    out_dir: where config.json, metrics.jsonl, train_state.pt, policy.pt and eval.json go
    (None: nothing is written; metrics stay in `self.metrics`).
    """

    def __init__(self, config: PPOConfig, out_dir=None, *, model=None, tokenizer=None, tasks=None,
                 progress: bool = True, log=print):
        from course_lib.env import action_alphabet
        from course_lib.pretrain import pretraining_texts
        from course_lib.tasks import load_tasks
        from course_lib.tokenizers import course_tokenizer

        config.validate()
        self.config, self.progress, self.log = config, progress, log
        self.out = Path(out_dir) if out_dir is not None else None
        self.started = time.perf_counter()
        self.wall_offset = 0.0  # seconds spent before a resume
        torch.set_num_threads(config.threads)
        random.seed(config.seed)
        np.random.seed(config.seed)
        torch.manual_seed(config.seed)

        self.tasks = (list(tasks) if tasks is not None
                      else load_tasks(tasks_dir=config.tasks_dir, fields=config.task_fields))
        self.tasks_by_id = {t.id: t for t in self.tasks}
        self.rl_tasks = [t for t in self.tasks if t.split in config.splits]
        if not self.rl_tasks:
            raise ConfigError(f"no tasks of splits {config.splits} to roll out")
        self.tokenizer = tokenizer if tokenizer is not None else course_tokenizer()
        self.alphabet = action_alphabet(self.tasks, self.tokenizer)
        self.allowed = torch.zeros(len(self.tokenizer), dtype=torch.bool)
        self.allowed[torch.as_tensor(self.alphabet)] = True

        # The starting policy: given, loaded, or pretrained here (chapter 4).
        self.pretrain_seconds = 0.0
        if model is None:
            model = self._starting_policy()
        self.model = model
        self.reference = None
        if config.kl_coef > 0:  # a frozen copy of the start, for KL(pi || pi_ref)
            self.reference = copy.deepcopy(model).eval().requires_grad_(False)
        # What the RL core (course_lib.rl) trains and how: the same core trains chapter 10's language model.
        self.actor = GRUActor(self.model, allowed=self.allowed, temperature=config.temperature,
                              reference=self.reference)
        self.loss_settings = rl.LossSettings(
            loss="clip", epochs=config.epochs, minibatch_size=config.minibatch_size, clip_eps=config.clip_eps,
            critic=config.critic, value_clip_eps=config.value_clip_eps, vf_coef=config.vf_coef,
            ent_coef=config.ent_coef, kl_coef=config.kl_coef, target_kl=config.target_kl,
            max_grad_norm=config.max_grad_norm, scale=config.ppo_coef)

        # BC examples come from TRAIN tasks only (task_examples refuses any other split).
        self.bc_examples = (pretraining_texts("memorise", tasks=self.tasks, tokenizer=self.tokenizer)
                            if config.bc_coef > 0 else [])
        self.passing = PassingPrograms(config.sil_per_task)
        # The reward (chapter 7): the spec's weighted terms; every built-in term is also logged.
        from course_lib.rewards import BUILTIN_TERMS, ShapedReward
        self.reward = ShapedReward(config.reward, log_also=BUILTIN_TERMS)
        self.sampler = TaskSampler(self.rl_tasks, seed=config.seed, unsolved_weight=config.unsolved_weight,
                                   min_weight=config.min_task_weight, train_share=config.train_share)
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=config.lr, eps=1e-5)
        self.sample_generator = torch.Generator().manual_seed(config.seed)
        self.rng = np.random.default_rng(config.seed + 1)  # minibatch order, teacher batches
        # Teacher episodes (chapter 8): a fixed pool of passing programs, built from the START policy.
        self.teacher_rng = np.random.default_rng(config.seed + 2)  # its own stream: the rest is unchanged
        self.explore_generator = torch.Generator().manual_seed(config.seed + 3)  # so is exploration's
        self.teacher_pool = []
        if config.teacher_episodes > 0:
            self.teacher_pool = teacher_pool(config.teacher_source, self.rl_tasks, model=self.model,
                                             tokenizer=self.tokenizer, allowed_ids=self.alphabet,
                                             max_new_tokens=config.max_new_tokens, timeout=config.sandbox_timeout,
                                             reward_fn=self.reward)
            self.reward.drain()  # the pool's scores are not an update's episodes
            if not self.teacher_pool:
                raise ConfigError(f"teacher_source={config.teacher_source!r} found no passing program to teach")
        self.update = 0
        self.metrics: list[dict] = []

    # -- setup ----------------------------------------------------------------------
    def _starting_policy(self):
        from course_lib.checkpoints import CheckpointMismatchError, load_checkpoint, save_checkpoint
        from course_lib.models import GRUConfig, GRUPolicy
        from course_lib.pretrain import pretrain, pretraining_texts

        c = self.config
        if c.pretrained:
            if not Path(c.pretrained).exists():
                raise ConfigError(f"pretrained checkpoint {c.pretrained} does not exist; omit --pretrained "
                                  "to pretrain from scratch, or run chapter 4's notebook to create it")
            model, _, _ = load_checkpoint(c.pretrained, tokenizer=self.tokenizer)
            for name in ("hidden_dim", "embed_dim"):
                wanted, saved = getattr(c, name), getattr(model.config, name)
                if wanted is not None and wanted != saved:
                    raise CheckpointMismatchError(
                        f"{c.pretrained} has {name}={saved} but the settings ask for {name}={wanted}; drop "
                        f"--{name.replace('_', '-')} (the checkpoint decides) or pretrain a new model without --pretrained")
            return model
        start = time.perf_counter()
        model = GRUPolicy(GRUConfig(len(self.tokenizer), embed_dim=c.embed_dim or 64, hidden_dim=c.hidden_dim or 256))
        examples = pretraining_texts(c.pretrain_regime, tasks=self.tasks, tokenizer=self.tokenizer)
        pretrain(model, self.tokenizer, examples, epochs=c.pretrain_epochs, lr=c.pretrain_lr,
                 batch_size=c.pretrain_batch_size, seed=c.seed, progress=self.progress)
        self.pretrain_seconds = time.perf_counter() - start
        if self.out is not None:
            save_checkpoint(self.out / PRETRAINED_FILE, model, self.tokenizer,
                            extra={"alphabet": self.alphabet.tolist(), "pretrain_seconds": self.pretrain_seconds,
                                   "config": c.to_dict()})
        return model

    def wall(self) -> float:
        return self.wall_offset + time.perf_counter() - self.started

    # -- one update, in the order of the maths ----------------------------------------------
    def step(self) -> dict:
        c = self.config
        stats: dict = {"update": self.update}
        lr = c.lr * warmup_cosine(self.update, c.updates, c.warmup_updates, c.min_lr_ratio)
        for group in self.optimizer.param_groups:
            group["lr"] = lr

        # 1-2. ROLLOUT and REWARD
        t0 = time.perf_counter()
        tasks = self.sampler.draw(c.episodes_per_update // c.episodes_per_task, c.episodes_per_task)
        ro = collect_rollout(self.model, self.tokenizer, tasks, allowed=self.allowed, temperature=c.temperature,
                             max_new_tokens=c.max_new_tokens, generator=self.sample_generator,
                             timeout=c.sandbox_timeout, bootstrap_truncated=c.bootstrap_truncated,
                             reward_fn=self.reward)
        term_rows = self.reward.drain()[-len(tasks):]  # each episode's reward terms, unweighted
        self.sampler.observe(ro.episodes)
        new_programs = sum(self.passing.add(self.tasks_by_id[e.task_id], e.completion)
                           for e in ro.episodes if e.all_passed and self.tasks_by_id[e.task_id].split != "train")
        sampled = ro  # the policy's own episodes: the logged reward and pass rates are theirs alone
        if c.teacher_episodes > 0:  # off-policy rows: pi_old := the current policy's probability of them
            teach = teacher_rollout(self.model, self.tokenizer, self.tasks_by_id,
                                    draw_teacher(self.teacher_pool, c.teacher_episodes, self.teacher_rng),
                                    allowed=self.allowed, temperature=c.temperature)
            ro = merge_rollouts(ro, teach, self.tokenizer.pad_id)
        rollout_s = time.perf_counter() - t0
        # Exploration (chapter 6): its own clock, so rollout_s and tokens_per_s stay the sampled rollout's.
        t_explore = time.perf_counter()
        explored = self._explore() if c.explore_episodes > 0 else []
        new_programs += sum(self.passing.add(task, completion) for task, completion, report in explored
                            if report.all_passed)
        explore_s = time.perf_counter() - t_explore

        # 3. GAE: advantages and returns; then normalise the advantages
        if not c.critic:  # no critic: V = 0 everywhere, so GAE returns each token's return as its advantage
            ro.values, ro.bootstrap = torch.zeros_like(ro.values), torch.zeros_like(ro.bootstrap)
        advantages, returns = rl.advantages(ro, "gae", gamma=c.gamma, lam=c.gae_lambda, normalise=c.norm_adv)
        stats["explained_variance"] = explained_variance(ro.values, returns, ro.mask)  # the critic, before learning

        # 4. LEARN: epochs of minibatches of the clipped loss (course_lib.rl.learn, the same for every policy),
        #    stopped early if approx-KL runs away; the teacher terms ride along as an extra loss
        t1 = time.perf_counter()
        self.model.train()
        sil_examples = self.passing.examples(self.tasks_by_id) if c.sil_coef > 0 else []
        B = ro.actions.shape[0]  # sampled + teacher episodes
        bc_w = bc_weight(self.update, c.updates, c.bc_coef, c.bc_schedule, c.bc_final)

        def teacher_terms(loss: torch.Tensor, mb: dict) -> torch.Tensor:
            """+ behaviour cloning on train solutions + self-imitation of the policy's own passing programs."""
            if c.bc_coef > 0 or (c.sil_coef > 0 and sil_examples):
                bc, sil = teacher_losses(self.model, self.tokenizer, self.bc_examples, sil_examples,
                                         self.rng, c.teacher_batch_size)
                if bc is not None:
                    loss = loss + bc_w * bc
                    mb["bc_loss"] = bc.item()
                if sil is not None:
                    loss = loss + c.sil_coef * sil
                    mb["sil_loss"] = sil.item()
            return loss

        logs, epochs_done, early_stop = rl.learn(self.actor, ro, advantages, returns, self.loss_settings,
                                                 self.optimizer, list(self.model.parameters()), self.rng,
                                                 add_terms=teacher_terms)
        learn_s = time.perf_counter() - t1

        # 5. LOG: what the rollout showed, and the mean of each minibatch diagnostic
        self.update += 1
        episodes = sampled.episodes
        for key in sorted({k for mb in logs for k in mb}):
            values = [mb[key] for mb in logs if key in mb]
            stats[key] = float(np.mean(values))
        stats.update({
            "lr": lr, "epochs_done": epochs_done, "minibatches": len(logs),
            "early_stop": early_stop,
            "reward_mean": float(np.mean([e.reward for e in episodes])),
            "pass_rate_sampled": float(np.mean([e.all_passed for e in episodes])),
            "truncated_frac": float(np.mean([e.truncated for e in episodes])),
            "length_mean": float(sampled.mask.sum(1).mean()),
            "episodes": len(episodes), "new_passing_programs": new_programs,
            "explore_episodes": len(explored),
            "explore_pass_rate": float(np.mean([r.all_passed for _, _, r in explored])) if explored else None,
            "val_tasks_found": sum(1 for t in self.rl_tasks if t.split == "val" and t.id in self.passing.programs),
        })
        if c.teacher_episodes > 0:
            stats["teacher_episodes"] = B - len(episodes)
        if c.bc_schedule != "constant":
            stats["bc_weight"] = bc_w
        for name in self.reward.logged:  # each reward term's mean over the update's episodes
            stats[f"term_{name}"] = float(np.mean([row[name] for row in term_rows]))
        for split in self.config.splits:
            rows = [e for e, t in zip(episodes, tasks) if t.split == split]
            stats[f"{split}_pass_rate_sampled"] = float(np.mean([e.all_passed for e in rows])) if rows else None
            stats[f"{split}_episodes"] = len(rows)
        if c.eval_every and (self.update % c.eval_every == 0 or self.update == c.updates):
            greedy = evaluate_policy(self.model, self.tokenizer, self.rl_tasks, allowed_ids=self.alphabet,
                                     max_new_tokens=c.max_new_tokens, timeout=c.sandbox_timeout)
            for split in self.config.splits:
                stats[f"{split}_pass_rate_greedy"] = greedy[f"{split}_pass_rate"]
        stats.update({"rollout_s": rollout_s, "explore_s": explore_s, "learn_s": learn_s,
                      "tokens_per_s": float(sampled.mask.sum()) / max(rollout_s, 1e-9), "wall_s": self.wall()})
        stats = {k: (round(v, 6) if math.isfinite(v) else None) if isinstance(v, float) else v
                 for k, v in stats.items()}
        return stats

    def _explore(self) -> list[tuple]:
        """Epsilon-greedy episodes (course_lib.explore) spread evenly over the val tasks not found yet."""
        from course_lib.explore import explore

        c = self.config
        todo = [t for t in self.rl_tasks if t.split != "train" and t.id not in self.passing.programs]
        if not todo:
            return []
        rows = [todo[i % len(todo)] for i in range(c.explore_episodes)]
        return explore(self.model, self.tokenizer, rows, epsilon=c.explore_epsilon,
                       temperature=c.explore_temperature, max_new_tokens=c.max_new_tokens,
                       allowed_ids=self.alphabet, generator=self.explore_generator, timeout=c.sandbox_timeout)

    # -- the run ---------------------------------------------------------------------------
    def train(self, stop_after: int | None = None) -> list[dict]:
        """Run the remaining updates (all of them, or until `stop_after` updates are done)."""
        from course_lib.progress import tqdm

        c = self.config
        if self.out is not None:
            self.out.mkdir(parents=True, exist_ok=True)
            c.save(self.out / CONFIG_FILE)
        last = c.updates if stop_after is None else min(c.updates, stop_after)
        bar = tqdm(total=c.updates, initial=self.update, desc="PPO updates", unit="update", disable=not self.progress)
        try:
            while self.update < last:
                stats = self.step()
                self.metrics.append(stats)
                self._write_metrics(stats)
                bar.set_postfix(reward=f"{stats['reward_mean']:.2f}", kl=f"{stats.get('approx_kl', 0):.3f}",
                                found=stats["val_tasks_found"])
                bar.update(1)
                if self.out is not None and (self.update % c.save_every == 0 or self.update == last):
                    self.save_state()
        finally:
            bar.close()
        return self.metrics

    # -- files -----------------------------------------------------------------------------
    def _write_metrics(self, stats: dict) -> None:
        if self.out is not None:
            with open(self.out / METRICS_FILE, "a") as f:
                f.write(json.dumps(stats) + "\n")

    def save_state(self) -> None:
        """Everything the next update depends on: weights, Adam's moments, every random generator, the sampler,
        the passing programs. (The learning-rate schedule is a function of `update`: nothing to save.)"""
        state = {
            "update": self.update, "config": self.config.to_dict(),
            "model": self.model.state_dict(), "optimizer": self.optimizer.state_dict(),
            "sample_generator": self.sample_generator.get_state(),
            "rng": self.rng.bit_generator.state, "sampler": self.sampler.state_dict(),
            "torch_rng": torch.get_rng_state(), "numpy_rng": _np_global_state(), "python_rng": random.getstate(),
            "passing": self.passing.programs, "wall_s": self.wall(),
            "pretrain_seconds": self.pretrain_seconds, "teacher_rng": self.teacher_rng.bit_generator.state,
            "explore_generator": self.explore_generator.get_state(),
        }
        tmp = self.out / (STATE_FILE + ".tmp")
        torch.save(state, tmp)
        tmp.replace(self.out / STATE_FILE)  # atomic: a crash mid-write leaves the previous state
        if self.config.keep_checkpoints:  # a copy per save, the oldest beyond the last K deleted
            folder = self.out / CHECKPOINT_DIR
            folder.mkdir(exist_ok=True)
            shutil.copyfile(self.out / STATE_FILE, folder / f"update_{self.update:04d}.pt")
            for old in sorted(folder.glob("update_*.pt"))[:-self.config.keep_checkpoints]:
                old.unlink()

    def load_state(self, path) -> None:
        state = torch.load(path, map_location="cpu", weights_only=False)  # our own file: includes RNG tuples
        saved = PPOConfig.from_dict(state["config"])
        if saved != self.config:
            diff = {k: (v, getattr(self.config, k)) for k, v in saved.to_dict().items() if getattr(self.config, k) != v}
            raise ConfigError(f"{path} was written by a run with other settings: "
                              + ", ".join(f"{k} was {a!r}, now {b!r}" for k, (a, b) in diff.items())
                              + ". Resume with the same settings (drop the changed options), or start a new --out.")
        self.update = state["update"]
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.sample_generator.set_state(state["sample_generator"])
        self.rng.bit_generator.state = state["rng"]
        self.sampler.load_state_dict(state["sampler"])
        torch.set_rng_state(state["torch_rng"])
        np.random.set_state(state["numpy_rng"])
        random.setstate(state["python_rng"])
        self.passing.programs = {k: list(v) for k, v in state["passing"].items()}
        if "teacher_rng" in state:
            self.teacher_rng.bit_generator.state = state["teacher_rng"]
        if "explore_generator" in state:
            self.explore_generator.set_state(state["explore_generator"])
        self.wall_offset = state["wall_s"] - (time.perf_counter() - self.started)
        self.pretrain_seconds = state["pretrain_seconds"]
        if self.out is not None and (self.out / METRICS_FILE).exists():  # drop lines written after the save
            lines = (self.out / METRICS_FILE).read_text().splitlines()
            kept = [line for line in lines if json.loads(line)["update"] < self.update]
            (self.out / METRICS_FILE).write_text("".join(line + "\n" for line in kept))
            self.metrics = [json.loads(line) for line in kept]

    def save_policy(self, path=None) -> Path:
        from course_lib.checkpoints import save_checkpoint

        path = Path(path) if path is not None else self.out / POLICY_FILE
        save_checkpoint(path, self.model, self.tokenizer,
                        extra={"alphabet": self.alphabet.tolist(), "max_new_tokens": self.config.max_new_tokens,
                               "updates": self.update, "config": self.config.to_dict()})
        return path

    def evaluate(self) -> dict:
        """Greedy pass rates of the trained policy and of the pretrained start, on every split."""
        c = self.config
        result = evaluate_policy(self.model, self.tokenizer, self.tasks, allowed_ids=self.alphabet,
                                 max_new_tokens=c.max_new_tokens, timeout=c.sandbox_timeout)
        start = self._start_model()
        baseline = evaluate_policy(start, self.tokenizer, self.tasks, allowed_ids=self.alphabet,
                                   max_new_tokens=c.max_new_tokens, timeout=c.sandbox_timeout)
        return {**{k: v for k, v in result.items() if k != "per_task"},
                "updates": self.update, "seed": c.seed,
                "pretrain_seconds": round(self.pretrain_seconds, 1), "wall_seconds": round(self.wall(), 1),
                "baseline": baseline, "per_task": result["per_task"]}

    def _start_model(self):
        from course_lib.checkpoints import load_checkpoint

        if self.config.pretrained:
            return load_checkpoint(self.config.pretrained, tokenizer=self.tokenizer)[0]
        if self.out is not None and (self.out / PRETRAINED_FILE).exists():
            return load_checkpoint(self.out / PRETRAINED_FILE, tokenizer=self.tokenizer)[0]
        raise ConfigError("the pretrained start is not available (no --pretrained and no out dir)")


def _np_global_state():
    return np.random.get_state()


# =====================================================================================
# The whole command: pretrain (or load), PPO, evaluate
# =====================================================================================

def run(config: PPOConfig, out_dir, *, resume: bool = False, stop_after: int | None = None,
        progress: bool = True, log=print) -> dict | None:
    """`python -m course_lib ppo`: train into out_dir and write eval.json; returns eval.json's content.

    resume: continue from the latest saved state (`latest_state`; same settings required).
    stop_after: stop (with the state saved) once this many updates are done, as if interrupted.
    Returns None when stopped before the last update.
    """
    out = Path(out_dir)
    state_path = out / STATE_FILE
    if resume:
        state_path = latest_state(out)
        if state_path is None:
            raise ConfigError(f"--resume: neither {out / STATE_FILE} nor {out / CHECKPOINT_DIR}/update_*.pt exists "
                              "(or none is readable); nothing to resume (drop --resume to start)")
        log(f"resuming from {state_path}")
        from course_lib.checkpoints import load_checkpoint
        from course_lib.tokenizers import course_tokenizer
        tokenizer = course_tokenizer()
        start = config.pretrained or out / PRETRAINED_FILE
        model, _, _ = load_checkpoint(start, tokenizer=tokenizer)
        trainer = PPOTrainer(config, out, model=model, tokenizer=tokenizer, progress=progress, log=log)
        trainer.load_state(state_path)  # refuses, listing the differences, if the settings changed
    else:
        if (out / METRICS_FILE).exists() or state_path.exists():
            raise ConfigError(f"{out} already holds a run (metrics.jsonl or train_state.pt); pass --resume to "
                              "continue it, or choose another --out")
        out.mkdir(parents=True, exist_ok=True)
        trainer = PPOTrainer(config, out, progress=progress, log=log)
    trainer.train(stop_after=stop_after)
    if trainer.update < config.updates:
        log(f"stopped after {trainer.update} of {config.updates} updates; continue with --resume")
        return None
    trainer.save_policy()
    result = trainer.evaluate()
    (out / EVAL_FILE).write_text(json.dumps(result, indent=1) + "\n")
    if config.plots:
        from course_lib.plots import plot_training
        plot_training(trainer.metrics, out / PLOT_FILE, title=f"PPO run {out.name} (seed {config.seed})")
    return result


def latest_state(out_dir) -> Path | None:
    """The newest readable saved state of a run: train_state.pt, else the newest checkpoints/update_NNNN.pt."""
    out = Path(out_dir)
    candidates = [out / STATE_FILE] + sorted((out / CHECKPOINT_DIR).glob("update_*.pt"), reverse=True)
    for path in candidates:
        if not path.exists():
            continue
        try:
            torch.load(path, map_location="cpu", weights_only=False)
        except Exception:  # a truncated or corrupt file: fall back to the previous save
            continue
        return path
    return None


def evaluate_checkpoint(path, tasks_dir=None, max_new_tokens: int | None = None, fields=None) -> dict:
    """`python -m course_lib eval`: greedy pass rates of any course checkpoint on the course's splits
    or on the tasks of another folder (the checkpoint's vocabulary must cover their prompts)."""
    from course_lib.checkpoints import load_checkpoint
    from course_lib.env import action_alphabet
    from course_lib.tasks import load_tasks
    from course_lib.tokenizers import UnknownCharacterError

    model, tokenizer, extra = load_checkpoint(path)
    tasks = load_tasks(tasks_dir=tasks_dir, fields=fields)
    for t in tasks:
        try:
            tokenizer.encode(t.prompt)
        except UnknownCharacterError as e:
            from course_lib.checkpoints import CheckpointMismatchError
            raise CheckpointMismatchError(f"{path} cannot read task {t.id!r} ({t.source}): {e}") from None
    alphabet = extra.get("alphabet")
    if alphabet is None:  # a chapter-4 checkpoint: the course's alphabet
        alphabet = action_alphabet(load_tasks("train"), tokenizer).tolist()
    max_new = max_new_tokens or extra.get("max_new_tokens", 160)
    result = evaluate_policy(model, tokenizer, tasks, allowed_ids=alphabet, max_new_tokens=max_new)
    return {"checkpoint": str(path), "tasks_dir": str(tasks_dir) if tasks_dir else None, **result}


def read_metrics(path) -> list[dict]:
    """The lines of a metrics.jsonl (a run folder or the file itself)."""
    path = Path(path)
    if path.is_dir():
        path = path / METRICS_FILE
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


# =====================================================================================
# Command line (python -m course_lib ppo / eval)
# =====================================================================================

def add_arguments(parser) -> None:
    """Every PPOConfig field as an option (--ent-coef 0.01), plus --config FILE, --out, --resume."""
    import argparse

    parser.add_argument("--out", required=True, help="folder for config.json, metrics.jsonl, checkpoints, eval.json")
    parser.add_argument("--config", metavar="FILE", help="JSON file of settings; options given here override it")
    parser.add_argument("--resume", action="store_true", help="continue the run in --out from its train_state.pt")
    parser.add_argument("--stop-after", type=int, metavar="N", help="stop after N updates (state saved), as if interrupted")
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")
    group = parser.add_argument_group("hyperparameters (defaults in brackets)")
    for f in dataclasses.fields(PPOConfig):
        flag = "--" + f.name.replace("_", "-")
        help_text = f"{f.metadata['help']} [{f.default}]"
        if f.metadata["type"] is bool:
            group.add_argument(flag, action=argparse.BooleanOptionalAction, default=argparse.SUPPRESS, help=help_text)
        else:
            group.add_argument(flag, dest=f.name, default=argparse.SUPPRESS, metavar=f.metadata["type"].__name__.upper(),
                               choices=f.metadata["choices"], help=help_text, type=_cli_type(f))
    parser.set_defaults(func=main_ppo)


def _cli_type(f):
    def convert(text):
        try:
            return _coerce(f, text, "option")
        except ConfigError as e:
            import argparse
            raise argparse.ArgumentTypeError(str(e).replace("option: ", "")) from None
    convert.__name__ = f.metadata["type"].__name__
    return convert


def config_from_args(args, base: dict | None = None) -> PPOConfig:
    """Defaults, then `base` (a resumed run's settings), then --config FILE, then the options given."""
    data = dict(base or {})
    if getattr(args, "config", None):
        data.update(PPOConfig.load(args.config).to_dict())
    for f in dataclasses.fields(PPOConfig):
        if hasattr(args, f.name):
            data[f.name] = getattr(args, f.name)
    return PPOConfig.from_dict(data, where="the options")


def main_ppo(args) -> int:
    from course_lib.checkpoints import CheckpointFormatError, CheckpointMismatchError
    from course_lib.tasks import TaskFormatError

    try:
        saved = Path(args.out) / CONFIG_FILE
        base = PPOConfig.load(saved).to_dict() if args.resume and saved.exists() else {}
        config = config_from_args(args, base)
        start = time.perf_counter()
        result = run(config, args.out, resume=args.resume, stop_after=args.stop_after, progress=not args.no_progress)
    except (ConfigError, CheckpointMismatchError, CheckpointFormatError, TaskFormatError, FileNotFoundError) as e:
        print(f"error: {e}")
        return 2
    if result is None:
        return 0
    print(f"done in {time.perf_counter() - start:.1f} s: " + ", ".join(
        f"{k} {result[k]:.3f} (start {result['baseline'][k]:.3f})"
        for k in ("train_pass_rate", "val_pass_rate", "test_pass_rate") if k in result))
    print(f"wrote {Path(args.out) / EVAL_FILE}")
    return 0


def add_eval_arguments(parser) -> None:
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--checkpoint", help="a course GRU checkpoint (policy.pt, pretrained.pt, ...)")
    which.add_argument("--model", metavar="NAME", help="a transformer: smollm2-135m-instruct, tiny, a hub name "
                                                       "(deepseek-ai/deepseek-coder-1.3b-instruct) or a folder")
    parser.add_argument("--tasks", metavar="PATH", help="folder of task TOML files, or a .jsonl/.parquet file of "
                                                        "tasks; default: the course's tasks/")
    parser.add_argument("--task-fields", metavar="RENAMES", help="for a .jsonl/.parquet file: ours=theirs field "
                                                                 "renames, e.g. prompt=question,solution=answer")
    parser.add_argument("--out", metavar="FILE", help="write the results as JSON here")
    parser.add_argument("--max-new-tokens", type=int, help="generation limit; default: the checkpoint's "
                                                            "(a transformer: 256)")
    llm_options = parser.add_argument_group("a transformer (--model)")
    llm_options.add_argument("--adapter", metavar="DIR", help="a LoRA adapter folder written by `llm` (DIR/adapter)")
    llm_options.add_argument("--style", choices=["chat", "completion", "instruct"],
                             help="how the task is put to the model; default: chat if its tokenizer has a chat "
                                  "template, else completion")
    llm_options.add_argument("--humaneval", action="store_true", help="also the 164 HumanEval problems")
    llm_options.add_argument("--device", default=None, help="cuda or cpu [cuda if available]")
    parser.set_defaults(func=main_eval)


def main_eval(args) -> int:
    from course_lib.checkpoints import CheckpointFormatError, CheckpointMismatchError
    from course_lib.tasks import TaskFormatError

    if args.checkpoint and not Path(args.checkpoint).exists():
        print(f"error: checkpoint {args.checkpoint} does not exist")
        return 2
    try:
        if args.model:
            from course_lib.evaluation import evaluate_model  # the transformer side: imported only for --model
            from course_lib.tasks import load_tasks

            tasks = load_tasks(tasks_dir=args.tasks, fields=args.task_fields) if args.tasks else None
            result = evaluate_model(args.model, adapter=args.adapter, tasks=tasks, style=args.style,
                                    max_new_tokens=args.max_new_tokens or 256, humaneval=args.humaneval,
                                    device=args.device)
        else:
            result = evaluate_checkpoint(args.checkpoint, args.tasks, args.max_new_tokens, fields=args.task_fields)
    except (CheckpointMismatchError, CheckpointFormatError, TaskFormatError, FileNotFoundError,
            ModuleNotFoundError, ValueError) as e:
        print(f"error: {e}")
        return 2
    rows = [("", result)] + ([("humaneval_", result["humaneval"])] if "humaneval" in result else [])
    for prefix, part in rows:
        for key, value in part.items():
            if key.endswith(("pass_rate", "greedy_pass@1")):
                print(f"{prefix + key:32s} {value:.3f}")
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
        print(f"wrote {args.out}")
    return 0
