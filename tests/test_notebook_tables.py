"""Every results table in the chapters names what each split was to the run.

The convention: a table whose rows or columns are splits (train, val, test) is printed together with
`course_lib.tasks.split_legend()`, the line "splits: train (...) · val (...) · test (...)", or names
the roles in its own header. val's role changes with the chapter (never trained on before RL; rewarded
once RL saw its tests), so a bare "val" column would let a reader take it for held-out tasks.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from course_lib.tasks import SPLIT_ROLES, split_legend

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("[0-9][0-9]_*.ipynb"))
SPLIT_WORD = re.compile(r"(?<![\w/.,-])(train|val|test)(?![a-zA-Z0-9/,-])")  # val_near counts; val/test, train,val do not


def output_texts(cell) -> list[str]:
    texts = []
    for out in cell.get("outputs", []):
        if out["output_type"] == "stream":
            texts.append("".join(out["text"]))
        elif "data" in out:
            data = out["data"]
            for kind in ("text/markdown", "text/html", "text/plain"):
                if kind in data and "image/png" not in data:
                    texts.append("".join(data[kind]))
                    break
    return texts


def columns(line: str) -> bool:
    return line.count("|") >= 2 or len(re.findall(r"\S\s{2,}\S", line)) >= 2


def is_table_line(line: str) -> bool:
    """A header or row of a table over splits: two or more split names (or a "split" column), in columns."""
    return columns(line) and (len(set(SPLIT_WORD.findall(line))) >= 2
                              or re.search(r"(?<!\w)split(?!\w)", line) is not None)


def is_split_table(text: str) -> bool:
    """A table with splits as its columns, or as its rows (one split a row, two or more splits in all)."""
    lines = text.splitlines()
    row_splits = {w for line in lines if columns(line) for w in SPLIT_WORD.findall(line)}
    return any(is_table_line(line) for line in lines) or len(row_splits) >= 2


def names_roles(text: str) -> bool:
    if "splits: " in text:
        return True
    roles = {role for kind in SPLIT_ROLES.values() for role in kind.values()}
    return sum(role in text for role in roles) >= 2


def tables_without_roles(nb_path: Path) -> list[str]:
    nb = json.loads(nb_path.read_text())
    bad = []
    for index, cell in enumerate(nb["cells"]):
        for text in output_texts(cell):
            if is_split_table(text) and not names_roles(text):
                first = next(line for line in text.splitlines() if columns(line) and SPLIT_WORD.search(line))
                bad.append(f"cell {index}: {first.strip()[:90]!r}")
    return bad


def test_the_legend_names_every_split():
    for kind in SPLIT_ROLES:
        legend = split_legend(kind)
        assert legend.startswith("splits: ") and all(f"{s} (" in legend for s in ("train", "val", "test"))
    assert "rewarded" in split_legend("rl") and "rewarded" not in split_legend("supervised")
    with pytest.raises(ValueError, match="choose one of"):
        split_legend("held-out")


def test_the_check_finds_a_bare_table_and_accepts_a_labelled_one():
    bare = "variant   train   val   test\nppo       0.90    0.10  0.00"
    assert is_split_table(bare) and not names_roles(bare)
    assert is_split_table("policy  split n\nrandom   val    120    0.0%\nrandom   test   120    0.0%")  # by rows
    assert names_roles(bare + "\n" + split_legend())
    assert not is_table_line("val/test solutions never shape the alphabet")  # prose, not a table


@pytest.mark.parametrize("nb_path", NOTEBOOKS, ids=lambda p: p.stem[:2])
def test_every_results_table_names_its_splits_roles(nb_path):
    bad = tables_without_roles(nb_path)
    assert not bad, (f"{nb_path.name}: tables over splits without their roles (print "
                     f"course_lib.tasks.split_legend() with them): " + "; ".join(bad))
