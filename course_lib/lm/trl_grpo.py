"""The course's GRPO run in TRL's `GRPOTrainer` (chapter 10): the library readers use after the course.

TRL (Hugging Face's Transformer Reinforcement Learning library) trains the same model with the
same LoRA and the same reward; only the loop is TRL's. Three pieces connect the two:

    sandbox_reward(tasks, style)   TRL's reward-function signature around the course's reward: the
                                   answer's function (`protocol.answer_code`) run against the task's
                                   tests in the sandbox (`lm_reward.test_reports`), 1 if every test passes
    trl_settings(config)           the course's `llm_rl.RLConfig` written as `trl.GRPOConfig` fields,
                                   one per knob, with TRL's own default beside each where it differs
    train_trl_grpo(...)            build the dataset of prompts, run `GRPOTrainer`, return its log

Where the two loops still differ (both named in chapter 10): TRL divides the group's reward spread
by the unbiased std plus 1e-4 (the course: the biased std plus 1e-6), TRL logs the reward of the
batch it generated, and TRL draws prompts with its own sampler (the course: `train_rl`'s shuffled
order). Everything else is set equal by `trl_settings`.
"""

from __future__ import annotations

import tempfile
from typing import Sequence

from course_lib.core import rl
from course_lib.lm.llm_rl import RLConfig
from course_lib.lm.lm_reward import rollout_pool, test_reports
from course_lib.lm.protocol import prompt_for

# TRL's GRPOConfig fields that the course's RLConfig sets, and TRL's default for each (trl 1.16.0),
# so a reader sees what a bare GRPOConfig() would have done differently.
TRL_DEFAULTS = {"learning_rate": 1e-6, "beta": 0.0, "num_iterations": 1, "loss_type": "dapo",
                "scale_rewards": "group", "lr_scheduler_type": "linear", "temperature": 1.0,
                "max_completion_length": 512, "epsilon": 0.2, "max_grad_norm": 1.0, "bf16": True,
                "gradient_checkpointing": True, "use_cache": False}


def sandbox_reward(tasks: Sequence, style: str, timeout: float = 2.0):
    """A TRL reward function: `reward(prompts, completions, task_id, **_) -> list[float]`.

    TRL passes every extra column of the dataset as a keyword, so each row carries its task's id;
    the reward is the course's: 1.0 when the function in the answer passes every test, else 0.0.
    """
    by_id = {t.id: t for t in tasks}

    def reward(prompts, completions, task_id, **_) -> list[float]:
        reports = test_reports([by_id[i] for i in task_id], completions, style, timeout)
        return [float(r.all_passed) for r in reports]

    reward.__name__ = "unit_tests"  # the name TRL logs the reward under: rewards/unit_tests/mean
    return reward


def trl_settings(config: RLConfig) -> dict:
    """The GRPOConfig fields that make TRL's GRPO the course's GRPO (`config.method` must be "grpo").

    One TRL "step" is one optimiser step; the course's step is one rollout batch followed by
    `config.epochs` optimiser steps on it (TRL's num_iterations), so TRL runs steps * epochs of them.
    """
    if rl.METHODS[config.method] != rl.METHODS["grpo"]:  # its parts: TRL adds no critic and no teacher terms
        raise ValueError(f"TRL's GRPOTrainer runs GRPO; this config's method is {config.method!r}")
    if config.length_alpha:
        raise ValueError("the length penalty needs the token count, which this reward does not see: "
                         "set length_alpha=0 to compare with TRL")
    batch = config.prompts_per_step * config.group_size
    return dict(
        per_device_train_batch_size=batch,      # one rollout batch: prompts_per_step groups of group_size
        gradient_accumulation_steps=1,
        num_generations=config.group_size,      # GRPO's group
        num_iterations=config.epochs,           # epochs on each rollout batch (TRL's mu)
        max_steps=config.steps * config.epochs,
        learning_rate=config.lr,
        lr_scheduler_type="constant",           # the course's AdamW keeps its learning rate
        weight_decay=0.0,
        max_grad_norm=config.max_grad_norm,
        beta=config.kl_weight,                  # the KL to the adapter-disabled model, k3 estimator in both
        epsilon=config.clip_eps,
        loss_type="dapo",                       # both: the mean over every completion token of the batch
        scale_rewards="group",                  # both: (R - group mean) / group std
        temperature=config.temperature,
        top_k=0, top_p=1.0,                     # both sample the full distribution
        max_completion_length=config.max_new_tokens,
        seed=config.seed,
        bf16=False,                             # the course computes in float32 on a CPU
        gradient_checkpointing=False,           # TRL's default saves memory by recomputing activations
        use_cache=True,                         # the key-value cache while generating (transformers' trainer
                                                # turns it off by default: each new token then re-reads the
                                                # whole sequence)
    )


def train_trl_grpo(model, tokenizer, tasks, config: RLConfig, *, output_dir=None, **trl_overrides) -> list[dict]:
    """Train model (a peft model: its reference is the adapter disabled) with TRL's GRPOTrainer.

    tasks: the rollout pool (train/val tasks; a test task raises, as in `llm_rl.train_rl`).
    trl_overrides: GRPOConfig fields to set beyond `trl_settings(config)`, e.g. loss_type="grpo".
    Returns TRL's log, one dict per optimiser step (kl, clip ratio, ...; the reward and the completions'
    length on the steps that generated a batch).
    """
    # trl and datasets import slowly and only this function needs them
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    pool = rollout_pool(list(tasks), config.rollout_splits)
    dataset = Dataset.from_list([{"prompt": prompt_for(t, config.style, tokenizer), "task_id": t.id} for t in pool])
    with tempfile.TemporaryDirectory() as scratch:
        args = GRPOConfig(output_dir=str(output_dir or scratch), report_to="none", save_strategy="no",
                          logging_steps=1, use_cpu=model.device.type == "cpu", disable_tqdm=True,
                          **{**trl_settings(config), **trl_overrides})
        trainer = GRPOTrainer(model=model, processing_class=tokenizer, args=args, train_dataset=dataset,
                              reward_funcs=sandbox_reward(pool, config.style, config.sandbox_timeout))
        trainer.train()
    model.eval()
    return [row for row in trainer.state.log_history if "train_runtime" not in row]  # not the run's summary


def course_curve(history: list[dict], epochs: int) -> list[dict]:
    """TRL's log (`train_trl_grpo`'s return) as `llm_rl.train_rl`'s rows: one per rollout batch. TRL logs
    the reward on the optimiser step that generated the batch, and the next epochs - 1 steps reuse it;
    each row has that round's reward and length, the KL and clip fraction of its last step, and its seconds."""
    rounds = [history[i:i + epochs] for i in range(0, len(history), epochs)]
    return [{"step": n, "reward": round(r[0]["reward"], 4), "pass_rate": round(r[0]["reward"], 4),
             "avg_len": round(r[0]["completions/mean_length"], 2), "kl_ref": r[-1]["kl"],
             "clip_frac": r[-1]["clip_ratio/region_mean"], "seconds": round(sum(x["step_time"] for x in r), 2)}
            for n, r in enumerate(rounds, start=1)]

