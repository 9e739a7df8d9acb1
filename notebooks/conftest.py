"""`pytest --nbval notebooks/...` re-executes the notebooks in the conditions of the batch that
saved their outputs (book_tools.reproduce.BATCH_ENV): the kernels inherit this environment.

On a processor of another vendor than the one the outputs were made on (book_tools.arithmetic),
the cells tagged `cpu-arithmetic` still run, and every assertion must hold, but their outputs
are not compared; the summary says how many."""

import os

from book_tools import arithmetic
from book_tools.reproduce import BATCH_ENV

os.environ.update(BATCH_ENV)
_uncompared: list[str] = []


def pytest_collection_modifyitems(config, items):
    made_on, here = arithmetic.read_stamp(), arithmetic.cpu_vendor()
    for item in arithmetic.cells_not_to_compare(items, made_on, here):
        item.options["check"] = False  # nbval still runs the cell and fails it if it raises
        item.user_properties.append(("outputs_compared", "no"))  # the JUnit report keeps it
        _uncompared.append(item.nodeid)
    if _uncompared:
        config._course_arithmetic = (made_on, here)


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if _uncompared:
        made_on, here = config._course_arithmetic
        notebooks = sorted({n.split("::")[0] for n in _uncompared})
        terminalreporter.write_line(
            f"{len(_uncompared)} cells tagged '{arithmetic.TAG}' in {len(notebooks)} notebooks ran, but their "
            f"outputs were not compared: the committed outputs follow {made_on}'s floating-point arithmetic "
            f"and this processor is {here} ({arithmetic.STAMP_PATH.name}). Every other cell was compared.")
