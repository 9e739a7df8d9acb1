"""Numbers in prose are numbers on the page (book_tools.numbers): the rule, and every chapter keeping it."""

from book_tools import numbers


def notebook(markdown: str, printed: str) -> dict:
    return {"cells": [{"cell_type": "code", "source": ["x = 1\n"], "outputs": [{"text": printed}]},
                      {"cell_type": "markdown", "source": [markdown]}]}


def check(tmp_path, markdown, printed):
    path = tmp_path / "nb.ipynb"
    import json
    path.write_text(json.dumps(notebook(markdown, printed)))
    return [number for _, number, _ in numbers.offenders(path)]


def test_a_number_the_page_does_not_print_is_reported_with_its_cell(tmp_path):
    assert check(tmp_path, "pass@1 rose from 0.104 to 0.132.", "start 0.104") == ["0.132"]


def test_rounded_and_percent_forms_of_printed_numbers_count(tmp_path):
    assert check(tmp_path, "about 0.761, or 15.5 %, or 0.12%", "0.7609 0.155 (0.117%)") == []


def test_citations_and_maths_are_left_out(tmp_path):
    cited = ("34.8% on HumanEval (reported by DeepSeek, not run here).\n\n"
             "The report's table (reported by the report, not run here):\n\n| a | 0.364 |\n|---|---|\n\n"
             "With $\\epsilon = 0.2$ the clip holds.")
    assert check(tmp_path, cited, "") == []
    assert check(tmp_path, "Not cited: 0.364.", "") == ["0.364"]


def test_every_chapter_prints_the_numbers_its_prose_quotes():
    assert numbers.main([]) == 0, "python -m book_tools.numbers lists each number and its cell"


def test_a_citation_in_one_list_item_covers_that_item_only():
    markdown = "- the report's 0.51 (reported by the report, not run here)\n- ours is 0.42\n"
    assert [n for n, _ in numbers.prose_numbers(markdown)] == ["0.42"]
