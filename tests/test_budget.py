"""Each chapter is one lesson within its budget (book_tools.budget): at most 4,000 words of prose (chapters 6
and 10: 4,500), 500 lines of code, and its headline stated in "What to expect" in at most 120 words."""

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


def test_what_to_expect_is_counted_up_to_the_next_item(tmp_path):
    text = ("- **You need:** chapter 1.\n- **What to expect:** one two\n  three.\n- **Run it:** four five.\n\n"
            "More prose.")
    path = tmp_path / "99_example.ipynb"
    path.write_text(json.dumps({"cells": [{"cell_type": "markdown", "source": text}]}))
    assert budget.expectation_words(path) == 3
    path.write_text(json.dumps({"cells": [{"cell_type": "markdown", "source": "**What to expect.** a b c d\n\nnext"}]}))
    assert budget.expectation_words(path) == 4
    path.write_text(json.dumps({"cells": [{"cell_type": "markdown", "source": "no headline here"}]}))
    assert budget.expectation_words(path) is None
