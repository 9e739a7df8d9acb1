"""The PPO trainer: a GRU policy learns, by reinforcement, to write functions that pass tests (chapter 6).

    python -m course_lib ppo --seed 0 --out runs/ppo/seed0        # pretrain, then PPO, then evaluate
    python -m course_lib eval --checkpoint runs/ppo/seed0/policy.pt

The maths lives in `course_lib.core` (advantages: GAE; losses: the clipped loss and its diagnostics);
this module is the loop around it. One *update* is, in the order of the maths:

    1. ROLLOUT   sample B episodes of the tasks in lockstep with the action mask,
                 recording each token's log-probability and the critic's value
    2. REWARD    one sandbox batch scores every program; the reward (`reward`: a spec of
                 course_lib.rewards terms, chapter 7) sits on the last token
    3. GAE       advantages and returns (optionally bootstrapping episodes cut by the length limit)
    4. LEARN     a few epochs of minibatches of the clipped PPO loss, with gradient-norm
                 clipping, a warm-up + cosine learning rate, and an early stop when the
                 approximate KL to the rollout policy grows past `target_kl`
    5. LOG       one line per update to metrics.jsonl: reward, pass rates, approximate KL,
                 clip fraction, explained variance, entropy, ratio, losses, learning rate

Which tasks are rolled out: `train` and `val` (val: its TESTS give the reward; its solutions are never
read); `test` tasks only at the final evaluation. Chapter 8's teacher terms (course_lib.gru.teacher) add to
the PPO loss: behaviour cloning on the TRAIN solutions (so RL does not forget what pretraining taught) and
self-imitation of the policy's OWN programs that passed every test; teacher *episodes* add known-good
programs to a batch, and `bc_schedule` fades behaviour cloning over the run. Exploration (course_lib.gru.explore,
chapter 6) searches near the greedy program for the val tasks no program has passed yet: its episodes feed
self-imitation only, never the PPO loss. The starting policy comes from course_lib.gru.start.

Everything a run needs to continue is saved in ``OUT/train_state.pt``: a run stopped
and resumed writes the same metrics as one that never stopped (CPU, same seed).
"""

from __future__ import annotations

import copy
import json
import math
import random
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from course_lib.config import ConfigError, resolve_device
from course_lib.core import rl, update
from course_lib.core.losses import explained_variance
from course_lib.core.rollout import Rollout
from course_lib.core.samplers import TaskSampler
from course_lib.core.schedules import warmup_cosine
from course_lib.corpus import pretraining_texts
from course_lib.gru.actor import GRUActor, collect_rollout
from course_lib.gru.checkpoints import save_checkpoint
from course_lib.gru.env import action_alphabet
from course_lib.gru.explore import explore
from course_lib.gru.models import next_token_mask
from course_lib.gru.ppo_config import PPOConfig
from course_lib.gru.pretrain import evaluate_policy
from course_lib.gru.start import starting_policy
from course_lib.gru.teacher import (PassingPrograms, bc_weight, draw_teacher, merge_rollouts, teacher_losses,
                                    teacher_pool, teacher_rollout)
from course_lib.progress import tqdm
from course_lib.rewards import BUILTIN_TERMS, ShapedReward
from course_lib.runs import check_same_settings, save_run_state
from course_lib.tasks import load_tasks
from course_lib.tokenizers import course_tokenizer

STATE_FILE = "train_state.pt"        # everything needed to resume
POLICY_FILE = "policy.pt"            # the trained policy, a course checkpoint (load_checkpoint reads it)
METRICS_FILE = "metrics.jsonl"
CONFIG_FILE = "config.json"
CHECKPOINT_DIR = "checkpoints"       # OUT/checkpoints/update_NNNN.pt: the last keep_checkpoints states
PLOT_FILE = "training.png"           # the run's curves, drawn at the end (course_lib.plots)
EVAL_FILE = "eval.json"
TIMING_KEYS = ("wall_s", "rollout_s", "explore_s", "learn_s", "tokens_per_s")  # differ between two runs of the same seed


# =====================================================================================
# The trainer
# =====================================================================================

@dataclass(kw_only=True)
class PPOStep(rl.StepInfo):
    """What PPOTrainer.collect hands the update's teacher terms and its record."""
    lr: float                      # this update's learning rate
    tasks: list                    # the tasks drawn
    sampled: Rollout               # the sampled episodes (without the teacher's)
    term_rows: list                # the teacher terms' diagnostics, one dict per minibatch (filled while learning)
    new_programs: int              # passing programs the update added to self-imitation's store
    explored: list                 # (task, completion, report) of the exploring episodes
    rollout_s: float               # seconds sampling and scoring took
    explore_s: float               # seconds exploring took
    bc_weight: float = 0.0         # behaviour cloning's weight this update (set by extra_terms)


class PPOTrainer(rl.Trainer):
    """Holds the policy, optimiser, sampler and logs of one run; `train()` runs the updates.

    One update is `rl.Trainer.step`, the step that trains chapter 10's language model too, with the
    GRU's collect (rollout, reward, teacher episodes, exploration), extra_terms (behaviour cloning,
    self-imitation) and record (one line of metrics.jsonl).

    out_dir: where config.json, metrics.jsonl, train_state.pt, policy.pt and eval.json go
    (None: nothing is written; metrics stay in `self.metrics`).
    device: where the network runs ("cpu", "cuda", "auto"); sampling, the sandbox and the loss's
    bookkeeping stay on the CPU, so a run may resume on another device. Not a setting of the run:
    eval.json names the device that ran its last part.
    """

    def __init__(self, config: PPOConfig, out_dir=None, *, model=None, tokenizer=None, tasks=None,
                 progress: bool = True, log=print, device: str = "cpu"):
        config.validate()
        self.config, self.progress, self.log = config, progress, log
        self.out = Path(out_dir) if out_dir is not None else None
        self.device = resolve_device(device)
        self.started = time.perf_counter()
        self.wall_offset = 0.0  # seconds spent before a resume
        torch.set_num_threads(config.threads)
        random.seed(config.seed)
        np.random.seed(config.seed)
        torch.manual_seed(config.seed)
        self._read_tasks(tasks, tokenizer)

        # The starting policy: given, loaded, or pretrained here (chapter 4).
        self.pretrain_seconds = 0.0
        if model is None:
            model, self.pretrain_seconds = starting_policy(config, self.tokenizer, self.tasks, self.alphabet,
                                                           device=self.device, out=self.out, progress=progress)
        self.model = model.to(self.device)
        self._take_the_methods_parts()

        # BC examples come from TRAIN tasks only (task_examples refuses any other split).
        self.bc_examples = (pretraining_texts("memorise", tasks=self.tasks, tokenizer=self.tokenizer)
                            if config.bc_coef > 0 else [])
        self.passing = PassingPrograms(config.sil_per_task)
        # The reward (chapter 7): the spec's weighted terms; every built-in term is also logged.
        self.reward = ShapedReward(config.reward, log_also=BUILTIN_TERMS)
        self.sampler = TaskSampler(self.rl_tasks, seed=config.seed, unsolved_weight=config.unsolved_weight,
                                   min_weight=config.min_task_weight, train_share=config.train_share)
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=config.lr, eps=1e-5)
        self.params = list(self.model.parameters())
        self.sample_generator = torch.Generator().manual_seed(config.seed)
        self.rng = np.random.default_rng(config.seed + 1)  # minibatch order, teacher batches
        # Teacher episodes (chapter 8): a fixed pool of passing programs, built from the START policy.
        self.teacher_rng = np.random.default_rng(config.seed + 2)  # its own stream: the rest is unchanged
        self.explore_generator = torch.Generator().manual_seed(config.seed + 3)  # so is exploration's
        self.teacher_pool = self._teacher_pool() if config.teacher_episodes > 0 else []
        self.update = 0
        self.metrics: list[dict] = []

    # -- setup ----------------------------------------------------------------------
    def _read_tasks(self, tasks, tokenizer) -> None:
        """The tasks (given, or read as the settings say), those rolled out, the tokenizer and the action alphabet."""
        config = self.config
        self.tasks = (list(tasks) if tasks is not None
                      else load_tasks(tasks_dir=config.tasks_dir, fields=config.task_fields))
        self.tasks_by_id = {t.id: t for t in self.tasks}
        self.rl_tasks = [t for t in self.tasks if t.split in config.rollout_splits]
        if not self.rl_tasks:
            raise ConfigError(f"no tasks of splits {config.rollout_splits} to roll out")
        self.tokenizer = tokenizer if tokenizer is not None else course_tokenizer()
        self.alphabet = action_alphabet(self.tasks, self.tokenizer)
        self.allowed = next_token_mask(len(self.tokenizer), self.tokenizer, self.alphabet)  # the sampler's own mask

    def _take_the_methods_parts(self) -> None:
        """What the RL core (course_lib.core.rl) trains and how: the same core trains chapter 10's language model,
        and the method picks the same parts there (rl.METHODS)."""
        config = self.config
        self.reference = None
        if config.kl_weight > 0:  # a frozen copy of the start, for KL(pi || pi_ref)
            self.reference = copy.deepcopy(self.model).eval().requires_grad_(False)
        self.actor = GRUActor(self.model, allowed=self.allowed, temperature=config.temperature,
                              reference=self.reference)
        method = rl.METHODS[config.method]
        self.estimator = method.estimator
        # ppo without a critic: V = 0, so GAE gives each token its return decayed by (gamma*lam)^k
        self.critic = method.critic and config.critic
        self.loss_settings = update.LossSettings(
            loss=method.loss, epochs=config.epochs, minibatch_size=config.minibatch_size, clip_eps=config.clip_eps,
            critic=self.critic, value_clip_eps=config.value_clip_eps, vf_coef=config.vf_coef,
            ent_coef=config.ent_coef, kl_coef=config.kl_weight, target_kl=config.target_kl,
            max_grad_norm=config.max_grad_norm, scale=config.ppo_coef)
        self.advantage_options = dict(gamma=config.gamma, lam=config.gae_lambda, group_size=config.group_size,
                                      normalise=config.norm_adv if method.estimator == "gae" else method.normalise)

    def _teacher_pool(self) -> list:
        """Teacher episodes' programs (chapter 8), scored once from the START policy; none found is an error."""
        c = self.config
        pool = teacher_pool(c.teacher_source, self.rl_tasks, model=self.model, tokenizer=self.tokenizer,
                            allowed_ids=self.alphabet, max_new_tokens=c.max_new_tokens, timeout=c.sandbox_timeout,
                            reward_fn=self.reward)
        self.reward.drain()  # the pool's scores are not an update's episodes
        if not pool:
            raise ConfigError(f"teacher_source={c.teacher_source!r} found no passing program to teach")
        return pool

    def wall(self) -> float:
        return self.wall_offset + time.perf_counter() - self.started

    # -- one update: rl.Trainer.step runs collect -> advantages -> learn -> record ----------------
    def collect(self) -> tuple:
        """1-2. ROLLOUT and REWARD: sample the update's episodes, score them in the sandbox, add teacher
        episodes and explore if asked. Returns the rollout the loss learns from and the step's context."""
        c = self.config
        lr = c.lr * warmup_cosine(self.update, c.updates, c.warmup_updates, c.min_lr_ratio)
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        t0 = time.perf_counter()
        tasks = self.sampler.draw(c.episodes_per_update // c.group_size, c.group_size)
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
        if not self.critic:  # no critic: V = 0 everywhere (ppo: GAE gives each token its decayed return)
            ro.values, ro.bootstrap = torch.zeros_like(ro.values), torch.zeros_like(ro.bootstrap)
        return ro, PPOStep(lr=lr, tasks=tasks, sampled=sampled, term_rows=term_rows, new_programs=new_programs,
                           explored=explored, rollout_s=rollout_s, explore_s=explore_s)

    def extra_terms(self, info: PPOStep):
        """4. LEARN's teacher terms (chapter 8), added to every minibatch's PPO loss by rl.learn."""
        c = self.config
        sil_examples = self.passing.examples(self.tasks_by_id) if c.sil_coef > 0 else []
        info.bc_weight = bc_w = bc_weight(self.update, c.updates, c.bc_coef, c.bc_schedule, c.bc_final)

        def teacher_terms(loss: torch.Tensor, mb: dict) -> torch.Tensor:
            """+ behaviour cloning on train solutions + self-imitation of the policy's own passing programs."""
            if c.bc_coef > 0 or (c.sil_coef > 0 and sil_examples):
                bc, sil = teacher_losses(self.model, self.tokenizer, self.bc_examples, sil_examples,
                                         self.rng, c.teacher_batch_size)
                if bc is not None:  # on the network's device; the RL loss is on the CPU, with the rollout
                    loss = loss + bc_w * bc.cpu()
                    mb["bc_loss"] = bc.item()
                if sil is not None:
                    loss = loss + c.sil_coef * sil.cpu()
                    mb["sil_loss"] = sil.item()
            return loss

        return teacher_terms

    def record(self, ro, info: PPOStep, adv, returns, logs: list[dict], epochs_done: int, early_stop: bool) -> dict:
        """5. LOG: what the rollout showed, and the mean of each minibatch diagnostic."""
        c = self.config
        stats: dict = {"update": self.update,
                       "explained_variance": explained_variance(ro.values, returns, ro.mask)}  # the critic, before learning
        self.update += 1
        sampled, explored, tasks = info.sampled, info.explored, info.tasks
        episodes = sampled.episodes
        for key in sorted({k for mb in logs for k in mb}):
            values = [mb[key] for mb in logs if key in mb]
            stats[key] = float(np.mean(values))
        stats.update({
            "lr": info.lr, "epochs_done": epochs_done, "minibatches": len(logs),
            "early_stop": early_stop,
            "reward_mean": float(np.mean([e.reward for e in episodes])),
            "pass_rate_sampled": float(np.mean([e.all_passed for e in episodes])),
            "truncated_frac": float(np.mean([e.truncated for e in episodes])),
            "length_mean": float(sampled.mask.sum(1).mean()),
            "episodes": len(episodes), "new_passing_programs": info.new_programs,
            "explore_episodes": len(explored),
            "explore_pass_rate": float(np.mean([r.all_passed for _, _, r in explored])) if explored else None,
            "val_tasks_found": sum(1 for t in self.rl_tasks if t.split == "val" and t.id in self.passing.programs),
        })
        if c.teacher_episodes > 0:
            stats["teacher_episodes"] = ro.actions.shape[0] - len(episodes)
        if c.bc_schedule != "constant":
            stats["bc_weight"] = info.bc_weight
        for name in self.reward.logged:  # each reward term's mean over the update's episodes
            stats[f"term_{name}"] = float(np.mean([row[name] for row in info.term_rows]))
        for split in self.config.rollout_splits:
            rows = [e for e, t in zip(episodes, tasks) if t.split == split]
            stats[f"{split}_pass_rate_sampled"] = float(np.mean([e.all_passed for e in rows])) if rows else None
            stats[f"{split}_episodes"] = len(rows)
        if c.eval_every and (self.update % c.eval_every == 0 or self.update == c.updates):
            greedy = evaluate_policy(self.model, self.tokenizer, self.rl_tasks, allowed_ids=self.alphabet,
                                     max_new_tokens=c.max_new_tokens, timeout=c.sandbox_timeout)
            for split in self.config.rollout_splits:
                stats[f"{split}_pass_rate_greedy"] = greedy[f"{split}_greedy_pass@1"]
        stats.update({"rollout_s": info.rollout_s, "explore_s": info.explore_s, "learn_s": info.learn_s,
                      "tokens_per_s": float(sampled.mask.sum()) / max(info.rollout_s, 1e-9), "wall_s": self.wall()})
        return {k: (round(v, 6) if math.isfinite(v) else None) if isinstance(v, float) else v
                for k, v in stats.items()}

    def _explore(self) -> list[tuple]:
        """Epsilon-greedy episodes (course_lib.gru.explore) spread evenly over the val tasks not found yet."""

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
            "torch_rng": torch.get_rng_state(), "numpy_rng": np.random.get_state(), "python_rng": random.getstate(),
            "passing": self.passing.programs, "wall_s": self.wall(),
            "pretrain_seconds": self.pretrain_seconds, "teacher_rng": self.teacher_rng.bit_generator.state,
            "explore_generator": self.explore_generator.get_state(),
        }
        save_run_state(state, self.out / STATE_FILE)
        if self.config.keep_checkpoints:  # a copy per save, the oldest beyond the last K deleted
            folder = self.out / CHECKPOINT_DIR
            folder.mkdir(exist_ok=True)
            shutil.copyfile(self.out / STATE_FILE, folder / f"update_{self.update:04d}.pt")
            for old in sorted(folder.glob("update_*.pt"))[:-self.config.keep_checkpoints]:
                old.unlink()

    def load_state(self, path) -> None:
        state = torch.load(path, map_location="cpu", weights_only=False)  # our own file: includes RNG tuples
        check_same_settings(PPOConfig.from_dict(state["config"]).to_dict(), self.config.to_dict(), path,
                            error=ConfigError,
                            fix="Resume with the same settings (drop the changed options), or start a new --out.")
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
        """The trained policy as a course checkpoint: path, or OUT/policy.pt."""
        path = Path(path) if path is not None else self.out / POLICY_FILE
        save_checkpoint(path, self.model, self.tokenizer,
                        extra={"alphabet": self.alphabet.tolist(), "max_new_tokens": self.config.max_new_tokens,
                               "updates": self.update, "config": self.config.to_dict()})
        return path
