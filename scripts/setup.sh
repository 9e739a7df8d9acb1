#!/usr/bin/env bash
# Create .venv if it is missing and install the pinned environment into it.
# Idempotent: a second run with unchanged pins finishes in a second.
set -euo pipefail
cd "$(dirname "$0")/.."

# bubblewrap gives the sandbox its strongest isolation level (book/sandbox_levels.md).
if ! command -v bwrap >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        echo "setup: installing bubblewrap for the sandbox"
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap >/dev/null
    else
        echo "setup: bubblewrap is not installed; the sandbox falls back to a weaker level" \
             "(install it with: sudo apt-get install bubblewrap)"
    fi
fi

PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
    echo "setup: creating .venv with $($PYTHON --version)"
    "$PYTHON" -m venv .venv
fi

stamp=".venv/.installed-$(cat constraints.txt pyproject.toml | sha256sum | cut -c1-16)"
if [ ! -f "$stamp" ]; then
    echo "setup: installing the pinned packages (constraints.txt); takes a few minutes the first time"
    # -c pins every package, torch included, so nothing can swap in a CUDA build of torch.
    .venv/bin/python -m pip install --quiet --disable-pip-version-check \
        -c constraints.txt -e ".[book,test]" 2>&1 | grep -v "^WARNING: Location" || true
    .venv/bin/python -c "import course_lib, torch, transformers, gymnasium, papermill, nbval" \
        || { echo "setup: the install did not complete (see the pip output above)"; exit 1; }
    rm -f .venv/.installed-*
    touch "$stamp"
fi
