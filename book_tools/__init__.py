"""The book's own tooling, kept apart from `course_lib` (the library the chapters teach and import).

    reproduce      the batch: every chapter executed through papermill, their times recorded
    batch_engine   papermill's engine ``course`` that the batch runs notebooks with
    book_check     build the book and open every page in headless Chromium; check its links
    glossary       link each glossary entry back to the chapters that use it
    colab          the setup cell that opens every chapter (on Colab it fetches and installs the course)
    arithmetic     which processor vendor's arithmetic the outputs follow, and the cells that depend on it
    nbcheck        the test command's notebook checks: each chapter under nbval, from the committed checkpoints

The commands stay `python -m book_tools reproduce | check-book | check-links | sync-glossary |
sync-setup-cells`; `course_lib.__main__` hands them to these modules. This package itself holds
what several of them share: where the course is, and how a notebook is written back.
"""

import json
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS_DIR = REPO_ROOT / "notebooks"


def chapter_notebooks(notebooks_dir: Path = NOTEBOOKS_DIR) -> list[Path]:
    """The chapter notebooks in reading order (their names start with the chapter number)."""
    return sorted(p for p in notebooks_dir.glob("[0-9][0-9]_*.ipynb"))


def write_notebook(path: Path, nb: dict) -> None:
    """Write a notebook's JSON the way Jupyter does (indent 1, characters kept as they are), so a
    tool that changes one cell leaves a diff of that cell only."""
    path.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n")
