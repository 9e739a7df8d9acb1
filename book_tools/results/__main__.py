"""python -m book_tools.results: rewrite (or --check) the Results pages."""

import sys

from book_tools.results import main

sys.exit(main())
