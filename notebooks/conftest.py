"""`pytest --nbval notebooks/...` re-executes the notebooks in the conditions of the batch that
saved their outputs (course_lib.reproduce.BATCH_ENV): the kernels inherit this environment."""

import os

from course_lib.reproduce import BATCH_ENV

os.environ.update(BATCH_ENV)
