"""The repository's address: `sync-setup-cells --url` sets it, and `check-publish` (the publishing
workflow's step) refuses a book whose address is the placeholder or another repository's, or
whose notebooks' setup cells disagree with it."""

from __future__ import annotations

import json
import shutil

import pytest
import yaml

from book_tools import REPO_ROOT, colab, write_notebook
from book_tools.__main__ import main

PLACEHOLDER = "https://github.com/your-github-account/rl-for-code-course"
MINE = "https://github.com/alice/rl-course"


@pytest.fixture
def book(tmp_path):
    """A copy of _config.yml (the placeholder address) and two notebooks whose setup cell clones it."""
    config = tmp_path / "_config.yml"
    shutil.copy(REPO_ROOT / "_config.yml", config)
    colab.set_repository_url(PLACEHOLDER, config)
    notebooks = []
    for name in ("01_a.ipynb", "02_b.ipynb"):
        nb = {"cells": [{"cell_type": "markdown", "metadata": {}, "source": ["# A chapter\n"]},
                        {"cell_type": "code", "metadata": {}, "execution_count": 1, "outputs": [],
                         "source": colab.setup_cell_source(PLACEHOLDER).splitlines(keepends=True)},
                        {"cell_type": "code", "metadata": {}, "execution_count": 2, "source": ["print(1)\n"],
                         "outputs": [{"output_type": "stream", "name": "stdout", "text": ["1\n"]}]}],
              "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
        write_notebook(tmp_path / name, nb)
        notebooks.append(tmp_path / name)
    return config, notebooks


def test_the_placeholder_is_refused_wherever_the_book_is_built(book):
    config, notebooks = book
    for expected in (None, colab.built_in("alice/rl-course"), PLACEHOLDER):
        problems = colab.publish_problems(expected, notebooks, config)
        assert len(problems) == 1 and "placeholder" in problems[0]
    assert colab.fix_command(MINE, config) == f".venv/bin/python -m book_tools sync-setup-cells --url {MINE}"
    assert colab.fix_command(None, config).endswith("--url https://github.com/OWNER/NAME")


def test_a_matching_address_is_accepted_once_the_cells_follow_it(book):
    config, notebooks = book
    expected = colab.built_in("alice/rl-course", "https://github.com/")  # GITHUB_REPOSITORY, GITHUB_SERVER_URL
    before = config.read_text()
    colab.set_repository_url(MINE, config)
    changed = [a for a, b in zip(before.splitlines(), config.read_text().splitlines()) if a != b]
    assert changed == [f"  url: {PLACEHOLDER}"], "only the address changes; comments and keys stay"
    assert yaml.safe_load(config.read_text())["repository"]["url"] == MINE

    problems = colab.publish_problems(expected, notebooks, config)  # the cells still clone the placeholder
    assert len(problems) == 1 and "setup cell of every chapter" in problems[0]
    outputs = [json.loads(p.read_text())["cells"][2] for p in notebooks]
    assert colab.sync_setup_cells(notebooks, MINE) == notebooks
    assert [json.loads(p.read_text())["cells"][2] for p in notebooks] == outputs, "only the setup cell changes"
    assert colab.publish_problems(expected, notebooks, config) == []
    assert colab.publish_problems(None, notebooks, config) == []  # built elsewhere: not the placeholder is enough
    assert colab.publish_problems(MINE.upper() + ".git", notebooks, config) == []


def test_another_repositorys_address_is_refused(book):
    config, notebooks = book
    colab.set_repository_url(MINE, config)
    colab.sync_setup_cells(notebooks, MINE)
    problems = colab.publish_problems(colab.built_in("bob/fork-of-it"), notebooks, config)
    assert len(problems) == 1 and "https://github.com/bob/fork-of-it" in problems[0]


def test_set_repository_url_refuses_what_is_not_an_address(book):
    config, _ = book
    with pytest.raises(ValueError, match="OWNER/NAME"):
        colab.set_repository_url("github.com/alice", config)


def test_check_publish_command_refuses_this_books_placeholder_and_prints_the_fix(capsys, monkeypatch):
    """The workflow's step on the committed book, as GitHub Actions runs it in alice's repository.
    (Until the course is published its address is the placeholder; once published, this is
    another repository's address: refused either way, with the same fix.)"""
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    assert main(["check-publish", "--repository", "alice/rl-course", "--server", "https://github.com"]) == 1
    err = capsys.readouterr().err
    assert "not publishing" in err
    assert f".venv/bin/python -m book_tools sync-setup-cells --url {MINE}" in err


def test_the_publishing_workflow_checks_the_address_before_it_builds():
    workflow = yaml.safe_load((REPO_ROOT / ".github" / "workflows" / "book.yml").read_text())
    steps = workflow["jobs"]["build"]["steps"]
    runs = [step.get("run", "") + step.get("uses", "") for step in steps]
    check = next(i for i, run in enumerate(runs) if "book_tools check-publish" in run)
    assert check < next(i for i, run in enumerate(runs) if "make test" in run)
    assert check < next(i for i, run in enumerate(runs) if "upload-pages-artifact" in run)
    assert "3.12" in str(steps[1]["with"]["python-version"]), "Colab's Python, for tests/test_colab_standin.py"
