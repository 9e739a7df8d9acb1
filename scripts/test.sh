#!/usr/bin/env bash
# The test command: the library's tests, then every notebook re-executed and its
# outputs compared with the committed ones (nbval).
set -uo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/.venv/bin:$PATH"
# The batch's environment (book_tools.reproduce.BATCH_ENV): fixed hashing, no hub, no progress
# bars, and the same floating-point kernels on every Intel processor (book_tools/arithmetic.py).
while IFS= read -r line; do export "$line"; done < <(python -m book_tools.reproduce --print-env)
mkdir -p _build/test-reports

echo "== library tests =="
python -m pytest tests -q --junitxml=_build/test-reports/library.xml
lib=$?

echo "== notebooks: re-execute and compare outputs (nbval) =="
# One chapter at a time, each from the committed checkpoints, with the batch's per-cell limit
# (book_tools/nbcheck.py); it ends with how many cells it compared.
python -m book_tools.nbcheck
nb=$?

if [ $lib -ne 0 ] || [ $nb -ne 0 ]; then
    echo "FAILED: library tests exit $lib, notebook checks exit $nb"
    exit 1
fi
