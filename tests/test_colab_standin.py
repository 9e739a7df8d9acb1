"""Chapter 1 opened the way a Colab reader opens it, in a stand-in for Colab.

The stand-in is a fresh Python 3.12 virtual environment (Colab's Python) that already holds a
torch and Colab's ipywidgets 7.7.1, with ``google.colab`` imported as Colab's kernel has it. The
repository is served from a bare clone of this one (its committed HEAD), whose path the setup
cell clones instead of ``_config.yml``'s address. The setup cell runs as a reader runs it: first
with the package index out of reach (pip fails: the cell must say so and not mark the install
done), then again (the retry must finish the install, print nothing, and leave torch and
ipywidgets as they were), followed by chapter 1's first cells, which need no torch (what they
print must be what the book shows), and once more (nothing left to do).

The torch in the stand-in is a stand-in too: a distribution named torch, version
2.13.0+colabstandin, with an empty module. PyPI's torch for Python 3.12 on x86-64 Linux is a
CUDA build (a 0.5 GB wheel and about 2.5 GB of NVIDIA libraries); the CPU build the course pins
(constraints.txt) is for Python 3.11. No index has a torch of the stand-in's version, so had the
setup cell asked pip to replace Colab's torch, pip would fail instead of downloading gigabytes.

It installs the course's dependencies for Python 3.12 (downloaded the first time, then from
pip's cache): about a minute and a half on a 2-core machine, two minutes the first time. It
needs a Python 3.12 interpreter: $COLAB_PYTHON, ``python3.12`` on PATH or pyenv's 3.12; without
one it is skipped, except under CI, where it fails.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import textwrap
from pathlib import Path

import pytest

from book_tools import REPO_ROOT, colab

pytestmark = pytest.mark.slow

CHAPTER = REPO_ROOT / "notebooks" / "01_programs_as_tasks.ipynb"
FIRST_CELLS = 12  # chapter 1's code cells up to its first use of the sandbox's batch runner: no torch in them
STAND_IN_TORCH = "2.13.0+colabstandin"
COLAB_IPYWIDGETS = "7.7.1"


def python312() -> str | None:
    """A Python 3.12 interpreter: $COLAB_PYTHON, python3.12 on PATH, or pyenv's."""
    candidates = [os.environ.get("COLAB_PYTHON"), shutil.which("python3.12")]
    candidates += sorted(str(p) for p in (Path.home() / ".pyenv" / "versions").glob("3.12*/bin/python3.12"))
    for candidate in filter(None, candidates):
        try:
            done = subprocess.run([candidate, "-c", "import sys, venv; print(sys.version_info[:2])"],
                                  capture_output=True, text=True, timeout=30)
        except OSError:
            continue
        if done.returncode == 0 and done.stdout.strip() == "(3, 12)":
            return candidate
    return None


# Runs inside the stand-in: each cell's source is executed in one namespace, as a kernel does,
# after `google.colab` is imported; what each cell prints is collected.
RUN_CELLS = textwrap.dedent('''
    import contextlib, io, json, sys, types
    sys.modules["google.colab"] = types.ModuleType("google.colab")
    cells, out = json.load(open(sys.argv[1])), sys.argv[2]
    namespace, printed = {"__name__": "__main__"}, []
    for source in cells:
        buffer = io.StringIO()
        try:
            with contextlib.redirect_stdout(buffer):
                exec(compile(source, "<cell>", "exec"), namespace)
        finally:
            printed.append(buffer.getvalue())
            json.dump(printed, open(out, "w"))
    import course_lib, ipywidgets, torch
    from importlib import metadata
    json.dump({"printed": printed, "course_lib": course_lib.__file__, "ipywidgets": ipywidgets.__version__,
               "torch": metadata.version("torch"), "torch_module": open(torch.__file__).read()}, open(out, "w"))
''')


def install_stand_in_torch(python: str) -> None:
    """Write a distribution named torch (an empty module, the version above) into the environment,
    as pip would install it."""
    purelib = Path(subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                  capture_output=True, text=True, check=True).stdout.strip())
    (purelib / "torch").mkdir()
    (purelib / "torch" / "__init__.py").write_text(
        f'"""Colab\'s torch, standing in: only its name and version."""\n__version__ = "{STAND_IN_TORCH}"\n')
    info = purelib / f"torch-{STAND_IN_TORCH}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: torch\nVersion: {STAND_IN_TORCH}\n")
    (info / "INSTALLER").write_text("colab\n")
    files = ["torch/__init__.py", f"{info.name}/METADATA", f"{info.name}/INSTALLER", f"{info.name}/RECORD"]
    (info / "RECORD").write_text("".join(f"{f},,\n" for f in files))


def pip_cache_dir() -> str:
    """pip's own cache, so a second run downloads nothing (the stand-in gets a home of its own)."""
    if os.environ.get("PIP_CACHE_DIR"):
        return os.environ["PIP_CACHE_DIR"]
    return str(Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "pip")


def test_chapter_1_opens_on_a_colab_stand_in(tmp_path):
    python = python312()
    if python is None:
        message = "no Python 3.12 interpreter (Colab's Python): install python3.12 or set COLAB_PYTHON"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)

    # The repository, served from a bare clone of this one.
    served = tmp_path / "served.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(REPO_ROOT), str(served)], check=True)

    # Colab: Python 3.12 with a torch and ipywidgets 7.7.1 already installed.
    venv = tmp_path / "colab"
    subprocess.run([python, "-m", "venv", str(venv)], check=True)
    colab_python = str(venv / "bin" / "python")
    install_stand_in_torch(colab_python)
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    env.update(HOME=str(home), PIP_CACHE_DIR=pip_cache_dir(), MPLBACKEND="Agg", PIP_DISABLE_PIP_VERSION_CHECK="1",
               PATH=f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}")
    subprocess.run([colab_python, "-m", "pip", "install", "-q", f"ipywidgets=={COLAB_IPYWIDGETS}"],
                   env=env, check=True, capture_output=True)

    setup = colab.setup_cell_source(str(served))  # the published address, here the bare clone
    nb = json.loads(CHAPTER.read_text())
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    assert "".join(code[0]["source"]) == colab.setup_cell_source(), "run sync-setup-cells"
    first = ["".join(c["source"]) for c in code[:FIRST_CELLS]]
    assert not any("torch" in source for source in first[1:]), "chapter 1's first cells must not need torch"
    driver = tmp_path / "run_cells.py"
    driver.write_text(RUN_CELLS)
    course = home / "rl-for-code-course"

    def run_cells(cells, extra_env=None):
        (tmp_path / "cells.json").write_text(json.dumps(cells))
        return subprocess.run([colab_python, str(driver), str(tmp_path / "cells.json"), str(tmp_path / "out.json")],
                              env={**env, **(extra_env or {})}, capture_output=True, text=True, cwd=tmp_path)

    # 1. No package index (the network failed): the cell stops with pip's message, and is not marked done.
    unreachable = dict(PIP_INDEX_URL="http://127.0.0.1:9/simple", PIP_EXTRA_INDEX_URL="", PIP_FIND_LINKS="",
                       PIP_CONFIG_FILE=os.devnull, PIP_RETRIES="0", PIP_TIMEOUT="5")
    failed = run_cells([setup], unreachable)
    assert failed.returncode != 0
    assert "RuntimeError" in failed.stderr and "-m pip install -q -c" in failed.stderr, failed.stderr[-3000:]
    assert (course / ".git").is_dir()  # the clone had worked
    assert not (course / ".installed").exists()

    # 2. The retry finishes the install, quietly, then chapter 1's first cells run.
    done = run_cells([setup] + first[1:])
    assert done.returncode == 0, done.stderr[-5000:]
    result = json.loads((tmp_path / "out.json").read_text())
    printed = result["printed"]
    assert printed[0] == "", "the setup cell prints nothing when it succeeds"
    assert (course / ".installed").exists()
    assert Path(result["course_lib"]).resolve().is_relative_to(course.resolve())
    # Colab's own packages are where they were: the same torch (the stand-in's empty module), the same ipywidgets.
    assert result["torch"] == STAND_IN_TORCH and "colab's torch, standing in" in result["torch_module"].lower()
    assert result["ipywidgets"] == COLAB_IPYWIDGETS
    # What the cells print is what the book shows (leaving out the cells that print a time).
    for cell, text in zip(code[:FIRST_CELLS], printed):
        committed = "".join("".join(o["text"]) for o in cell["outputs"] if o["output_type"] == "stream")
        if "seconds" not in committed:
            assert text == committed, "".join(cell["source"])[:200]

    # 3. Run again (a new session on the same machine): nothing to do, nothing printed.
    again = run_cells([setup])
    assert again.returncode == 0 and json.loads((tmp_path / "out.json").read_text())["printed"] == [""]
