"""What every Results page's sections share: reading a record, a markdown table, a record's provenance (its
device, machine, date and the command that remakes it, from benchmarks/experiments.toml), and the small
formats of a mean, a paired change and code."""

from __future__ import annotations

import functools
import json

from book_tools import REPO_ROOT


ROLES = {"train": "train", "val": "val (rewarded: RL saw its tests)", "test": "test (never trained on)"}


def read_record(path: str) -> dict | None:
    file = REPO_ROOT / path
    return json.loads(file.read_text()) if file.exists() else None


def md_table(header: list[str], rows: list[list]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


@functools.cache
def remake_commands() -> dict[str, str]:
    """record path -> the command that remakes it, from benchmarks/experiments.toml (read once)."""
    from book_tools.reproduce import experiments

    return {e["path"]: e["command"] for e in experiments()}


def record_provenance(record: dict, path: str) -> str:
    """The record's device, machine, date and the command that remakes it, as benchmarks/experiments.toml (the
    one list of the records and their commands) gives it."""
    command = remake_commands().get(path)
    if command is None:
        raise KeyError(f"{path} is not in benchmarks/experiments.toml: list it there with the command that remakes it")
    return (f"*Record:* `{path}`. *Device:* {record.get('device', 'cpu')}; *machine:* "
            f"{record.get('machine', 'not recorded')}. "
            f"*Date:* {record.get('date', 'not recorded')}. *Remake:* `{command}`.")


def sampled_measure(n: int, temperature) -> str:
    return f"pass@1 from {n} samples at T = {temperature}"


CPU_SPLITS = (("train", "train_greedy_pass@1", None), ("val", "val_greedy_pass@1", None),
               ("test", "test_greedy_pass@1", None), ("test", "test_pass_rate", "sampled"))


def change_row(values: list[float], start) -> list:
    """[trained mean ± SE, change ± SE, t-interval, verdict] of per-seed values against a start (one number,
    or one per seed, paired)."""
    from course_lib.stats import mean_se, seed_verdict, t_factor
    starts = start if isinstance(start, list) else [start] * len(values)
    changes = [v - s for v, s in zip(values, starts)]
    change, se = mean_se(changes)
    return [mean_pm(values), f"{change:+.3f} ± {se:.3f}", f"{t_factor(len(changes)) * se:.3f}", seed_verdict(changes)]


def mean_pm(values: list[float], digits: int = 3) -> str:
    """mean ± standard error of per-seed values (digits: 1 for lengths in tokens)."""
    from course_lib.stats import mean_se
    mean, se = mean_se(values)
    return f"{mean:.{digits}f} ± {se:.{digits}f}"


def paired_change(values: list[float], baseline: list[float]) -> list:
    """[change ± SE, t-interval half-width, each seed's difference, verdict] of values - baseline, paired by seed."""
    from course_lib.stats import mean_se, seed_verdict, t_factor
    d = [a - b for a, b in zip(values, baseline)]
    mean, se = mean_se(d)
    return [f"{mean:+.3f} ± {se:.3f}", f"{t_factor(len(d)) * se:.3f}",
            " ".join(f"{x:+.3f}" for x in d), seed_verdict(d)]


def code_block(text: str) -> str:
    return "`" + text.strip().replace("|", "\\|") + "`"
