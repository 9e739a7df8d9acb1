"""`pytest --nbval notebooks/...` re-executes the notebooks in the conditions of the batch that
saved their outputs (book_tools.reproduce.BATCH_ENV): the kernels inherit this environment.

On a processor of another vendor than the one the outputs were made on (book_tools.arithmetic),
the cells tagged `cpu-arithmetic` still run, and every assertion must hold, but their outputs
are not compared; the summary says how many."""

import os
from pathlib import Path

from book_tools import arithmetic
from book_tools.reproduce import BATCH_ENV

os.environ.update(BATCH_ENV)
_uncompared: list[tuple[str, str | None]] = []  # (cell, the vendor its outputs were made on)


def pytest_collection_modifyitems(config, items):
    here = arithmetic.cpu_vendor()
    made_on: dict[str, str | None] = {}  # notebook stem -> the vendor its outputs were made on
    for item in items:
        stem = Path(str(item.fspath)).stem
        if stem not in made_on:
            made_on[stem] = arithmetic.made_on(stem)
        for cell in arithmetic.cells_not_to_compare([item], made_on[stem], here):
            cell.options["check"] = False  # nbval still runs the cell and fails it if it raises
            cell.user_properties.append(("outputs_compared", "no"))  # the JUnit report keeps it
            _uncompared.append((cell.nodeid, made_on[stem]))
    config._course_arithmetic = here


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if _uncompared:
        here = config._course_arithmetic
        notebooks = sorted({n.split("::")[0] for n, _ in _uncompared})
        vendors = " and ".join(sorted({v for _, v in _uncompared}))
        terminalreporter.write_line(
            f"{len(_uncompared)} cells tagged '{arithmetic.TAG}' in {len(notebooks)} notebooks ran, but their "
            f"outputs were not compared: the committed outputs follow {vendors}'s floating-point arithmetic "
            f"and this processor is {here} ({arithmetic.STAMP_PATH.name}). Every other cell was compared.")
