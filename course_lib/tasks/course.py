"""The course's own task set: one TOML file per family in tasks/, validated field by field (`load_tasks`),
and how far each held-out task is from the nearest training task (`nearest_train_distances`)."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Sequence

from course_lib.tasks.core import (Task, TaskFormatError, _check_unique, _normalise_splits, _sorted,
                                   _type_name, _validate_task)
from course_lib.tasks.formats import RECORD_SUFFIXES, load_task_records


def default_tasks_dir() -> Path:
    """<repo>/tasks, next to the course_lib package."""
    path = Path(__file__).resolve().parents[2] / "tasks"
    if not path.is_dir():
        raise FileNotFoundError(
            f"task directory not found: {path} (expected one <family>.toml per family there; "
            "pass tasks_dir= to load from elsewhere)")
    return path


_FILE_FIELDS = {"family": (str, True), "description": (str, False), "task": (list, True)}


def load_task_file(path) -> list[Task]:
    """Parse and validate one family file. Raises TaskFormatError on the first problem."""
    path = Path(path)
    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
    except tomllib.TOMLDecodeError as e:
        raise TaskFormatError(f"{path.name}: not valid TOML: {e}") from None
    for key in data:
        if key not in _FILE_FIELDS:
            raise TaskFormatError(f"{path.name}: field {key!r}: unknown top-level field "
                                  f"(allowed: {', '.join(_FILE_FIELDS)})")
    for key, (typ, required) in _FILE_FIELDS.items():
        if key not in data:
            if required:
                raise TaskFormatError(f"{path.name}: field {key!r}: missing (expected {_type_name(typ)})")
        elif not isinstance(data[key], typ):
            raise TaskFormatError(f"{path.name}: field {key!r}: expected {_type_name(typ)}, "
                                  f"got {type(data[key]).__name__}")
    tasks = [_validate_task(raw, i, path, data["family"]) for i, raw in enumerate(data["task"])]
    _check_unique(tasks)
    return tasks


_TASK_SOURCES = f"give a folder of TOML task files, one .toml file, or a {'/'.join(RECORD_SUFFIXES)} file of tasks"


def load_tasks(split: str | Sequence[str] | None = None, tasks_dir=None, fields=None) -> list[Task]:
    """All tasks of the given split(s), sorted by (split, family, id).

    tasks_dir: a folder of TOML family files (default: the course's tasks/), one such .toml file,
    or one .jsonl/.parquet file read by `load_task_records` with the renames `fields`.
    Every file is validated before anything is returned, so a single bad file
    means an exception, never a silently smaller task set.
    """
    splits = _normalise_splits(split)
    tasks_dir = Path(tasks_dir) if tasks_dir is not None else default_tasks_dir()
    if not tasks_dir.exists():
        raise FileNotFoundError(f"{tasks_dir} does not exist: {_TASK_SOURCES}")
    if tasks_dir.suffix in RECORD_SUFFIXES:
        return [t for t in load_task_records(tasks_dir, field_map=fields) if t.split in splits]
    if fields:
        raise TaskFormatError(f"field renames ({fields!r}) apply to a .jsonl or .parquet task file, not to {tasks_dir}")
    if tasks_dir.is_file() and tasks_dir.suffix != ".toml":
        raise TaskFormatError(f"{tasks_dir}: unknown task file type {tasks_dir.suffix!r}; {_TASK_SOURCES}")
    files = [tasks_dir] if tasks_dir.is_file() else sorted(tasks_dir.glob("*.toml"))
    if not files:
        raise FileNotFoundError(f"no *.toml task files in {tasks_dir}")
    tasks = [t for path in files for t in load_task_file(path)]
    _check_unique(tasks)
    return _sorted([t for t in tasks if t.split in splits])


# -----------------------------------------------------------------------------
# how far is each held-out task from training?

def edit_distance(a: str, b: str) -> int:
    """Levenshtein distance (insertions, deletions, substitutions all cost 1)."""
    if len(a) < len(b):
        a, b = b, a
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i]
        for j, cb in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb)))
        prev = cur
    return prev[-1]


def nearest_train_distances(tasks: Sequence[Task] | None = None) -> list[dict]:
    """For each val/test task, its closest training task by reference solution.

    distance = Levenshtein(solution, train solution) / max of the two lengths,
    so 0 means identical and 1 means nothing in common. It is a sanity check on
    the "near"/"far" labels, which are judgements about the idea, not the text.
    """
    tasks = load_tasks() if tasks is None else list(tasks)
    train = [t for t in tasks if t.split == "train"]
    if not train:
        raise ValueError("nearest_train_distances needs at least one train task")
    rows = []
    for t in tasks:
        if t.split == "train":
            continue
        best = min(train, key=lambda u: (_norm_dist(t.solution, u.solution), u.id))
        rows.append({"id": t.id, "split": t.split, "novelty": t.novelty,
                     "nearest_train_id": best.id, "distance": _norm_dist(t.solution, best.solution)})
    return rows


def _norm_dist(a: str, b: str) -> float:
    return edit_distance(a, b) / max(len(a), len(b), 1)
