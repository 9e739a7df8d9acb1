#!/usr/bin/env bash
# The test command: the library's tests, then every notebook re-executed and its
# outputs compared with the committed ones (nbval).
set -uo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/.venv/bin:$PATH"
# The batch's environment (book_tools.reproduce.BATCH_ENV): fixed hashing, no hub, no progress
# bars, and the same floating-point kernels on every x86 processor.
while IFS= read -r line; do export "$line"; done < <(python -m book_tools.reproduce --print-env)
mkdir -p _build/test-reports

echo "== library tests =="
python -m pytest tests -q --junitxml=_build/test-reports/library.xml
lib=$?

echo "== notebooks: re-execute and compare outputs (nbval) =="
# The batch's per-cell limit: a cell that runs past it fails, naming the notebook and the cell.
cell_timeout=$(python -c "from book_tools.batch_engine import CELL_TIMEOUT_S; print(CELL_TIMEOUT_S)")
python -m pytest --nbval notebooks -q -p no:cacheprovider --nbval-cell-timeout "$cell_timeout" \
    --nbval-sanitize-with notebooks/nbval_sanitize.cfg \
    --junitxml=_build/test-reports/notebooks.xml
nb=$?

python -m book_tools.reproduce --summarize-junit _build/test-reports/notebooks.xml || true
if [ $lib -ne 0 ] || [ $nb -ne 0 ]; then
    echo "FAILED: library tests exit $lib, notebook checks exit $nb"
    exit 1
fi
