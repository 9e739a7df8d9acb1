"""Teacher mixing (chapter 8): no held-out solution reaches teacher or BC data; off-policy rows; the schedule."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from course_lib.gru import teacher as te
from course_lib.gru import trainer as tr
from course_lib.gru.checkpoints import load_checkpoint
from course_lib.corpus import Example, find_leaks
from course_lib.gru.actor import evaluate_actions
from course_lib.tasks import load_tasks
from course_lib.tokenizers import course_tokenizer
from course_lib.gru.trainer import ConfigError, PPOConfig, PPOTrainer

PRETRAINED = Path(__file__).resolve().parents[1] / "notebooks" / "checkpoints" / "gru_pretrained.pt"
TASKS = load_tasks()
HELD_OUT = {t.id: t for t in TASKS if t.split != "train"}


def as_examples(programs):
    by_id = {t.id: t for t in TASKS}
    return [Example(by_id[p.task_id].prompt, p.completion, p.source) for p in programs]


@pytest.fixture(scope="module")
def pretrained():
    tok = course_tokenizer()
    model, _, _ = load_checkpoint(PRETRAINED, tokenizer=tok)
    return model, tok


def test_reference_teacher_is_train_solutions_only():
    pool = te.teacher_pool("reference", TASKS)
    assert pool and {p.source.split(":")[0] for p in pool} == {"reference"}
    assert all(p.task_id not in HELD_OUT for p in pool)
    assert all(p.reward == 1.0 for p in pool)  # a reference solution passes every test
    assert find_leaks(as_examples(pool), TASKS) == []


def test_a_greedy_teacher_that_writes_held_out_solutions_is_filtered(monkeypatch, pretrained):
    """Worst case: a 'teacher' whose greedy program for every task is that task's reference solution.
    Train ones may stay; every val one must be dropped (and test tasks are never even rolled out)."""
    model, tok = pretrained
    asked = []

    def cheat(model, tokenizer, prompts, **kw):
        asked.extend(prompts)
        by_prompt = {t.prompt: t.solution for t in TASKS}
        return [by_prompt[p] for p in prompts]

    monkeypatch.setattr(te, "generate", cheat)  # the name teacher_pool calls
    pool = te.teacher_pool("greedy", TASKS, model=model, tokenizer=tok, max_new_tokens=400)
    assert not [p for p in asked if p in {t.prompt for t in TASKS if t.split == "test"}]
    assert pool and find_leaks(as_examples(pool), TASKS) == []
    assert {p.task_id for p in pool} <= {t.id for t in TASKS if t.split in ("train", "val")}


def test_no_val_or_test_solution_reaches_teacher_or_bc_data_in_a_run(monkeypatch, pretrained):
    """A real (short) run with both teacher sources and BC: everything the learner is fed is checked."""
    model, tok = pretrained
    fed_bc, fed_episodes = [], []
    real_losses, real_rollout = tr.teacher_losses, tr.teacher_rollout

    def spy_losses(model, tokenizer, bc_examples, sil_examples, rng, batch_size):
        fed_bc.extend(bc_examples)
        return real_losses(model, tokenizer, bc_examples, sil_examples, rng, batch_size)

    def spy_rollout(model, tokenizer, tasks_by_id, programs, **kw):
        fed_episodes.extend(programs)
        return real_rollout(model, tokenizer, tasks_by_id, programs, **kw)

    monkeypatch.setattr(tr, "teacher_losses", spy_losses)
    monkeypatch.setattr(tr, "teacher_rollout", spy_rollout)
    config = PPOConfig(updates=2, episodes_per_update=16, group_size=8, minibatch_size=16, epochs=1,
                       max_new_tokens=160, eval_every=0, teacher_batch_size=8, bc_coef=1.0, bc_schedule="linear",
                       teacher_source="both", teacher_episodes=8, plots=False, explore_episodes=0)
    trainer = PPOTrainer(config, model=model, tokenizer=tok, progress=False)
    # the start policy's passing greedy programs equal the references it memorised: kept once, as references
    assert {p.source.split(":")[0] for p in trainer.teacher_pool} <= {"reference", "greedy"}
    trainer.train()
    assert fed_bc and fed_episodes
    assert all(e.source.startswith("train:") for e in fed_bc)
    assert find_leaks(fed_bc, TASKS) == [] and find_leaks(as_examples(fed_episodes), TASKS) == []
    assert find_leaks(as_examples(trainer.teacher_pool), TASKS) == []
    assert not [p for p in fed_episodes if p.task_id in HELD_OUT and p.source.startswith("reference")]
    assert all(m["teacher_episodes"] == 8 and m["episodes"] == 16 for m in trainer.metrics)


def test_teacher_rows_start_at_ratio_one_and_merge_cleanly(pretrained):
    model, tok = pretrained
    tasks_by_id = {t.id: t for t in TASKS}
    from course_lib.gru.env import action_alphabet
    allowed = torch.zeros(len(tok), dtype=torch.bool)
    allowed[torch.as_tensor(action_alphabet(TASKS, tok))] = True
    pool = te.teacher_pool("reference", TASKS)
    programs = te.draw_teacher(pool, 5, np.random.default_rng(0))
    assert len(programs) == 5 and len(te.draw_teacher(pool, 10**6, np.random.default_rng(0))) == len(pool)
    ro = te.teacher_rollout(model, tok, tasks_by_id, programs, allowed=allowed, temperature=1.5)
    new, _, values = evaluate_actions(model, ro.prompts, ro.prompt_index, ro.actions, ro.mask,
                                         allowed=allowed, temperature=1.5)
    assert torch.allclose((new - ro.logprobs).exp()[ro.mask.bool()], torch.ones(()), atol=1e-5)  # ratio = 1
    assert torch.isfinite(ro.logprobs).all() and (ro.logprobs <= 0).all()
    assert ro.rewards.sum(1).tolist() == [1.0] * 5
    # merged with a second batch, every row reads back the same log-probabilities
    other = te.teacher_rollout(model, tok, tasks_by_id, programs[:2], allowed=allowed, temperature=1.5)
    merged = te.merge_rollouts(other, ro, tok.pad_id)
    again, _, _ = evaluate_actions(model, merged.prompts, merged.prompt_index, merged.actions, merged.mask,
                                      allowed=allowed, temperature=1.5)
    assert torch.allclose(again, merged.logprobs, atol=1e-5)
    assert merged.actions.shape[0] == 7 and len(merged.episodes) == 7


def test_bc_weight_schedules():
    assert [te.bc_weight(u, 10, 2.0) for u in (0, 5, 9)] == [2.0, 2.0, 2.0]
    for schedule in ("linear", "cosine"):
        w = [te.bc_weight(u, 10, 2.0, schedule, final=0.25) for u in range(10)]
        assert w[0] == pytest.approx(2.0) and w[-1] == pytest.approx(0.5)
        assert all(a >= b for a, b in zip(w, w[1:]))
    assert te.bc_weight(5, 11, 1.0, "linear") == pytest.approx(0.5)
    assert te.bc_weight(5, 11, 1.0, "cosine") == pytest.approx(0.5)
    assert te.bc_weight(2, 11, 1.0, "cosine") > te.bc_weight(2, 11, 1.0, "linear")  # cosine: slow start
    with pytest.raises(ValueError, match="choose one of"):
        te.bc_weight(0, 10, 1.0, "exponential")


def test_teacher_settings_are_checked_and_default_to_chapter_6():
    c = PPOConfig()
    assert (c.teacher_source, c.teacher_episodes, c.bc_schedule, c.bc_coef) == ("off", 0, "constant", 2.0)
    with pytest.raises(ConfigError, match="set both"):
        PPOConfig(teacher_source="reference")
    with pytest.raises(ConfigError, match="set both"):
        PPOConfig(teacher_episodes=4)
    with pytest.raises(ConfigError, match="bc_final"):
        PPOConfig(bc_final=1.5)
    with pytest.raises(ValueError, match="teacher source"):
        te.teacher_pool("oracle", TASKS)
