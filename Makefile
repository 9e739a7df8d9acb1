# The two commands a fresh machine needs (see README.md):
#   make book   execute every notebook through papermill, then build the HTML book
#   make test   run the library tests and check that every notebook reproduces
# Optional, needs the internet:
#   make check-links   check every external link in the book
.PHONY: setup book test check-links

setup:
	bash scripts/setup.sh

book: setup
	.venv/bin/python -m book_tools reproduce
	PATH="$(CURDIR)/.venv/bin:$$PATH" .venv/bin/jupyter-book build -W -n --keep-going .

test: setup
	bash scripts/test.sh

check-links: setup
	PATH="$(CURDIR)/.venv/bin:$$PATH" .venv/bin/python -m book_tools check-links
