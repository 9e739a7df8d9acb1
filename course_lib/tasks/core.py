"""What a task is and what each split may be used for: `Task`, the splits and their roles, the split
legend, and the checks every task passes whatever file it came from (`_validate_task`)."""

from __future__ import annotations

import re
import warnings
from dataclasses import dataclass
from pathlib import Path

SPLITS = ("train", "val", "test")
# What each split is to a run, for the line under every results table (`split_legend`).
SPLIT_ROLES = {
    "course": {"train": "solutions may be trained on", "val": "tests may reward RL, reference solutions never trained on",
               "test": "never trained on"},
    "supervised": {"train": "trained on", "val": "never trained on", "test": "never trained on"},
    "rl": {"train": "trained on", "val": "rewarded: RL saw its tests", "test": "never trained on"},
}
NOVELTIES = ("near", "far")


class TaskFormatError(ValueError):
    """A task file is malformed. The message names the file, the task, the field."""


@dataclass(frozen=True)
class Task:
    id: str
    prompt: str
    entry_point: str
    solution: str
    tests: tuple[str, ...]
    family: str
    split: str
    difficulty: int = 1
    novelty: str | None = None
    origin: str | None = None
    source: str | None = None  # file it came from

    def program(self, completion: str) -> str:
        """The full program the sandbox runs (before a test snippet is appended)."""
        return self.prompt + completion

    @property
    def reference_program(self) -> str:
        return self.program(self.solution)


# -----------------------------------------------------------------------------
# our own task files

def split_groups(rows: list[dict]) -> dict[str, list[dict]]:
    """Per-task result rows (each with "split" and "novelty") grouped the way every results table reports
    them: by split, and val/test again by novelty ("val_near", "test_far", ...), in the course's order."""
    groups: dict[str, list[dict]] = {}
    for r in rows:
        groups.setdefault(r["split"], []).append(r)
        if r["novelty"]:
            groups.setdefault(f"{r['split']}_{r['novelty']}", []).append(r)
    order = [f"{split}{suffix}" for split in ("train", "val", "test") for suffix in ("", "_near", "_far")]
    return {g: groups[g] for g in order if g in groups}


def split_legend(kind: str = "rl") -> str:
    """The line printed under a results table: each split with its role in the run.

    kind "rl": RL was rewarded by the tests of train and val tasks, so val measures what RL saw and only
    test generalisation; "supervised": pretraining or fine-tuning, which saw only train solutions;
    "course": what each split may be used for, before any training (chapters 1-3).
    """
    if kind not in SPLIT_ROLES:
        raise ValueError(f"unknown kind {kind!r}; choose one of {tuple(SPLIT_ROLES)}")
    return "splits: " + " · ".join(f"{s} ({role})" for s, role in SPLIT_ROLES[kind].items())


# field -> (type, required). novelty is allowed only on val/test tasks; checked below.
_TASK_FIELDS = {
    "id": (str, True),
    "split": (str, True),
    "entry_point": (str, True),
    "prompt": (str, True),
    "solution": (str, True),
    "tests": (list, True),
    "difficulty": (int, False),
    "novelty": (str, False),
    "origin": (str, False),
}
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def _type_name(t) -> str:
    return {str: "a string", int: "an integer", list: "a list", dict: "a table"}.get(t, t.__name__)


def _check_compiles(code: str, what: str, fail) -> None:
    """Parse code with warnings as errors, so `assert (x, 'msg')` and friends are caught."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        try:
            compile(code, "<task>", "exec", dont_inherit=True)
        except (SyntaxError, SyntaxWarning, ValueError) as e:
            fail(f"{what} does not compile cleanly: {e}")


def _validate_task(raw, index: int, path: Path, family: str) -> Task:
    name = raw.get("id") if isinstance(raw, dict) and isinstance(raw.get("id"), str) else None
    where = f"{path.name}: task {name!r} (#{index})" if name else f"{path.name}: task #{index}"

    def fail(msg):
        raise TaskFormatError(f"{where}: {msg}")

    if not isinstance(raw, dict):
        fail(f"expected a [[task]] table, got {type(raw).__name__}")
    for key in raw:
        if key not in _TASK_FIELDS:
            fail(f"field {key!r}: unknown field (allowed: {', '.join(_TASK_FIELDS)})")
    for key, (typ, required) in _TASK_FIELDS.items():
        if key not in raw:
            if required:
                fail(f"field {key!r}: missing (expected {_type_name(typ)})")
            continue
        value = raw[key]
        if not isinstance(value, typ) or (typ is int and isinstance(value, bool)):
            fail(f"field {key!r}: expected {_type_name(typ)}, got {type(value).__name__} {value!r}")

    if not _IDENT.match(raw["id"]):
        fail(f"field 'id': expected a Python-identifier-like name, got {raw['id']!r}")
    split = raw["split"]
    if split not in SPLITS:
        fail(f"field 'split': expected one of {SPLITS}, got {split!r}")
    novelty = raw.get("novelty")
    if split == "train" and novelty is not None:
        fail("field 'novelty': only allowed for val/test tasks (novelty is relative to train)")
    if novelty is not None and novelty not in NOVELTIES:
        fail(f"field 'novelty': expected one of {NOVELTIES}, got {novelty!r}")
    difficulty = raw.get("difficulty", 1)
    if not 1 <= difficulty <= 3:
        fail(f"field 'difficulty': expected 1, 2 or 3, got {difficulty!r}")

    tests = raw["tests"]
    if not tests:
        fail("field 'tests': expected a list of at least one test string, got an empty list")
    for i, t in enumerate(tests):
        if not isinstance(t, str) or not t.strip():
            fail(f"field 'tests': item {i} expected a non-empty string, got {t!r}")
        _check_compiles(t, f"field 'tests': item {i}", fail)

    prompt, solution, entry_point = raw["prompt"], raw["solution"], raw["entry_point"]
    if not prompt.endswith("\n"):
        fail("field 'prompt': expected to end with a newline (the completion starts on a new line)")
    if not solution.strip() or not solution.endswith("\n"):
        fail("field 'solution': expected a non-empty function body ending with a newline")
    if not re.search(rf"^def {re.escape(entry_point)}\s*\(", prompt, re.M):
        fail(f"field 'entry_point': expected the prompt to define `def {entry_point}(`")
    _check_compiles(prompt + solution, "field 'solution': prompt + solution", fail)

    return Task(id=raw["id"], prompt=prompt, entry_point=entry_point, solution=solution,
                tests=tuple(tests), family=family, split=split, difficulty=difficulty,
                novelty=novelty, origin=raw.get("origin"), source=str(path))


def _check_unique(tasks: list[Task]) -> None:
    seen: dict[str, Task] = {}
    for t in tasks:
        if t.id in seen:
            first = Path(seen[t.id].source).name
            raise TaskFormatError(f"{Path(t.source).name}: task {t.id!r}: field 'id': duplicate id, "
                                  f"already defined in {first}")
        seen[t.id] = t


def _normalise_splits(split) -> tuple[str, ...]:
    if split is None:
        return SPLITS
    splits = (split,) if isinstance(split, str) else tuple(split)
    bad = [s for s in splits if s not in SPLITS]
    if bad:
        raise ValueError(f"unknown split(s) {bad}; expected some of {SPLITS}")
    return splits


def _sorted(tasks: list[Task]) -> list[Task]:
    return sorted(tasks, key=lambda t: (SPLITS.index(t.split), t.family, t.id))
