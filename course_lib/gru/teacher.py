"""Teacher mixing: programs known to pass, fed to the PPO learner next to its own samples (chapter 8).

Reinforcement learning only sees what the policy samples. On tasks it already solves
that is fine, until the updates drift the weights and the old skill fades (chapter 6's
runs end a little below their pretrained start on the training tasks). A *teacher*
is a source of good programs the policy can keep learning from. Two ways to use one:

    teacher episodes   passing programs added to each update's batch as extra episodes
                       (PPO sees them with their reward, like its own samples)
    behaviour cloning  a cross-entropy term on the TRAIN tasks' reference solutions,
                       weighted by bc_coef, which a schedule may fade over the run

and one relative of both, self-imitation, which clones the policy's own passing programs.

Where teacher programs come from (`teacher_pool`):

    reference  the reference solutions of the TRAIN tasks (never val, never test)
    greedy     the pretrained policy's greedy programs on the rolled-out tasks, kept only
               if the sandbox says they pass every test
    both       the two together

Off-policy episodes and the ratio. PPO's ratio pi_new / pi_old needs pi_old, the
probability of each token under the policy that produced the batch. A teacher
program was not sampled by the policy, so we *define* its pi_old as the current
policy's probability of those very tokens, computed at rollout time with the same
mask and temperature (`teacher_rollout`). The ratio then starts at exactly 1 and is
clipped to [1 - eps, 1 + eps] like every other row: one update can raise a teacher
token's probability by at most the clip range, however unlikely the policy found it.
(The alternative, the true importance weight pi / pi_teacher, is 1 / tiny for a
deterministic teacher and blows up.) The reward is the sandbox's verdict on the
program; advantages come from the same GAE and the same normalisation as the
sampled rows. The sampled episodes alone make the logged reward and pass rates.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from course_lib.core.rollout import Episode, Rollout, written_rollout
from course_lib.corpus import Example, IGNORE_INDEX, drop_leaks, task_examples
from course_lib.gru.actor import GRUActor, run_gru
from course_lib.gru.models import generate
from course_lib.gru.pretrain import make_batch
from course_lib.rewards import fraction_passed, reward_of
from course_lib.sandbox import task_reports

TEACHER_SOURCES = ("off", "reference", "greedy", "both")
BC_SCHEDULES = ("constant", "linear", "cosine")


# =====================================================================================
# Where the teacher programs come from
# =====================================================================================

@dataclass(frozen=True)
class TeacherProgram:
    """One program known to pass: the task it solves, the completion, the reward it earns, where it came from."""
    task_id: str
    completion: str
    reward: float
    source: str      # "reference:<id>" or "greedy:<id>"


def teacher_pool(source: str, tasks, *, model=None, tokenizer=None, allowed_ids=None, max_new_tokens: int = 160,
                 timeout: float = 2.0, reward_fn=None) -> list[TeacherProgram]:
    """The teacher programs of a source ("reference", "greedy", "both"; "off": empty).

    reference: the TRAIN tasks' reference solutions, only (task_examples refuses any other split).
    greedy: the model's greedy completion of every train and val task (never test), kept if it passes
    every test in the sandbox. Any program holding a val/test reference solution is dropped (drop_leaks),
    whatever its source, and programs longer than max_new_tokens are skipped (an episode could not hold them).
    Every kept program is scored by the sandbox once, with reward_fn (default: fraction of tests passed).
    """
    if source not in TEACHER_SOURCES:
        raise ValueError(f"teacher source {source!r}: choose one of {TEACHER_SOURCES}")
    tasks = list(tasks)
    by_id = {t.id: t for t in tasks}
    candidates: list[Example] = []
    if source in ("reference", "both"):
        candidates += [Example(e.prompt, e.target, "reference:" + e.source.split(":", 1)[1])
                       for e in task_examples([t for t in tasks if t.split == "train"])]
    if source in ("greedy", "both"):
        if model is None or tokenizer is None:
            raise ValueError("teacher source 'greedy' needs the pretrained model and its tokenizer")
        rolled = [t for t in tasks if t.split in ("train", "val")]  # test tasks: never
        completions = generate(model, tokenizer, [t.prompt for t in rolled], max_new_tokens=max_new_tokens,
                               greedy=True, allowed_ids=allowed_ids)
        candidates += [Example(t.prompt, c, f"greedy:{t.id}") for t, c in zip(rolled, completions)]
    if tokenizer is not None:  # the episode holds the completion and <eos>
        candidates = [e for e in candidates if len(tokenizer.encode(e.target)) + 1 <= max_new_tokens]
    candidates = drop_leaks(candidates, tasks)
    if not candidates:
        return []
    ids = [e.source.split(":", 1)[1] for e in candidates]
    reports = task_reports([by_id[i] for i in ids], [e.target for e in candidates], timeout=timeout)
    reward_fn = reward_fn or fraction_passed
    pool, seen = [], set()
    for i, e, r in zip(ids, candidates, reports):
        if r.all_passed and (i, e.target) not in seen:  # a greedy program equal to the reference: once
            seen.add((i, e.target))
            n_tokens = len(tokenizer.encode(e.target)) if tokenizer is not None else None  # <eos> not counted
            pool.append(TeacherProgram(i, e.target, reward_of(reward_fn, by_id[i], e.target, r, n_tokens), e.source))
    return pool


def draw_teacher(pool: list[TeacherProgram], n: int, rng: np.random.Generator) -> list[TeacherProgram]:
    """n programs of the pool, uniformly without replacement (all of them if the pool is smaller)."""
    if n <= 0 or not pool:
        return []
    idx = rng.choice(len(pool), size=min(n, len(pool)), replace=False)
    return [pool[i] for i in sorted(idx)]


@torch.no_grad()
def teacher_rollout(model, tokenizer, tasks_by_id, programs: list[TeacherProgram], *, allowed: torch.Tensor,
                    temperature: float):
    """Teacher programs as a Rollout the PPO learner can read, like one it sampled.

    logprobs: the CURRENT policy's log-probability of each teacher token (same mask, same
    temperature as sampling), so the ratio starts at 1 and each teacher token is clipped like a
    sampled one.
    values: the critic's, as for sampled rows. rewards: the program's reward on its last token.
    """
    tasks = [tasks_by_id[p.task_id] for p in programs]
    ids = [tokenizer.encode(p.completion) + [tokenizer.eos_id] for p in programs]
    allowed_ids = set(allowed.nonzero().flatten().tolist())
    for p, row in zip(programs, ids):
        if not set(row) <= allowed_ids:
            raise ValueError(f"teacher program {p.source} uses tokens outside the action mask; "
                             "the policy could never write it")
    episodes = [Episode(task_id=p.task_id, completion=p.completion, actions=row, terminated=True, truncated=False,
                        reward=p.reward, passed=len(t.tests), total=len(t.tests), status="teacher")
                for p, row, t in zip(programs, ids, tasks)]
    ro = written_rollout(tokenizer, [t.prompt for t in tasks], ids, rewards=[p.reward for p in programs],
                         tasks=tasks, episodes=episodes)
    was_training = model.training
    model.eval()
    ro.logprobs, _, ro.values = GRUActor(model, allowed=allowed, temperature=temperature).score(
        ro, torch.arange(len(ids)))
    model.train(was_training)
    return ro


def merge_rollouts(a, b, pad_id: int):
    """One Rollout holding a's rows, then b's (prompts re-indexed, time padded to the longer of the two)."""
    T = max(a.actions.shape[1], b.actions.shape[1])

    def cat(x, y, value=0.0):
        return torch.cat([torch.nn.functional.pad(z, (0, T - z.shape[1]), value=value) for z in (x, y)])

    return Rollout(tasks=a.tasks + b.tasks, episodes=a.episodes + b.episodes, prompts=a.prompts + b.prompts,
                   prompt_index=torch.cat([a.prompt_index, b.prompt_index + len(a.prompts)]),
                   actions=cat(a.actions, b.actions, pad_id), logprobs=cat(a.logprobs, b.logprobs),
                   values=cat(a.values, b.values), mask=cat(a.mask, b.mask), rewards=cat(a.rewards, b.rewards),
                   bootstrap=torch.cat([a.bootstrap, b.bootstrap]))


# =====================================================================================
# Behaviour cloning and self-imitation: cross-entropy on programs that pass
# =====================================================================================

def bc_weight(update: int, updates: int, bc_coef: float, schedule: str = "constant", final: float = 0.0) -> float:
    """The behaviour-cloning weight at an update: bc_coef, faded towards bc_coef * final over the run.

    constant: bc_coef throughout. linear: a straight line from bc_coef (update 0) to bc_coef * final
    (the last update). cosine: the same ends along half a cosine (slow start, slow finish).
    """
    if schedule not in BC_SCHEDULES:
        raise ValueError(f"bc schedule {schedule!r}: choose one of {BC_SCHEDULES}")
    if schedule == "constant" or updates <= 1:
        return bc_coef
    progress = min(max(update / (updates - 1), 0.0), 1.0)
    fade = 1 - progress if schedule == "linear" else 0.5 * (1 + math.cos(math.pi * progress))
    return bc_coef * (final + (1 - final) * fade)


class PassingPrograms:
    """The policy's own programs that passed every test, at most `per_task` per task (the shortest)."""

    def __init__(self, per_task: int):
        self.per_task = per_task
        self.programs: dict[str, list[str]] = {}

    def add(self, task, completion: str) -> bool:
        kept = self.programs.setdefault(task.id, [])
        if completion in kept:
            return False
        kept.append(completion)
        kept.sort(key=lambda c: (len(c), c))
        del kept[self.per_task:]
        return completion in kept

    def examples(self, tasks_by_id) -> list:
        return [Example(tasks_by_id[task_id].prompt, c, f"self:{task_id}")
                for task_id in sorted(self.programs) for c in self.programs[task_id]]

    def __len__(self) -> int:
        return len(self.programs)


def teacher_losses(model, tokenizer, bc_examples, sil_examples, rng: np.random.Generator, batch_size: int):
    """Cross-entropy by teacher forcing (chapter 4) on a random batch of each list, in ONE forward pass.

    Returns (bc_loss, sil_loss): the mean loss per target token of each group (on the model's device),
    None for an empty list.
    """
    groups = [[examples[i] for i in sorted(rng.choice(len(examples), size=min(batch_size, len(examples)),
                                                       replace=False))] if examples else []
              for examples in (bc_examples, sil_examples)]
    if not groups[0] and not groups[1]:
        return None, None
    device = model.embed.weight.device
    inputs, targets, loss_mask = (x.to(device) for x in make_batch(tokenizer, groups[0] + groups[1]))
    lengths = torch.tensor([len(tokenizer.encode(e.prompt + e.target)) + 1 for e in groups[0] + groups[1]])
    logits, _ = run_gru(model, inputs, lengths)  # <bos> + text: as many inputs as text tokens + 1
    per_token = torch.nn.functional.cross_entropy(
        logits.transpose(1, 2), targets.masked_fill(~loss_mask, IGNORE_INDEX), ignore_index=IGNORE_INDEX,
        reduction="none")                                     # [N, T], 0 where ignored
    out, start = [], 0
    for group in groups:
        rows = slice(start, start + len(group))
        out.append(per_token[rows].sum() / loss_mask[rows].sum() if group else None)
        start += len(group)
    return tuple(out)
