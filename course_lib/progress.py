"""Progress bars: live where a reader is watching, absent from the book's committed outputs.

In Jupyter, `tqdm.auto` draws a widget; in a terminal, a text bar. The papermill batch
(and the test command that re-executes the notebooks) sets ``COURSE_BATCH=1``: there the
bars are switched off, because a saved bar would show on the static page frozen at its
first frame ("0%|          | 0/100") and nbval would have to compare a timing. The cells
print what the bar would have told (how many steps, how long) themselves.
"""

from __future__ import annotations

import os

BATCH_VARIABLE = "COURSE_BATCH"


def in_batch() -> bool:
    """True inside the papermill batch or the notebook checks."""
    return os.environ.get(BATCH_VARIABLE, "") not in ("", "0")


def tqdm(iterable=None, **kwargs):
    """`tqdm.auto.tqdm`, disabled inside the batch."""
    from tqdm.auto import tqdm as auto_tqdm

    if in_batch():
        kwargs["disable"] = True
    return auto_tqdm(iterable, **kwargs)
