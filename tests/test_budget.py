"""Each chapter is one lesson within its budget (book_tools.budget): at most 4,000 words of prose (chapters 6
and 10: 4,500) and 500 lines of code."""

import json

from book_tools import budget


def test_every_chapter_is_within_its_budget(capsys):
    assert budget.main([]) == 0, capsys.readouterr().out


def test_the_counts_are_of_prose_words_and_code_lines(tmp_path):
    cells = [{"cell_type": "markdown", "source": ["# A title\n", "two words"]},
             {"cell_type": "code", "source": ["x = 1\n", "\n", "print(x)"]},
             {"cell_type": "markdown", "source": "one"}]
    path = tmp_path / "99_example.ipynb"
    path.write_text(json.dumps({"cells": cells}))
    assert budget.counts(path) == (6, 3)  # '#', 'A', 'title', 'two', 'words', 'one'; a blank line counts
