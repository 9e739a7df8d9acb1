"""Chapter 10's GRPO in TRL's GRPOTrainer: the settings map, the course's reward, the adapter trains."""

from __future__ import annotations

import os
from types import SimpleNamespace

import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from course_lib.lm import lm_policy, trl_grpo  # noqa: E402
from course_lib.lm.llm_rl import RLConfig  # noqa: E402

CHAPTER_10 = dict(method="grpo", style="chat", steps=6, prompts_per_step=4, group_size=4, lr=1e-3, temperature=0.8,
                  max_new_tokens=128, length_alpha=0.0, clip_eps=0.2, epochs=2, kl_coef=0.05)


def test_trl_settings_write_the_course_run_as_grpo_config_fields(tmp_path):
    from trl import GRPOConfig

    settings = trl_grpo.trl_settings(RLConfig(**CHAPTER_10, seed=3))
    args = GRPOConfig(output_dir=str(tmp_path), report_to="none", use_cpu=True, **settings)
    # one rollout batch = 4 prompts x 4 samples, two epochs on it, six batches
    assert (args.per_device_train_batch_size, args.num_generations, args.num_iterations, args.max_steps) == (16, 4, 2, 12)
    assert (args.learning_rate, args.beta, args.epsilon, args.temperature, args.max_completion_length, args.seed) == (
        1e-3, 0.05, 0.2, 0.8, 128, 3)
    assert args.loss_type == "dapo" and args.scale_rewards == "group" and args.lr_scheduler_type == "constant"
    # the defaults the chapter names are TRL's own (a TRL upgrade that changes one fails here)
    bare = GRPOConfig(output_dir=str(tmp_path), report_to="none", use_cpu=True)
    assert {k: getattr(bare, k) for k in trl_grpo.TRL_DEFAULTS} == trl_grpo.TRL_DEFAULTS


@pytest.mark.parametrize("change, message", [(dict(method="ppo"), "runs GRPO"),
                                             (dict(length_alpha=0.01), "length_alpha=0")])
def test_trl_settings_refuse_what_trl_would_not_run_the_same(change, message):
    with pytest.raises(ValueError, match=message):
        trl_grpo.trl_settings(RLConfig(**{**CHAPTER_10, **change}))


def test_the_trl_reward_is_the_course_reward_from_the_sandbox(tasks):
    task = next(t for t in tasks if t.split == "train")
    right = f"Here it is:\n```python\n{task.prompt}{task.solution}\n```\nIt returns the answer."
    wrong = f"```python\ndef {task.entry_point}(*args):\n    return None\n```"
    reward = trl_grpo.sandbox_reward([task], "chat")
    assert reward.__name__ == "unit_tests"
    assert reward(prompts=["p", "p"], completions=[right, wrong], task_id=[task.id, task.id],
                  trainer_state=None) == [1.0, 0.0]


def test_trl_grpo_trains_only_the_adapter_and_refuses_test_tasks(small_dir, tasks, monkeypatch):
    def every_other_passes(pool, texts, style, timeout=2.0):
        return [SimpleNamespace(all_passed=i % 2 == 0) for i in range(len(texts))]

    monkeypatch.setattr(trl_grpo, "test_reports", every_other_passes)
    model, tokenizer = lm_policy.load_policy(str(small_dir), "cpu", seed=0)
    named = dict(model.named_parameters())
    before = {n: p.detach().clone() for n, p in named.items()}
    config = RLConfig(method="grpo", style="completion", steps=1, prompts_per_step=2, group_size=2, epochs=2,
                      max_new_tokens=8, length_alpha=0.0)
    with pytest.raises(ValueError, match="held-out test"):
        trl_grpo.train_trl_grpo(model, tokenizer, tasks, config)
    log = trl_grpo.train_trl_grpo(model, tokenizer, [t for t in tasks if t.split == "train"], config)
    assert len(log) == 2 and log[0]["reward"] == 0.5  # two optimiser steps (epochs) on one batch of 4
    moved = {n for n, p in named.items() if not torch.equal(before[n], p.detach())}
    assert moved and all("lora_" in n for n in moved)
    curve = trl_grpo.course_curve(log, config.epochs)  # one row per rollout batch, as train_rl writes them
    assert [r["step"] for r in curve] == [1] and curve[0]["reward"] == 0.5 and curve[0]["kl_ref"] == log[1]["kl"]
