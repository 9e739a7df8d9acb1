"""Every chapter ends with 2-4 exercises whose solutions are hidden in the book and checked.

A solution is a code cell tagged `hide-cell` (the book shows it behind a toggle) and
`solution`, placed under the chapter's "## Solutions" heading, after all the questions of
"## Exercises": in Jupyter and Colab, where no toggle hides it, a solution never sits under
its question. Each one asserts its
result, so it checks itself; the batch executed it (its outputs are in the committed
notebook) and `pytest --nbval`, the second half of the test command, executes it again
and compares what it prints.
"""

from __future__ import annotations

import json

import pytest

from book_tools.reproduce import chapter_notebooks


def _heading(cells, title):
    return next((i for i, c in enumerate(cells) if c["cell_type"] == "markdown"
                 and any(line.strip() == title for line in "".join(c["source"]).splitlines())), None)


def _exercises(notebook):
    cells = json.loads(notebook.read_text())["cells"]
    exercises, solutions = _heading(cells, "## Exercises"), _heading(cells, "## Solutions")
    assert exercises is not None, f"{notebook.name} has no '## Exercises' section"
    assert solutions is not None and solutions > exercises, f"{notebook.name}: no '## Solutions' after the exercises"
    is_solution = ["solution" in c.get("metadata", {}).get("tags", []) for c in cells]
    assert not any(is_solution[:solutions]), f"{notebook.name}: a solution above '## Solutions', under its question"
    return [c for c, s in zip(cells[solutions:], is_solution[solutions:]) if s]


@pytest.mark.parametrize("notebook", chapter_notebooks(), ids=lambda p: p.stem)
def test_chapter_ends_with_two_to_four_exercises_with_checked_solutions(notebook):
    solutions = _exercises(notebook)
    assert 2 <= len(solutions) <= 4, f"{notebook.name}: {len(solutions)} solutions after '## Exercises'"
    for cell in solutions:
        source = "".join(cell["source"])
        assert cell["cell_type"] == "code"
        assert "hide-cell" in cell["metadata"]["tags"], "the book must hide the solution behind a toggle"
        assert "assert " in source, f"{notebook.name}: a solution that checks nothing:\n{source[:200]}"
        assert cell.get("execution_count"), f"{notebook.name}: a solution the batch did not execute"
        assert not [o for o in cell.get("outputs", []) if o.get("output_type") == "error"]

