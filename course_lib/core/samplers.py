"""Which tasks an update rolls out (chapters 5-11).

    TaskSampler        draws each update's tasks, leaning towards those not yet solved (the GRU's PPO)
    ShuffledPasses     draws them in shuffled passes over the pool, every task once before any repeats
                       (the language model's rollouts, chapters 10-11); the same interface as TaskSampler

Both refuse `test` tasks: they are never trained on.
"""

from __future__ import annotations

import random
from collections import Counter

import numpy as np


class TaskSampler:
    """Draws the tasks of each update's episodes, leaning towards the tasks that still fail.

    A share `train_share` of each draw comes from train tasks, the rest from val tasks
    (when both are rolled out). Within a split, weight(task) = max(min_weight,
    1 - unsolved_weight * recent pass rate), the recent pass rate being an exponential
    moving average of its rollouts' all-tests-passed. Its state (random generator and
    pass rates) is saved with the run, so a resumed run draws the same tasks.
    `drawn` records every task id it ever returned.
    """

    def __init__(self, tasks, *, seed: int, unsolved_weight: float, min_weight: float,
                 train_share: float = 0.25, ema: float = 0.7):
        self.tasks = list(tasks)
        if any(t.split == "test" for t in self.tasks):
            raise ValueError("the task sampler refuses test tasks: they are never trained on")
        self.rng = np.random.default_rng(seed)
        self.unsolved_weight, self.min_weight, self.ema = unsolved_weight, min_weight, ema
        self.train_share = train_share
        self.pass_rate = {t.id: 0.0 for t in self.tasks}
        self.drawn: list[str] = []

    def weights(self, tasks) -> np.ndarray:
        w = np.array([1 - self.unsolved_weight * self.pass_rate[t.id] for t in tasks])
        w = np.maximum(w, self.min_weight)
        return w / w.sum()

    def draw(self, n_tasks: int, per_task: int = 1):
        """n_tasks distinct tasks (weighted, without replacement), each repeated per_task times."""
        groups = [[t for t in self.tasks if t.split == s] for s in ("train", "val")]
        groups = [g for g in groups if g]
        if len(groups) == 2:
            n_train = min(len(groups[0]), round(n_tasks * self.train_share))
            counts = [n_train, min(len(groups[1]), n_tasks - n_train)]
        else:
            counts = [min(len(groups[0]), n_tasks)]
        picked = []
        for group, n in zip(groups, counts):
            idx = self.rng.choice(len(group), size=n, replace=False, p=self.weights(group)) if n else []
            picked += [group[i] for i in sorted(idx)]
        tasks = [t for t in picked for _ in range(per_task)]
        self.drawn += [t.id for t in tasks]
        return tasks

    def observe(self, episodes) -> None:
        by_task: dict[str, list[bool]] = {}
        for e in episodes:
            by_task.setdefault(e.task_id, []).append(e.all_passed)
        for task_id, passed in by_task.items():
            self.pass_rate[task_id] = self.ema * self.pass_rate[task_id] + (1 - self.ema) * float(np.mean(passed))

    def state_dict(self) -> dict:
        return {"rng": self.rng.bit_generator.state, "pass_rate": dict(self.pass_rate)}

    def load_state_dict(self, state: dict) -> None:
        self.rng.bit_generator.state = state["rng"]
        self.pass_rate = dict(state["pass_rate"])


class ShuffledPasses:
    """Draws tasks in shuffled passes over the pool: every task once before any task a second time.

    The sampler of the language model's rollouts (`llm_rl.LMTrainer`), with TaskSampler's interface
    (draw, observe, state_dict, load_state_dict, drawn); a step's tasks are distinct, so a pass that
    ends mid-step continues with a freshly shuffled one, skipping the tasks the step already has.
    """

    def __init__(self, tasks, *, seed: int):
        self.tasks = list(tasks)
        if any(t.split == "test" for t in self.tasks):
            raise ValueError("the task sampler refuses test tasks: they are never trained on")
        twice = sorted(i for i, n in Counter(t.id for t in self.tasks).items() if n > 1)
        if twice:  # a step's tasks are distinct: a pool with a task twice could never fill a step
            raise ValueError(f"the pool holds task(s) {twice} more than once; pass each task once")
        self.rng = random.Random(seed)
        self.order: list = []  # the rest of the current pass, drawn from the end
        self.drawn: list[str] = []

    def draw(self, n_tasks: int, per_task: int = 1):
        """n_tasks distinct tasks (all of them if the pool is smaller), each repeated per_task times."""
        chosen = []
        while len(chosen) < min(n_tasks, len(self.tasks)):
            if not self.order:
                self.order = self.rng.sample(self.tasks, len(self.tasks))
            task = self.order.pop()
            if task not in chosen:
                chosen.append(task)
        tasks = [t for t in chosen for _ in range(per_task)]
        self.drawn += [t.id for t in tasks]
        return tasks

    def observe(self, episodes) -> None:
        """Nothing: the passes do not depend on what passed."""

    def state_dict(self) -> dict:
        return {"rng": self.rng.getstate(), "order": [t.id for t in self.order]}

    def load_state_dict(self, state: dict) -> None:
        by_id = {t.id: t for t in self.tasks}
        self.rng.setstate(state["rng"])
        self.order = [by_id[i] for i in state["order"]]
