"""Reinforcement learning of a LoRA code model with unit-test rewards (chapters 10 and 11).

One loop, four methods, all on the LoRA parameters only (the base model stays frozen):

    reinforce     the DeepSeek-Coder LoRA-RL report's REINFORCE: loss = -(R - b) * log p(completion | prompt), b = the batch's mean reward
    ppo           PPO as chapter 6 runs it: a value head on the last hidden state (the critic), advantages by
                  GAE (gamma = 1, lambda = gae_lambda) normalised over the batch, several epochs of the clipped
                  surrogate + the value loss
    grpo          several samples per prompt; advantages normalised within each prompt's group, no critic;
                  a KL penalty towards the frozen reference = the model with its adapter disabled
    teacher-grpo  the teacher-guided GRPO README's dual-source objective: GRPO + w_t * SFT on a teacher's solutions
                  + w_s * SFT on the best passing sample of each group (self-imitation)

Every step follows the same order, the order of the maths:

1. ROLLOUT   sample group_size completions for each of prompts_per_step tasks (`evaluation.generate`), keeping
             the ids sampled: those ids, never a re-tokenisation of their text, are what the loss scores
2. SCORE     run prompt + completion + tests in the sandbox (`sandbox.task_reports`), never here;
             reward R = 1[all tests pass] - length_alpha * tokens / 100   (the DeepSeek-Coder LoRA-RL report's length penalty)
3. ADVANTAGE `course_lib.core.rl.advantages`, by the method's estimator (`rl.METHODS`, the GRU's too)
4. UPDATE    `course_lib.core.rl.learn` (+ the SFT terms for teacher-grpo), AdamW on the adapter's parameters:
             the RL core that trains chapter 6's GRU, with this model as its policy (`course_lib.lm.lm_policy.LMActor`)

Steps 1-2 are `LMTrainer.collect`; `rl.Trainer.step`, the step chapter 6's GRU takes too, runs all four.

Data rules. Rollouts use the tests of `train` and `val` tasks (never their solutions); a
`test` task is refused. The teacher is asked about `train` tasks only, and an offline teacher
answers with train reference solutions only; `course_lib.lm.llm_teacher.teacher_examples` checks both.

The reference model. `course_lib.lm.lm_policy.load_policy` merges a starting adapter (chapter 9's SFT) into the base
weights and puts a fresh LoRA on top, so "adapter disabled" is exactly the starting policy:
GRPO's KL term pulls towards the SFT model, and it is zero at step 0.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Sequence

import numpy as np
import torch

from course_lib.config import option, override, renamed, require
from course_lib.core import rl, update
from course_lib.core.rollout import Episode, Rollout, written_rollout
from course_lib.core.samplers import ShuffledPasses
from course_lib.corpus import Example
from course_lib.lm.decode import ENGINES
from course_lib.lm.evaluation import generate
from course_lib.lm.llm import _to, encode_prompt, sft_batch
from course_lib.lm.llm_teacher import OfflineTeacher, Teacher, teacher_examples
# length_penalised_reward and rollout_tasks are named through this module by chapters 10-11 and the commands
from course_lib.lm.lm_reward import length_penalised_reward, lm_reward, rollout_pool, rollout_tasks  # noqa: F401
from course_lib.lm.lm_policy import LEARNER_DTYPES, LMActor, value_head_for
from course_lib.lm.protocol import CHAT, STYLES, answer_code, prompt_for, stop_sequences_for
from course_lib.progress import tqdm
from course_lib.runs import check_same_settings, save_run_state
from course_lib.sandbox import task_reports


# -----------------------------------------------------------------------------
# configuration: every knob of the loop in one place

@dataclass
class RLConfig(rl.RLSettings):
    method: str = override(rl.RLSettings, "method", "grpo")
    steps: int = option(20, "optimiser rounds (one rollout batch each)")
    prompts_per_step: int = option(8, "tasks per rollout batch")
    temperature: float = override(rl.RLSettings, "temperature", 0.8)
    length_alpha: float = option(0.01, "the DeepSeek-Coder LoRA-RL report's length penalty: R = pass - alpha * tokens / 100")
    min_std: float = option(0.0, "floor of the std that normalises advantages (grpo); 0 = the textbook formula")
    teacher_sft_weight: float = option(0.3, "the teacher-guided GRPO README's w_t: SFT on the teacher's answers "
                                            "(teacher-grpo)")
    self_sft_weight: float = option(0.2, "the teacher-guided GRPO README's w_s: SFT on the best passing own sample "
                                         "of each group (teacher-grpo)")
    style: str = option("completion", "prompt format: the task's prompt, the teacher-guided GRPO README's <think> + "
                                      "```python instruction, or the model's chat template (an instruct model)",
                        choices=STYLES + (CHAT,))
    engine: str = option("auto", "what samples the rollouts: fast (course_lib.lm.decode), fast-bf16 (its bfloat16 "
                                 "weights, for CPUs with AVX512-BF16) or hf (Hugging Face's generate); auto: fast for "
                                 "a Llama-family model (CPU or GPU), else hf. The learner always scores the sampled ids "
                                 "itself",
                         choices=("auto",) + ENGINES)
    is_cap: float = option(2.0, "truncated importance sampling when the engine is not the learner: each token's "
                                "advantage times min(pi_learner / pi_sampler, is_cap); 0: off")
    score_tokens: int | None = option(1024, "on a CPU, the most tokens (rows x padded width) the learner scores in one "
                                            "pass: rows of similar length go together, so little is padding; none: "
                                            "all rows in one pass (a GPU always does)", int)
    learner_dtype: str = option("float32", "the learner's arithmetic: float32, or bfloat16 (torch.autocast: faster on "
                                           "processors with bfloat16 arithmetic, e.g. AVX512-BF16 or AMX, slower without; "
                                           "coarser log-probabilities)", choices=LEARNER_DTYPES)
    micro_batch_size: int | None = option(None, "rows scored and back-propagated at once in the update (less memory, "
                                                "the same update: gradients accumulate); none: all of a step's rows", int)

    def validate(self) -> None:
        super().validate()  # the core's knobs (course_lib.core.rl.RLSettings)
        require(self.style in STYLES + (CHAT,), f"unknown prompt style {self.style!r}; choose one of {STYLES + (CHAT,)}")
        for name in ("steps", "prompts_per_step"):
            require(getattr(self, name) >= 1, f"{name} must be at least 1, got {getattr(self, name)}")
        for name in ("length_alpha", "min_std", "teacher_sft_weight", "self_sft_weight", "is_cap"):
            require(getattr(self, name) >= 0, f"{name} must be >= 0, got {getattr(self, name)}")
        require(self.score_tokens is None or self.score_tokens >= 1,
                f"score_tokens must be at least 1 (or none: one pass), got {self.score_tokens}")
        require(self.micro_batch_size is None or self.micro_batch_size >= 1,
                f"micro_batch_size must be at least 1 (or none), got {self.micro_batch_size}")

    def unused(self, method: str | None = None) -> dict[str, str]:
        name = method or self.method
        method = rl.METHODS[name]
        why = super().unused(name)
        if not (method.grouped and method.normalise):
            why["min_std"] = f"{name} does not divide by a group's std"
        if not method.teacher_terms:
            why.update(dict.fromkeys(("teacher_sft_weight", "self_sft_weight"), f"{name} has no teacher terms"))
        return why


# -----------------------------------------------------------------------------
# the loop

def learner(model, tokenizer, config: RLConfig, value_head=None) -> LMActor:
    """The policy as the learner scores it under these settings: the same for log pi_old (`rollout`) and for
    the loss (`LMTrainer`), so the first epoch's ratio starts at 1."""
    return LMActor(model, tokenizer, config.temperature, value_head, score_tokens=config.score_tokens,
                   dtype=config.learner_dtype)


def rollout(model, tokenizer, tasks, config: RLConfig, seed: int, value_head=None,
            times: dict | None = None) -> Rollout:
    """1. sample group_size completions per task; 2. run them in the sandbox and score them.

    The Rollout (`course_lib.core.rollout.Rollout`, the GRU's too) holds the ids sampled, their
    log-probabilities under the learner (the policy being trained, scoring the ids it sampled;
    and V(s_t) when there is a value head), the sampler's own log-probabilities when a fast
    engine sampled them, and each sample's reward on its last token; episodes[i].completion is the
    text it is imitated by. times, if given, receives the seconds of each part: generate, sandbox, score.
    """
    clock = time.perf_counter()
    prompts = [prompt_for(t, config.style, tokenizer) for t in tasks]
    gens = generate(model, tokenizer, prompts, n_samples=config.group_size, temperature=config.temperature,
                    max_new_tokens=config.max_new_tokens, stop_sequences=stop_sequences_for(config.style), seed=seed,
                    engine=None if config.engine == "auto" else config.engine)
    generated = time.perf_counter()
    sample_tasks = [tasks[g.prompt_index] for g in gens]
    codes = [answer_code(t, g.text, config.style) for t, g in zip(sample_tasks, gens)]
    reports = task_reports(sample_tasks, codes, timeout=config.sandbox_timeout)
    sandboxed = time.perf_counter()
    reward = lm_reward(config.length_alpha)
    rewards = torch.tensor([reward(t, code, r, n_tokens=g.n_tokens)
                            for t, code, r, g in zip(sample_tasks, codes, reports, gens)])
    episodes = [Episode(task_id=t.id, completion=g.completion if config.style == "completion" else g.text,
                        actions=list(g.ids), terminated=g.finish == "eos", truncated=g.finish == "length",
                        reward=float(rw), passed=r.passed, total=r.total, status=getattr(r.status, "value", str(r.status)))
                for t, g, r, rw in zip(sample_tasks, gens, reports, rewards)]
    actor = learner(model, tokenizer, config, value_head)
    ro = written_rollout(tokenizer, [prompts[g.prompt_index] for g in gens], [g.ids for g in gens], rewards=rewards,
                         tasks=sample_tasks, episodes=episodes, encode=lambda p: encode_prompt(tokenizer, p),
                         pad_id=actor.pad_id)
    if gens and gens[0].logprobs:  # a fast engine sampled: its own log-probabilities, for the correction
        ro.sampler_logprobs = torch.zeros_like(ro.logprobs)
        for i, g in enumerate(gens):
            ro.sampler_logprobs[i, :len(g.logprobs)] = torch.tensor(g.logprobs)
    with torch.no_grad():  # log pi_old of the sampled ids (and V), read once before learning, by the learner
        ro.logprobs, _, values = actor.score(ro, torch.arange(len(gens)))
    if values is not None:
        ro.values = values
    if times is not None:
        times.update(generate_s=generated - clock, sandbox_s=sandboxed - generated,
                     score_s=time.perf_counter() - sandboxed)
    return ro


def _sft_loss(model, tokenizer, examples: Sequence[Example]) -> torch.Tensor:
    return model(**_to(sft_batch(tokenizer, examples), model.device)).loss


def best_own_samples(batch: Rollout, group_size: int, style: str, tokenizer=None) -> list[Example]:
    """Self-SFT data: in each group, the passing sample with the highest reward (none if none passed)."""
    out = []
    episodes = batch.episodes
    for start in range(0, len(episodes), group_size):
        members = [i for i in range(start, start + group_size) if episodes[i].all_passed]
        if members:
            i = max(members, key=lambda j: episodes[j].reward)
            task = batch.tasks[i]
            out.append(Example(prompt_for(task, style, tokenizer), episodes[i].completion, f"self:{task.id}"))
    return out


@dataclass(kw_only=True)
class LMStep(rl.StepInfo):
    """What LMTrainer.collect hands the step's SFT terms and its record."""
    teacher: list   # the teacher's answers to the step's prompts (teacher-grpo), as SFT examples
    own: list       # the best passing sample of each group (teacher-grpo's self-SFT)
    times: dict     # the seconds of the rollout's parts: generate, sandbox, score


class LMTrainer(rl.Trainer):
    """The language model in the RL core's `rl.Trainer`: the same `step` as chapter 6's GRU.

    collect      draw prompts_per_step tasks from the pool (each task once before any repeats) and roll them out
    extra_terms  teacher-grpo's w_t * SFT on the teacher's answers + w_s * SFT on each group's best passing sample
    record       one row: the rollouts' reward, pass rate and length, and the loss's last minibatch diagnostics
    `train_rl` builds one and calls `step` config.steps times (see it for the arguments).
    """

    def __init__(self, model, tokenizer, tasks, config: RLConfig, *, teacher: Teacher | None = None,
                 accelerator=None):
        pool = rollout_pool(list(tasks), config.rollout_splits)
        prompt_for(pool[0], config.style, tokenizer)  # a chat style without a chat template fails here, not mid-run
        params = [p for p in model.parameters() if p.requires_grad]
        if not params:
            raise ValueError("the model has no trainable parameters: add a LoRA adapter first (llm.add_lora or "
                             "load_policy)")
        policy = accelerator.unwrap_model(model) if accelerator is not None else model  # generation: the bare model
        method = rl.METHODS[config.method]
        self.value_head = value_head_for(policy) if method.critic else None  # PPO's critic
        if self.value_head is not None:
            params = params + list(self.value_head.parameters())
        if not hasattr(policy, "disable_adapter") and config.kl_weight > 0:
            raise ValueError(f"kl_coef={config.kl_weight} needs a peft model (the reference is the adapter disabled)")
        self.teacher_by_prompt: dict[str, list[Example]] = {}
        if method.teacher_terms:
            teacher = teacher or OfflineTeacher(config.style)
            if teacher.style != config.style:
                raise ValueError(f"the teacher answers {teacher.style!r} prompts but training uses {config.style!r}")
            for e in teacher_examples(teacher, pool, timeout=config.sandbox_timeout, tokenizer=tokenizer):
                self.teacher_by_prompt.setdefault(e.prompt, []).append(e)

        torch.manual_seed(config.seed)
        self.sampler = ShuffledPasses(pool, seed=config.seed)  # the order in which the pool's tasks are drawn
        self.rng = np.random.default_rng(config.seed)  # the order of each epoch's minibatches
        self.optimizer = torch.optim.AdamW(params, lr=config.lr, weight_decay=0.0)
        if accelerator is not None:
            self.optimizer = accelerator.prepare(self.optimizer)
            self.backward = self._distributed_backward
        self.model, self.policy, self.tokenizer, self.pool = model, policy, tokenizer, pool
        self.config, self.params, self.accelerator = config, params, accelerator
        self.actor = learner(policy, tokenizer, config, self.value_head)
        self.estimator, self.teacher_terms = method.estimator, method.teacher_terms
        self.advantage_options = dict(gamma=1.0, lam=config.gae_lambda, group_size=config.group_size,
                                      normalise=method.normalise, min_std=config.min_std)
        self.sampler_cap = config.is_cap
        self.loss_settings = update.LossSettings(loss=method.loss, epochs=config.epochs, clip_eps=config.clip_eps,
                                             critic=method.critic, value_clip_eps=None, vf_coef=config.vf_coef,
                                             kl_coef=config.kl_weight, max_grad_norm=config.max_grad_norm,
                                             micro_batch_size=config.micro_batch_size)
        self.history: list[dict] = []  # one row per step
        self.times: list[dict] = []  # the seconds of each step's parts: generate, sandbox, score, learn

    def collect(self) -> tuple[Rollout, LMStep]:
        """1-2. the step's tasks, group_size samples of each, scored in the sandbox (`rollout`)."""
        config = self.config
        chosen = self.sampler.draw(config.prompts_per_step)  # distinct tasks; rollout samples group_size of each
        step = len(self.history) + 1
        times: dict = {}
        batch = rollout(self.policy, self.tokenizer, chosen, config, seed=config.seed * 100_003 + step,
                        value_head=self.value_head, times=times)
        teacher = ([e for t in chosen
                    for e in self.teacher_by_prompt.get(prompt_for(t, config.style, self.tokenizer), [])]
                   if self.teacher_by_prompt else [])
        own = (best_own_samples(batch, config.group_size, config.style, self.tokenizer)
               if self.teacher_terms else [])
        return batch, LMStep(teacher=teacher, own=own, times=times)

    def extra_terms(self, info: LMStep):
        """teacher-grpo: + w_t * SFT on the teacher's answers + w_s * SFT on the best passing sample of each group."""
        config = self.config
        if not self.teacher_terms:
            return None

        def sft_terms(loss: torch.Tensor, stats: dict) -> torch.Tensor:
            for name, weight, data in (("teacher_sft", config.teacher_sft_weight, info.teacher),
                                       ("self_sft", config.self_sft_weight, info.own)):
                if data and weight:
                    term = _sft_loss(self.model, self.tokenizer, data)
                    loss = loss + weight * term
                    stats[f"{name}_loss"] = term.item()
            stats["loss"] = loss.item()
            return loss

        return sft_terms

    def record(self, ro: Rollout, info: LMStep, adv, returns, logs: list[dict], epochs_done: int,
               early_stop: bool) -> dict:
        passed = [e.all_passed for e in ro.episodes]
        on_train = [p for p, t in zip(passed, ro.tasks) if t.split == "train"]
        group = self.config.group_size
        row = {"step": len(self.history) + 1, "reward": round(float(np.mean([e.reward for e in ro.episodes])), 4),
               "pass_rate": round(sum(passed) / len(passed), 4),
               "rollout_train_pass_rate": round(sum(on_train) / len(on_train), 4) if on_train else None,
               "avg_len": round(ro.mask.sum(1).mean().item(), 2),
               "groups_with_a_pass": sum(any(passed[i:i + group]) for i in range(0, len(passed), group)),
               **logs[-1], "teacher_examples": len(info.teacher), "self_examples": len(info.own),
               "nonzero_advantages": int((adv.abs() > 1e-8).any(dim=1).sum()),
               **{k: round(v, 6) for k, v in info.sampler.items()},
               "seconds": round(time.perf_counter() - info.started, 2)}
        self.times.append({**{k: round(v, 3) for k, v in info.times.items()}, "learn_s": round(info.learn_s, 3)})
        self.history.append(row)
        return row

    def save_state(self, path) -> None:
        """Everything the next step depends on, in one file (an atomic replace): the adapter, the value head,
        AdamW's moments, the random generators, the task order and the rows so far."""
        state = {"config": asdict(self.config), "history": self.history, "sampler": self.sampler.state_dict(),
                 "trainable": {n: p.detach().cpu() for n, p in self.model.named_parameters() if p.requires_grad},
                 "value_head": self.value_head.state_dict() if self.value_head is not None else None,
                 "optimizer": self.optimizer.state_dict(),
                 "learn_rng": self.rng.bit_generator.state, "torch_rng": torch.get_rng_state()}
        save_run_state(state, path)

    def load_state(self, path) -> None:
        state = torch.load(path, map_location="cpu", weights_only=False)  # our own file: holds RNG tuples
        check_same_settings(rl.with_kl_weight(renamed(state["config"])), rl.with_kl_weight(asdict(self.config)), path,
                            may_change=("micro_batch_size", "score_tokens"))  # the same update, in less memory or time
        named = dict(self.model.named_parameters())
        with torch.no_grad():
            for name, value in state["trainable"].items():
                named[name].copy_(value)
        if self.value_head is not None:
            self.value_head.load_state_dict(state["value_head"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.sampler.load_state_dict(state.get("sampler") or {"rng": state["rng"], "order": state["order"]})  # or older
        self.rng.bit_generator.state = state["learn_rng"]
        torch.set_rng_state(state["torch_rng"])
        self.history = state["history"]

    def _distributed_backward(self, loss: torch.Tensor) -> None:
        self.accelerator.backward(loss)
        if self.accelerator.num_processes > 1:  # the peft model is not DDP-wrapped (the GRPO reference is its
            for p in self.params:               # disable_adapter()), so average the adapter's gradients here
                p.grad = self.accelerator.reduce(p.grad, reduction="mean")


def train_rl(model, tokenizer, tasks, config: RLConfig | None = None, *, teacher: Teacher | None = None,
             eval_fn=None, eval_every: int = 0, progress: bool = True, accelerator=None, state_file=None,
             resume: bool = False, stop_after: int | None = None, **overrides) -> list[dict]:
    """Train model's LoRA parameters with config.method on the rollout tasks; one dict per step.

    tasks: the rollout pool (train and val tasks; only the splits in config.rollout_splits are used,
    and a test task raises). overrides: RLConfig fields, e.g. train_rl(m, t, tasks, method="ppo").
    teacher (teacher-grpo only): defaults to OfflineTeacher(config.style); its answers for the
    train tasks are fetched once, verified in the sandbox, and the step's tasks' answers join
    the loss. eval_fn(model) -> dict runs every eval_every steps and after the last.
    accelerator: an `accelerate.Accelerator` (chapter 11) for backward, which then averages the adapter's
        gradients over the processes; generation uses the unwrapped model.
    state_file: where everything the next step depends on is saved after every step (the adapter, the
        value head, AdamW's moments, the random generators, the task order, the rows so far); with
        resume=True a run that finds it there continues from it, and ends as an uninterrupted run would.
    stop_after: stop once this many steps are done (to be resumed later).
    Each row: step, reward (mean), pass_rate and avg_len of the rollouts (rollout_train_pass_rate: of
    the samples of train tasks), groups_with_a_pass, and the loss's diagnostics.
    """
    config = config or RLConfig()
    config = config.replace(**overrides)  # validated: a bad setting fails here, before any work
    trainer = LMTrainer(model, tokenizer, tasks, config, teacher=teacher, accelerator=accelerator)
    if resume and state_file is not None and Path(state_file).exists():
        trainer.load_state(state_file)
    last = config.steps if stop_after is None else min(config.steps, stop_after)
    for step in tqdm(range(len(trainer.history) + 1, last + 1), desc=config.method, disable=not progress,
                     unit="step", initial=len(trainer.history), total=config.steps):
        row = trainer.step()
        if eval_fn is not None and (step == config.steps or (eval_every and step % eval_every == 0)):
            row.update(eval_fn(trainer.policy))
        if state_file is not None:
            trainer.save_state(state_file)
    return trainer.history

