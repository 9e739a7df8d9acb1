"""Is a difference real? Standard errors, the t-interval over random seeds, and a sign test (every chapter).

Two ways a course result is compared with another:
    over random seeds      mean_se of the per-seed differences, `seed_verdict` against the t-interval
                           (t_factor: 4.30 standard errors for 3 seeds)
    over tasks (one run)   `pass_rate_with_se` and `compare_pass_rates` pair the tasks of two evaluations;
                           `sign_test` counts the tasks that changed one way or the other
"""

from __future__ import annotations

import math
from typing import Sequence


def pass_rate_with_se(per_task: Sequence[dict], split: str | None = None) -> tuple[float, float]:
    """(pass@1 from n samples, its standard error) of an evaluation's per-task rows (of one split, if given;
    the rows of `course_lib.scoring.score`, with n and c).

    pass@1 from n samples is the mean over tasks of c / n; its standard error is the standard
    deviation of those per-task rates over sqrt(number of tasks): it holds both the
    sampling noise (n samples per task) and how much tasks differ from each other.
    """
    rates = [r["c"] / r["n"] for r in per_task if split is None or r["split"] == split]
    if len(rates) < 2:
        raise ValueError(f"need at least 2 tasks with sampled results (rows with n and c), got {len(rates)}")
    mean = sum(rates) / len(rates)
    var = sum((x - mean) ** 2 for x in rates) / (len(rates) - 1)
    return mean, (var / len(rates)) ** 0.5


def compare_pass_rates(after: Sequence[dict], before: Sequence[dict], split: str, *, z: float = 2.0) -> dict:
    """Paired comparison of two evaluations of the same tasks: after - before, per task, then averaged.

    Returns {"difference", "se", "real"}: se is the standard error of the mean of the
    per-task differences; "real" is True only when |difference| > z * se (z = 2: about
    95% confidence). Pairing by task removes the task-to-task spread both runs share.
    """
    a = {r["id"]: r["c"] / r["n"] for r in after if r["split"] == split}
    b = {r["id"]: r["c"] / r["n"] for r in before if r["split"] == split}
    if set(a) != set(b) or len(a) < 2:
        raise ValueError(f"the two evaluations must hold the same {split} tasks (at least 2), "
                         f"got {len(a)} and {len(b)} tasks, {len(set(a) ^ set(b))} not in both")
    d = [a[i] - b[i] for i in sorted(a)]
    mean = sum(d) / len(d)
    se = (sum((x - mean) ** 2 for x in d) / (len(d) - 1) / len(d)) ** 0.5
    return {"difference": mean, "se": se, "real": abs(mean) > z * se}


# 95% two-sided Student-t factors for a mean of n values (n - 1 degrees of freedom).
_T_975 = {2: 12.706, 3: 4.303, 4: 3.182, 5: 2.776, 6: 2.571, 7: 2.447, 8: 2.365, 9: 2.306, 10: 2.262,
          11: 2.228, 12: 2.201, 13: 2.179, 14: 2.160, 15: 2.145, 16: 2.131, 21: 2.086, 31: 2.042}


def t_factor(n: int) -> float:
    """How many standard errors a mean of n values must clear to count (95%, two-sided): 4.30 for 3 seeds.

    With few seeds the standard error is itself a noisy estimate, so the interval is wider than
    the normal distribution's 1.96: Student's t with n - 1 degrees of freedom.
    """
    if n < 2:
        raise ValueError(f"a standard error needs at least 2 values (seeds), got {n}")
    below = [k for k in _T_975 if k <= n]
    return _T_975[max(below)] if n <= 31 else 1.96  # between table rows: the next smaller n, the wider interval


def mean_se(values: Sequence[float]) -> tuple[float, float]:
    """(mean, standard error of the mean) of per-seed values."""
    if len(values) < 2:
        raise ValueError(f"a standard error needs at least 2 values (seeds), got {len(values)}")
    mean = sum(values) / len(values)
    return mean, (sum((v - mean) ** 2 for v in values) / (len(values) - 1) / len(values)) ** 0.5


def seed_verdict(differences: Sequence[float]) -> str:
    """'a gain', 'a loss' or 'within noise': is the mean of per-seed differences beyond its t-interval?"""
    mean, se = mean_se(differences)
    half_width = t_factor(len(differences)) * se
    if mean > half_width and mean > 0:
        return "a gain"
    if mean < -half_width and mean < 0:
        return "a loss"
    return "within noise"


def sign_test(gained: int, lost: int) -> float:
    """Two-sided p-value that one model's per-task changes lean one way only by chance (an exact sign test).

    One run, paired by task: of the tasks whose result changed, `gained` now pass and `lost` now fail.
    If neither model were better, each change would be a coin flip; the p-value is the chance of a
    split at least this lopsided. Tasks that did not change carry no information and are left out.
    With 5 gained and 0 lost it is 2 / 2**5 = 0.0625: five coin flips all landing the same way.
    """
    if gained < 0 or lost < 0:
        raise ValueError(f"counts of tasks must be >= 0, got gained={gained}, lost={lost}")
    n = gained + lost
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, k) for k in range(min(gained, lost) + 1)) / 2 ** n
    return min(1.0, 2 * tail)
