"""`pytest --nbval notebooks/...` re-executes the notebooks in the conditions of the batch that
saved their outputs (book_tools.reproduce.BATCH_ENV): the kernels inherit this environment."""

import os

from book_tools.reproduce import BATCH_ENV

os.environ.update(BATCH_ENV)
