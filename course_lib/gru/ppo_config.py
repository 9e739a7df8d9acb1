"""The PPO trainer's settings (chapters 6-8): every knob of `course_lib.gru.trainer.PPOTrainer` in one place.

Each field carries its one-line help: `python -m course_lib ppo --help` lists them all, a run
saves them as config.json, and a value the trainer cannot use is a ConfigError that says which
and why (`course_lib.config`).
"""

from __future__ import annotations

from dataclasses import dataclass

from course_lib.config import ConfigError, option, override, require
from course_lib.core.rl import METHODS, RLSettings
from course_lib.gru.teacher import BC_SCHEDULES, TEACHER_SOURCES
from course_lib.rewards import RewardSpec, RewardSpecError

__all__ = ["PPOConfig", "ConfigError"]


# =====================================================================================
# Hyperparameters: every knob in one place, each with its one-line help
# =====================================================================================

@dataclass
class PPOConfig(RLSettings):
    # --- the run -----------------------------------------------------------------
    pretrained: str | None = option(None, "course checkpoint to start from; none: pretrain first (chapter 4)", str)
    tasks_dir: str | None = option(None, "folder of task TOML files, one .toml file, or one .jsonl/.parquet file; none: the course's tasks/", str)
    task_fields: str | None = option(None, "for a .jsonl/.parquet tasks file: field renames ours=theirs, e.g. "
                                           "'prompt=question,solution=answer'", str)
    threads: int = option(2, "torch CPU threads for the network (the sandbox runs between its steps, not beside "
                             "them); two runs side by side on 2 cores: 1 each")
    # --- pretraining (only when no --pretrained) ----------------------------------
    hidden_dim: int | None = option(None, "GRU memory size; none: 256 when pretraining, the checkpoint's with --pretrained", int)
    embed_dim: int | None = option(None, "size of each token's vector; none: 64 when pretraining, the checkpoint's", int)
    pretrain_regime: str = option("memorise", "pretraining data, see course_lib.gru.pretrain", choices=("memorise", "broad"))
    pretrain_epochs: int = option(150, "passes over the pretraining data")
    pretrain_lr: float = option(1e-2, "pretraining learning rate (cosine-decayed)")
    pretrain_batch_size: int = option(64, "examples per pretraining batch (64: all 46 train tasks in one batch)")
    # --- rollouts -------------------------------------------------------------------
    updates: int = option(20, "number of PPO updates (rollout + learning) in the run")
    episodes_per_update: int = option(128, "episodes sampled in lockstep per update (B)")
    group_size: int = override(RLSettings, "group_size", 8)
    temperature: float = override(RLSettings, "temperature", 1.5)
    max_new_tokens: int = override(RLSettings, "max_new_tokens", 160)
    unsolved_weight: float = option(1.0, "task sampling: 0 uniform; 1 weight each task by 1 - its recent pass rate")
    min_task_weight: float = option(0.05, "task sampling: floor on a task's weight, so solved tasks are still visited")
    train_share: float = option(0.25, "task sampling: share of each update's tasks drawn from train (the rest: val)")
    reward: str = option("fraction=1", "reward terms and weights (chapter 7, course_lib.rewards), e.g. "
                                       "'pass=1,fraction=0.5,syntax=0.1,length=0.002,quality=0.1'")
    # --- GAE ------------------------------------------------------------------------
    gamma: float = option(1.0, "discount per token (1: a program is worth its reward however long)")
    critic: bool = option(True, "learn V(s) and build advantages from it by GAE; off: no value loss, V = 0, so "
                                "GAE gives a token its episode's return times (gamma * lambda)^k, k tokens before "
                                "the end (normalised over the batch)")
    bootstrap_truncated: bool = option(False, "add gamma * V(next state) after an episode cut by max_new_tokens "
                                              "(off: CodeGenEnv pays the cut program in full at the cut)")
    # --- the PPO loss ----------------------------------------------------------------
    value_clip_eps: float | None = option(0.2, "value clipping around the rollout's values; none: unclipped", float,
                                         nullable=True)
    ppo_coef: float = option(1.0, "weight of the whole PPO objective (clipped policy loss, value loss, entropy, KL); "
                                  "0 leaves behaviour cloning, self-imitation and exploration alone (an ablation)")
    ent_coef: float = option(0.01, "weight of the entropy bonus (more: more exploration)")
    norm_adv: bool = option(True, "normalise advantages to zero mean, unit variance per update")
    # --- optimisation ---------------------------------------------------------------
    minibatch_size: int = option(64, "episodes per gradient step")
    lr: float = override(RLSettings, "lr", 3e-3)
    kl_coef: float | None = override(RLSettings, "kl_coef", 0.0)  # off for every method unless asked
    warmup_updates: int = option(3, "updates of linear learning-rate warm-up")
    min_lr_ratio: float = option(0.1, "the cosine decays the learning rate to lr * min_lr_ratio")
    target_kl: float | None = option(0.05, "stop an update's epochs once approximate KL exceeds this; none: never", float,
                                    nullable=True)
    # --- teacher terms (chapter 8) -----------------------------------------------------
    bc_coef: float = option(2.0, "weight of behaviour cloning on TRAIN solutions (keeps what pretraining taught); "
                                 "on for every method: --bc-coef 0 --sil-coef 0 gives the plain method")
    sil_coef: float = option(0.5, "weight of self-imitation: cross-entropy on the policy's own passing programs")
    teacher_batch_size: int = option(32, "examples per gradient step for the two terms above")
    sil_per_task: int = option(4, "self-imitation keeps at most this many passing programs per task (the shortest)")
    bc_schedule: str = option("constant", "how bc_coef fades over the updates", choices=BC_SCHEDULES)
    bc_final: float = option(0.0, "with a fading bc_schedule: the last update's weight is bc_coef * bc_final")
    teacher_source: str = option("off", "teacher episodes: train reference solutions, the pretrained policy's passing "
                                         "greedy programs, or both", choices=TEACHER_SOURCES)
    teacher_episodes: int = option(0, "teacher programs added to each update's batch as extra episodes (0: none)")
    # --- exploration near the greedy program (course_lib.gru.explore) ---------------------------
    explore_episodes: int = option(512, "epsilon-greedy episodes per update on the val tasks no program has passed "
                                        "yet; what passes goes to self-imitation, never to the PPO loss (0: none)")
    explore_epsilon: float = option(0.03, "chance per token that an exploring episode leaves the greedy choice")
    explore_temperature: float = option(1.0, "temperature of the token drawn when it leaves the greedy choice")
    # --- logging and saving --------------------------------------------------------------
    eval_every: int = option(5, "greedy pass rates on train and val every this many updates (0: never)")
    save_every: int = option(10, "write train_state.pt every this many updates (and at the end)")
    keep_checkpoints: int = option(0, "also keep each save as checkpoints/update_NNNN.pt, the last this many (0: none)")
    plots: bool = option(True, "draw training.png (reward, pass rate, KL, entropy, clip fraction, EV) at the end")

    def validate(self) -> None:
        super().validate()  # the core's knobs (course_lib.core.rl.RLSettings)
        method = METHODS[self.method]
        if method.grouped:
            require(self.teacher_episodes == 0, f"{self.method}: teacher episodes are extra rows, not samples of a "
                                                "task's group; drop --teacher-source and --teacher-episodes (bc_coef "
                                                "and sil_coef still teach)")
        require(not method.teacher_terms or self.bc_coef > 0 or self.sil_coef > 0,
                f"{self.method} adds the teacher terms to its loss: set bc_coef or sil_coef above 0 (or use a method "
                f"without them: {', '.join(n for n, m in METHODS.items() if not m.teacher_terms)})")
        for name in ("hidden_dim", "embed_dim"):
            require(getattr(self, name) is None or getattr(self, name) >= 1, f"{name} must be at least 1 or none")
        for name in ("updates", "episodes_per_update", "minibatch_size", "pretrain_epochs", "pretrain_batch_size",
                     "teacher_batch_size", "sil_per_task", "threads"):
            require(getattr(self, name) >= 1, f"{name} must be at least 1, got {getattr(self, name)}")
        require(self.pretrain_lr > 0, f"pretrain_lr must be positive, got {self.pretrain_lr}")
        for name in ("ppo_coef", "ent_coef", "bc_coef", "sil_coef", "unsolved_weight",
                     "min_task_weight", "warmup_updates", "eval_every"):
            require(getattr(self, name) >= 0, f"{name} must be >= 0, got {getattr(self, name)}")
        require(0 <= self.train_share <= 1, f"train_share must be in [0, 1], got {self.train_share}")
        try:
            RewardSpec.parse(self.reward)
        except RewardSpecError as e:
            raise ConfigError(f"reward: {e}") from None
        require(0 <= self.gamma <= 1, f"gamma must be in [0, 1], got {self.gamma}")
        require(0 < self.min_lr_ratio <= 1, f"min_lr_ratio must be in (0, 1], got {self.min_lr_ratio}")
        require(self.minibatch_size <= self.episodes_per_update,
             f"minibatch_size ({self.minibatch_size}) cannot exceed episodes_per_update ({self.episodes_per_update})")
        require(self.episodes_per_update % self.group_size == 0,
             f"episodes_per_update ({self.episodes_per_update}) must be a multiple of group_size ({self.group_size})")
        require(self.value_clip_eps is None or self.value_clip_eps > 0, "value_clip_eps must be positive or none")
        require(self.target_kl is None or self.target_kl > 0, "target_kl must be positive or none")
        require(self.save_every >= 1, f"save_every must be at least 1, got {self.save_every}")
        require(self.keep_checkpoints >= 0, f"keep_checkpoints must be >= 0, got {self.keep_checkpoints}")
        require(self.teacher_episodes >= 0, f"teacher_episodes must be >= 0, got {self.teacher_episodes}")
        require(self.teacher_source in TEACHER_SOURCES,
             f"teacher_source must be one of {TEACHER_SOURCES}, got {self.teacher_source!r}")
        require((self.teacher_source == "off") == (self.teacher_episodes == 0),
             f"teacher_source={self.teacher_source!r} with teacher_episodes={self.teacher_episodes}: set both "
             "(e.g. --teacher-source reference --teacher-episodes 16) or neither")
        require(self.explore_episodes >= 0, f"explore_episodes must be >= 0, got {self.explore_episodes}")
        require(0 <= self.explore_epsilon <= 1, f"explore_epsilon is a probability per token; got "
             f"{self.explore_epsilon}, try 0.04")
        require(self.explore_temperature > 0, f"explore_temperature must be positive, got {self.explore_temperature}")
        require(self.bc_schedule in BC_SCHEDULES, f"bc_schedule must be one of {BC_SCHEDULES}, got {self.bc_schedule!r}")
        require(0 <= self.bc_final <= 1, f"bc_final must be in [0, 1], got {self.bc_final}")
        require(self.pretrain_regime in ("memorise", "broad"),
             f"pretrain_regime must be 'memorise' or 'broad', got {self.pretrain_regime!r}")

    def unused(self, method: str | None = None) -> dict[str, str]:
        name = method or self.method
        method = METHODS[name]
        why = super().unused(name)
        if not method.critic:
            why["critic"] = f"{name} learns no critic"
        if not (method.critic and self.critic):
            why.update(dict.fromkeys(("vf_coef", "value_clip_eps", "bootstrap_truncated"),
                                     f"{name} without a critic has no values" if method.critic else
                                     f"{name} learns no critic"))
        if method.estimator != "gae":
            why.update(gamma=f"{name}'s advantages are not GAE's",
                       norm_adv=f"{name}'s advantages are normalised as the method says (METHODS), not by norm_adv")
        if method.loss == "reinforce":
            why.update(ent_coef=f"{name}'s loss has no entropy bonus",
                       target_kl=f"{name} makes one pass, so there are no epochs to stop early")
        return why
