"""Each chapter is one lesson within its budget: words of prose and lines of code, per chapter.

    python -m book_tools.budget [PREFIX ...]    a table of both counts against the budget; exit 1 if a chapter is over

Prose is the text of the markdown cells (words as whitespace-separated runs, maths included); code is the
lines of the code cells, blank ones and the hidden solutions included. The headline result is stated in the
chapter's "What to expect" in at most EXPECT_WORDS words (from the label to the next list item or paragraph).
The time budget is the batch's (`book_tools.reproduce.NOTEBOOK_BUDGET_S`).
"""

from __future__ import annotations

import argparse
import json
import re
import sys

from book_tools.reproduce import select_chapters

WORDS, CODE_LINES = 4000, 500
WIDER = {"06_ppo_and_gae": 4500, "10_lora_rl": 4500}  # the two chapters with the most to show
EXPECT_WORDS = 120
_EXPECT = re.compile(r"What to expect[:.]?\*\*[:.]?(.*?)(?:\n\s*\n|\n\s*- |\n\s*\d+\. |\Z)", re.S)


def counts(path) -> tuple[int, int]:
    """(words of prose, lines of code) of one chapter notebook."""
    cells = json.loads(path.read_text())["cells"]
    words = sum(len("".join(c["source"]).split()) for c in cells if c["cell_type"] == "markdown")
    lines = sum(len("".join(c["source"]).splitlines()) for c in cells if c["cell_type"] == "code")
    return words, lines


def expectation_words(path) -> int | None:
    """Words of the chapter's "What to expect" (None if it has none)."""
    for cell in json.loads(path.read_text())["cells"]:
        if cell["cell_type"] == "markdown" and (found := _EXPECT.search("".join(cell["source"]))):
            return len(found.group(1).split())
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m book_tools.budget", description=__doc__.splitlines()[0])
    parser.add_argument("only", nargs="*", metavar="PREFIX")
    args = parser.parse_args(argv)
    over = 0
    print(f"{'chapter':<34}{'words':>8}{'budget':>8}{'code lines':>12}{'budget':>8}{'expect':>8}{'budget':>8}")
    for path in select_chapters(args.only or None, "budget"):
        words, lines = counts(path)
        expect = expectation_words(path)
        word_budget = WIDER.get(path.stem, WORDS)
        flag = " over" if (words > word_budget or lines > CODE_LINES or expect is None
                           or expect > EXPECT_WORDS) else ""
        over += bool(flag)
        print(f"{path.stem:<34}{words:>8,}{word_budget:>8,}{lines:>12}{CODE_LINES:>8}{expect or 0:>8}"
              f"{EXPECT_WORDS:>8}{flag}")
    print(f"chapters over budget: {over}")
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())
