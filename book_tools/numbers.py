"""Numbers in prose are numbers on the page: every decimal number or percentage in a chapter's text
appears in what the chapter shows (its code and its printed outputs), unless it is a citation.

A citation is a paragraph that says whose number it is ("reported by ..., not run here"), or a table
that follows such a paragraph. Maths ($...$) is left out: it holds formulas, not results.

    python -m book_tools.numbers [PREFIX ...]    list each offender with its chapter and cell; exit 1 if any
"""

from __future__ import annotations

import argparse
import json
import re
import sys

from book_tools import NOTEBOOKS_DIR
from book_tools.reproduce import select_chapters

NUMBER = re.compile(r"(?<![\w.])[−-]?(?:\d+\.\d+(?:\s?%)?|\d+\s?%)")
MATHS = re.compile(r"\$\$.*?\$\$|\$[^$\n]*\$", re.DOTALL)
CITATION = re.compile(r"reported by|not run here", re.IGNORECASE)
ITEM = re.compile(r"\n(?=[ \t]*(?:[-*+]|\d+[.)])[ \t])")  # where a list item starts


def shown_text(notebook: dict) -> str:
    """Everything a reader sees besides the prose: code, printed text, plain-text and markdown results."""
    parts = []
    for cell in notebook["cells"]:
        if cell["cell_type"] != "code":
            continue
        parts.append("".join(cell["source"]))
        for output in cell.get("outputs", []):
            parts.append("".join(output.get("text", "")))
            data = output.get("data", {})
            for kind in ("text/plain", "text/markdown"):
                value = data.get(kind, "")
                parts.append("".join(value) if isinstance(value, list) else value)
    return "\n".join(parts)


def prose_numbers(markdown: str):
    """(number, its paragraph) for each number of the markdown outside maths and citations."""
    cited = False
    blocks = re.split(r"\n\s*\n", MATHS.sub(" ", markdown))
    # each item of a list is a paragraph of its own: a citation in one item covers that item only
    blocks = [item for block in blocks
              for item in ([block] if block.lstrip().startswith("|") else ITEM.split(block))]
    for block in blocks:
        is_table = block.lstrip().startswith("|")
        if CITATION.search(block):
            cited = True
            continue
        if cited and is_table:  # a table right after the paragraph that cites it
            continue
        cited = False
        for match in NUMBER.finditer(block):
            yield match.group().replace("−", "-").lstrip("-"), block


def spellings(number: str) -> set[str]:
    """The ways a page may show this number: itself, and a percentage as the fraction it is (15.5 % is 0.155)."""
    if not number.endswith("%"):
        return {number}
    value = number.rstrip("%").strip()
    fraction = float(value) / 100
    decimals = len(value.split(".")[1]) if "." in value else 0
    return {value + "%", value + " %"} | {f"{fraction:.{k}f}" for k in range(decimals + 2, decimals + 4)}


def rounded_forms(text: str) -> set[str]:
    """Every decimal of the text rounded to fewer places, as prose quotes it (0.7609 is quoted as 0.761 or 0.76)."""
    forms = set()
    for match in re.finditer(r"\d+\.\d+(\s?%)?", text):
        number = match.group().rstrip("% ")
        places = len(number.split(".")[1])
        percent = "%" if match.group(1) else ""
        forms.update(f"{float(number):.{k}f}{percent}" for k in range(1, places))
    return forms


def offenders(notebook_path) -> list[tuple[int, str, str]]:
    """(cell index, number, its paragraph's first 120 characters) for each number the page does not show."""
    notebook = json.loads(notebook_path.read_text())
    shown = shown_text(notebook)
    rounded = rounded_forms(shown)
    found = []
    for index, cell in enumerate(notebook["cells"]):
        if cell["cell_type"] != "markdown":
            continue
        for number, block in prose_numbers("".join(cell["source"])):
            if not any(form in shown or form in rounded for form in spellings(number)):
                found.append((index, number, " ".join(block.split())[:120]))
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m book_tools.numbers", description=__doc__.splitlines()[0])
    parser.add_argument("only", nargs="*", metavar="PREFIX", help="only the chapters whose name starts with PREFIX")
    args = parser.parse_args(argv)
    total = 0
    for path in select_chapters(args.only or None, "numbers"):
        for index, number, context in offenders(path):
            total += 1
            print(f"{path.relative_to(NOTEBOOKS_DIR.parent)}, cell {index}: {number} is not shown on the page: "
                  f"{context!r}")
    print(f"numbers in prose not shown on their page: {total}")
    return 1 if total else 0


if __name__ == "__main__":
    sys.exit(main())
