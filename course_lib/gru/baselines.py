"""Honest baselines for PPO: sampling and filtering, at the same wall time (chapter 6).

Is reinforcement learning better than simply sampling many programs and keeping
the ones that pass? Two answers to compare with the PPO trainer:

    best_of_n           sample N programs per task at temperature T from the pretrained
                        policy until the time budget is spent; a task counts as solved if
                        ANY sample passes its tests. This needs the tests at answer time
                        (pass@N, an upper bound on what filtering can show), and it changes
                        nothing in the model: greedy decoding is as before.
    expert_iteration    sample, keep what passes, fine-tune on it by cross-entropy, repeat
                        (with the train solutions mixed in, as the PPO trainer's behaviour
                        cloning does). What it found is then written by GREEDY decoding,
                        like PPO's policy: the fair comparison.

Both roll out the same tasks as the trainer (train + val; the val solutions are
never read, only their tests) and never a test task. Each logs a curve of
(wall seconds, result) so a figure can put all methods on one time axis.
"""

from __future__ import annotations

import time
from typing import Sequence

import numpy as np
import torch

from course_lib.core.samplers import TaskSampler
from course_lib.corpus import pretraining_texts
from course_lib.gru.pretrain import attempts, evaluate_policy
from course_lib.gru.teacher import PassingPrograms, teacher_losses
from course_lib.progress import tqdm


def best_of_n(model, tokenizer, tasks: Sequence, *, temperature: float = 1.5, samples_per_round: int = 4,
              rounds: int | None = None, time_budget: float | None = None, seed: int = 0, allowed_ids=None,
              max_new_tokens: int = 160, timeout: float = 2.0, progress: bool = True) -> dict:
    """Sample `samples_per_round` programs for every task not solved yet, round after round, until
    `rounds` rounds or `time_budget` seconds; return the curve and the first passing program per task.

    A fixed `rounds` makes the result repeatable; a `time_budget` matches another method's wall time.
    """
    if rounds is None and time_budget is None:
        raise ValueError("best_of_n needs rounds or time_budget (or both)")
    if any(t.split == "test" for t in tasks):
        raise ValueError("best_of_n is a baseline for the tasks RL may use; test tasks are never sampled here")
    tasks = list(tasks)
    generator = torch.Generator().manual_seed(seed)
    found: dict[str, str] = {}
    samples = 0
    start = time.perf_counter()
    curve = [{"round": 0, "wall_s": 0.0, "samples": 0, **_solved(tasks, found)}]
    bar = tqdm(total=rounds, desc="best-of-N", unit="round", disable=not progress)
    r = 0
    while (rounds is None or r < rounds) and (time_budget is None or time.perf_counter() - start < time_budget):
        todo = [t for t in tasks if t.id not in found]
        if not todo:
            break
        rows, completions, reports = attempts(model, tokenizer, todo, n=samples_per_round, temperature=temperature,
                                             generator=generator, allowed_ids=allowed_ids,
                                             max_new_tokens=max_new_tokens, timeout=timeout)
        samples += len(rows)
        for t, c, rep in zip(rows, completions, reports):
            if rep.all_passed and t.id not in found:
                found[t.id] = c
        r += 1
        curve.append({"round": r, "wall_s": round(time.perf_counter() - start, 2), "samples": samples,
                      **_solved(tasks, found)})
        bar.update(1)
    bar.close()
    return {"method": "best_of_n", "temperature": temperature, "rounds": r, "samples": samples,
            "wall_s": round(time.perf_counter() - start, 2), "curve": curve, "found": found,
            **{k: v for k, v in curve[-1].items() if k.endswith("solved")}}


def _solved(tasks, found) -> dict:
    """Fraction of tasks (per split) with at least one passing sample so far."""
    out = {}
    for split in ("train", "val"):
        ids = [t.id for t in tasks if t.split == split]
        if ids:
            out[f"{split}_solved"] = round(sum(i in found for i in ids) / len(ids), 4)
    return out


def expert_iteration(model, tokenizer, tasks: Sequence, *, rollout_splits=("train", "val"), temperature: float = 1.5,
                     episodes_per_round: int = 64, group_size: int = 4, rounds: int | None = None,
                     time_budget: float | None = None, finetune_steps: int = 4, lr: float = 3e-3,
                     batch_size: int = 32, bc_coef: float = 2.0, sil_coef: float = 0.5, per_task: int = 4,
                     unsolved_weight: float = 1.0, warmup_rounds: int = 3,
                     min_task_weight: float = 0.05, seed: int = 0, allowed_ids=None, max_new_tokens: int = 160,
                     timeout: float = 2.0, eval_every: int = 1, progress: bool = True) -> dict:
    """Expert iteration: each round samples episodes (tasks drawn like the PPO trainer's, leaning to the
    unsolved), keeps the programs that pass every test, then takes `finetune_steps` steps of
    bc_coef * cross-entropy on train solutions + sil_coef * cross-entropy on the kept programs: the PPO
    trainer's two teacher terms without its policy-gradient loss. Greedy pass@1 on train and val
    ("{split}_greedy_pass@1") is logged every `eval_every` rounds. The model is trained in place.
    """
    if rounds is None and time_budget is None:
        raise ValueError("expert_iteration needs rounds or time_budget (or both)")
    tasks = list(tasks)
    by_id = {t.id: t for t in tasks}
    rl_tasks = [t for t in tasks if t.split in rollout_splits]
    if not rl_tasks or any(t.split == "test" for t in rl_tasks):
        raise ValueError(f"rollout_splits={rollout_splits}: expected train and/or val tasks (never test)")
    torch.manual_seed(seed)
    generator = torch.Generator().manual_seed(seed)
    rng = np.random.default_rng(seed + 1)
    sampler = TaskSampler(rl_tasks, seed=seed, unsolved_weight=unsolved_weight, min_weight=min_task_weight)
    bc_examples = pretraining_texts("memorise", tasks=tasks, tokenizer=tokenizer)
    kept = PassingPrograms(per_task)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr, eps=1e-5)

    start = time.perf_counter()
    curve = []
    bar = tqdm(total=rounds, desc="expert iteration", unit="round", disable=not progress)
    r = 0
    while (rounds is None or r < rounds) and (time_budget is None or time.perf_counter() - start < time_budget):
        # sample and keep what passes
        drawn = sampler.draw(episodes_per_round // group_size, 1)
        rows, completions, reports = attempts(model, tokenizer, drawn, n=group_size, temperature=temperature,
                                             generator=generator, allowed_ids=allowed_ids,
                                             max_new_tokens=max_new_tokens, timeout=timeout)
        sampler.observe([_Outcome(t.id, rep.all_passed) for t, rep in zip(rows, reports)])
        for t, c, rep in zip(rows, completions, reports):
            if rep.all_passed and t.split != "train":  # train tasks: their own solutions are the teacher
                kept.add(t, c)
        # fine-tune on train solutions + kept programs (the learning rate warms up like the trainer's)
        for group in optimizer.param_groups:
            group["lr"] = lr * min(1.0, (r + 1) / warmup_rounds)
        losses = _imitate(model, tokenizer, optimizer, bc_examples, kept.examples(by_id), rng, steps=finetune_steps,
                          batch_size=batch_size, bc_coef=bc_coef, sil_coef=sil_coef)
        r += 1
        row = {"round": r, "wall_s": round(time.perf_counter() - start, 2), "samples": r * episodes_per_round,
               "loss": round(float(np.mean(losses)), 4) if losses else None,
               "val_tasks_found": sum(1 for t in rl_tasks if t.split == "val" and t.id in kept.programs)}
        if eval_every and r % eval_every == 0:
            greedy = evaluate_policy(model, tokenizer, rl_tasks, allowed_ids=allowed_ids,
                                     max_new_tokens=max_new_tokens, timeout=timeout)
            row.update({k: v for k, v in greedy.items() if k.endswith("_greedy_pass@1")})
        curve.append(row)
        bar.update(1)
    bar.close()
    return {"method": "expert_iteration", "temperature": temperature, "rounds": r,
            "wall_s": round(time.perf_counter() - start, 2), "curve": curve, "kept": kept.programs}


def _imitate(model, tokenizer, optimizer, bc_examples, own_examples, rng, *, steps: int, batch_size: int,
             bc_coef: float, sil_coef: float) -> list[float]:
    """Up to `steps` steps of bc_coef * cross-entropy on train solutions + sil_coef * cross-entropy on the
    programs kept so far (chapter 8's teacher terms); the losses taken (none while there is nothing to imitate)."""
    model.train()
    losses = []
    for _ in range(steps):
        bc, own = teacher_losses(model, tokenizer, bc_examples, own_examples, rng, batch_size)
        terms = [c * t for c, t in ((bc_coef, bc), (sil_coef, own)) if t is not None]
        if not terms:  # nothing to imitate yet
            break
        loss = sum(terms)
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        losses.append(loss.item())
    return losses


class _Outcome:
    """The two fields TaskSampler.observe reads from an episode."""

    def __init__(self, task_id: str, all_passed: bool):
        self.task_id, self.all_passed = task_id, all_passed
