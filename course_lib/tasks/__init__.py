"""The course's task set and the loaders for it, HumanEval, MBPP-style and APPS files.

A task is a HumanEval-shaped problem: a `prompt` (signature + docstring) that a
policy continues, a reference `solution` (the indented body), and a tuple of
test snippets. Each snippet is checked separately so a reward can give partial
credit. The program the sandbox runs is always `prompt + completion`, followed
by one test snippet at a time.

Our own tasks live in `tasks/<family>.toml`, one file per family. Splits say
what each task may be used for:

    train  solutions and tests may be used for anything (pretraining, RL)
    val    RL may use its tests as reward; its solutions never enter training
    test   never used in training at all; only for the final evaluation

The course's val/test tasks carry a `novelty`: "near" (a small variant of a
training task, same idiom) or "far" (an idea not present in training). See
`nearest_train_distances` for a number that backs the label up. Another task
set may leave it out: its results are then grouped by split alone.

The package: `core` (Task, the splits, the checks every task passes), `course` (the course's
TOML files, `load_tasks`, novelty distances) and `formats` (HumanEval, MBPP-style, JSONL/Parquet
records, APPS); import from here.

Everything here only *reads* code (tomllib, json, ast, compile); nothing is
executed. Running code is the sandbox's job.
"""

from course_lib.tasks.core import NOVELTIES, SPLIT_ROLES, SPLITS, Task, TaskFormatError, split_groups, split_legend
from course_lib.tasks.formats import (APPS_DIFFICULTIES, RECORD_SUFFIXES, apps_record_to_mbpp, load_apps_jsonl,
                                      load_humaneval, load_mbpp_jsonl, load_task_records, parse_field_map,
                                      read_records)
from course_lib.tasks.course import (default_tasks_dir, edit_distance, load_task_file, load_tasks,
                                     nearest_train_distances)

__all__ = ["NOVELTIES", "SPLIT_ROLES", "SPLITS", "Task", "TaskFormatError", "split_groups", "split_legend",
           "APPS_DIFFICULTIES", "RECORD_SUFFIXES", "apps_record_to_mbpp", "load_apps_jsonl", "load_humaneval",
           "load_mbpp_jsonl", "load_task_records", "parse_field_map", "read_records", "default_tasks_dir",
           "edit_distance", "load_task_file", "load_tasks", "nearest_train_distances"]
