"""A toy task set for trainer tests: stopping at once passes, since the docstring alone is a valid body."""

from __future__ import annotations

from pathlib import Path

TRAIN = '''family = "toy"
description = "stopping at once passes: the docstring alone is a valid body"

[[task]]
id = "nothing"
split = "train"
entry_point = "nothing"
prompt = """def nothing(x: int):\\n    \\"\\"\\"Return nothing.\\"\\"\\"\\n"""
solution = "    pass\\n"
tests = ["assert nothing(1) is None", "assert nothing(2) is None"]
'''

VAL = '''
[[task]]
id = "nothing_val"
split = "val"
novelty = "near"
entry_point = "nothing_val"
prompt = """def nothing_val(x: int):\\n    \\"\\"\\"Return nothing.\\"\\"\\"\\n"""
solution = "    pass\\n"
tests = ["assert nothing_val(1) is None"]
'''


def write_toy_tasks(folder: Path, with_val: bool = True) -> Path:
    """Write folder/toy.toml: the train task `nothing` and, with_val, the val task `nothing_val`."""
    (Path(folder) / "toy.toml").write_text(TRAIN + (VAL if with_val else ""))
    return Path(folder)
