"""Scoring a policy's programs: one evaluator's numbers for both policies (chapters 4-11).

A policy writes completions its own way (the GRU: `course_lib.gru.pretrain`; the language model:
`course_lib.lm.evaluation`); `score` runs them in the sandbox, each after its task's prompt and
against its task's tests, and returns the same keys for either policy. A program *passes* when it
passes every test of its task. The measures, each defined once:

    greedy pass@1                          the fraction of tasks whose one greedy completion passes
                                           (decoding picks the likeliest token every step: one program
                                           per task, the same on every run)
    pass@1 from n samples at temperature T the mean over tasks of c / n, where c of a task's n sampled
                                           completions pass: the chance that one sample passes
    pass@k from n samples (k <= n)         the chance that at least one of k samples passes, estimated
                                           without bias from n and c (Chen et al., 2021; `pass_at_k`)

Keys, for each group of `course_lib.tasks.split_groups` (train, val, val_near, val_far, test, ...):

    "{group}_tasks"             how many tasks the group has
    "{group}_greedy_pass@1"     where greedy completions were scored
    "{group}_pass@1"            pass@1 from n samples, where samples were scored
    "{group}_pass@{k}"          pass@k from n samples, for each k of ks with 1 < k <= n
    "n_samples", "temperature"  what qualifies the sampled numbers (0 and None where none were scored)
    "per_task"                  one row per task: id, split, novelty; greedy_passed, greedy_fraction (of its
                                tests), greedy_status and greedy_completion where greedy was scored; n and c
                                where samples were; a policy may add fields (e.g. tokens)

Every rate is rounded to 4 decimals.
"""

from __future__ import annotations

from typing import Mapping, Sequence

from course_lib.sandbox import task_reports
from course_lib.tasks import split_groups

UNREADABLE = "unreadable"  # the status of a task that was not run: its prompt is one the policy cannot read


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k from n samples of which c passed: 1 - C(n-c, k) / C(n, k), as a stable product.

    C(n-c, k) / C(n, k) = prod_{i = n-c+1}^{n} (1 - k / i): no factorials, no overflow.
    """
    if not (0 <= c <= n and 1 <= k <= n):
        raise ValueError(f"need 0 <= c <= n and 1 <= k <= n, got n={n}, c={c}, k={k}")
    if n - c < k:  # every set of k samples holds a passing one
        return 1.0
    prod = 1.0
    for i in range(n - c + 1, n + 1):
        prod *= 1.0 - k / i
    return 1.0 - prod


def score(tasks, *, greedy: Sequence[str] | None = None, samples: Sequence[str] | None = None,
          temperature: float | None = None, ks: Sequence[int] = (1, 5, 10), skip: Mapping[str, str] | None = None,
          timeout: float = 2.0) -> dict:
    """Run a policy's completions of `tasks` in the sandbox and score them (the keys: this module's docstring).

    greedy: one greedy completion per task, in the order of tasks. samples: n sampled completions per task,
    task by task (tasks[0]'s n, then tasks[1]'s, ...), drawn at `temperature`. Either or both.
    skip: {task id: reason} of tasks not run (a prompt the policy cannot read): each counts as failed (greedy
    and every sample), its row holds the reason (and greedy_status "unreadable"), and its entries in greedy
    and samples are not read. All programs of one kind run in one sandbox batch.
    """
    tasks = list(tasks)
    skip = skip or {}
    if greedy is None and samples is None:
        raise ValueError("nothing to score: pass greedy completions, samples, or both")
    if greedy is not None and len(greedy) != len(tasks):
        raise ValueError(f"greedy: one completion per task expected, got {len(greedy)} for {len(tasks)} tasks")
    n = 0
    if samples is not None:
        n = len(samples) // max(len(tasks), 1)
        if n < 1 or n * len(tasks) != len(samples):
            raise ValueError(f"samples: the same number (>= 1) per task expected, got {len(samples)} "
                             f"for {len(tasks)} tasks")
        if temperature is None:
            raise ValueError("samples need the temperature they were drawn at")
    rows = [{"id": t.id, "split": t.split, "novelty": t.novelty} for t in tasks]
    run = [i for i, t in enumerate(tasks) if t.id not in skip]
    if greedy is not None:
        reports = dict(zip(run, _reports([tasks[i] for i in run], [greedy[i] for i in run], timeout)))
        for i, row in enumerate(rows):
            if i in reports:
                r = reports[i]
                row.update(greedy_passed=r.all_passed, greedy_fraction=round(r.fraction, 4),
                           greedy_status=getattr(r.status, "value", str(r.status)), greedy_completion=greedy[i])
            else:
                row.update(greedy_passed=False, greedy_fraction=0.0, greedy_status=UNREADABLE, greedy_completion="")
    if n:
        jobs = [(i, j) for i in run for j in range(i * n, (i + 1) * n)]
        reports = _reports([tasks[i] for i, _ in jobs], [samples[j] for _, j in jobs], timeout)
        passed = [0] * len(tasks)
        for (i, _), r in zip(jobs, reports):
            passed[i] += r.all_passed
        for row, c in zip(rows, passed):
            row.update(n=n, c=c)
    for row in rows:
        if row["id"] in skip:
            row["reason"] = skip[row["id"]]
    result: dict = {}
    for group, members in split_groups(rows).items():
        result[f"{group}_tasks"] = len(members)
        if greedy is not None:
            result[f"{group}_greedy_pass@1"] = _mean([r["greedy_passed"] for r in members])
        if n:
            result[f"{group}_pass@1"] = _mean([r["c"] / r["n"] for r in members])
            for k in ks:
                if 1 < k <= n:
                    result[f"{group}_pass@{k}"] = _mean([pass_at_k(r["n"], r["c"], k) for r in members])
    result.update(n_samples=n, temperature=temperature if n else None, per_task=rows)
    return result


def _reports(tasks: list, completions: list[str], timeout: float) -> list:
    """The sandbox's TestReports of each task's program with its completion (none to run: none)."""
    return task_reports(tasks, completions, timeout=timeout) if tasks else []


def _mean(values: Sequence[float]) -> float:
    return round(sum(values) / len(values), 4)
