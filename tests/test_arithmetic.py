"""Which processor's arithmetic the committed outputs follow, and the cells that depend on it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest

from book_tools import arithmetic, reproduce, write_notebook

ROOT = Path(__file__).resolve().parents[1]
CHAPTERS = reproduce.chapter_notebooks()

JUNIT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" errors="0" failures="3" skipped="0" tests="5">
<testcase classname="notebooks.04_gru_pretraining.ipynb" name="Cell 20" time="30.1">
  <failure message="Notebook cell execution failed&#10;Cell 20: Cell outputs differ&#10;&#10;Input:...">
  - memorise  100 updates, loss 4.355 -&gt; 0.022
  + memorise  100 updates, loss 4.355 -&gt; 0.021</failure></testcase>
<testcase classname="notebooks.04_gru_pretraining.ipynb" name="Cell 21" time="0.1"/>
<testcase classname="notebooks.04_gru_pretraining.ipynb" name="Cell 22" time="0.1">
  <failure message="Notebook cell execution failed&#10;Cell 22: Cell execution caused an exception">
  AssertionError: the gain is within noise</failure></testcase>
<testcase classname="notebooks.09_transformers_and_lora.ipynb" name="Cell 46" time="3.0">
  <failure message="Notebook cell execution failed&#10;Cell 46: Cell outputs differ">- 0.630 + 0.636</failure></testcase>
<testcase classname="tests.test_env" name="test_reset" time="0.1"/>
</testsuite></testsuites>
"""


def test_the_committed_outputs_name_the_vendor_they_were_made_on():
    vendor = arithmetic.read_stamp()
    assert vendor in {"GenuineIntel", "AuthenticAMD"}, vendor


def test_a_malformed_stamp_says_how_to_mend_it(tmp_path):
    bad = tmp_path / "outputs_made_on.json"
    bad.write_text('{"vendor": "AMD"}')
    with pytest.raises(ValueError, match="re-run the batch"):
        arithmetic.read_stamp(bad)
    assert arithmetic.read_stamp(tmp_path / "missing.json") is None


def test_only_cells_that_ran_and_printed_something_else_are_found(tmp_path):
    report = tmp_path / "notebooks.xml"
    report.write_text(JUNIT)
    found = arithmetic.cells_whose_outputs_differed(report)
    # cell 22 raised: a broken assertion is a failure to fix, never something to stop comparing
    assert found == {"04_gru_pretraining.ipynb": [20], "09_transformers_and_lora.ipynb": [46]}


def test_tagging_touches_tags_only(tmp_path):
    src = ROOT / "notebooks" / "04_gru_pretraining.ipynb"
    shutil.copy(src, tmp_path / src.name)
    before = json.loads(src.read_text())
    for cell in before["cells"]:  # start untagged, whatever the committed tags are
        tags = cell.get("metadata", {}).get("tags")
        if tags is not None:
            cell["metadata"]["tags"] = [t for t in tags if t != arithmetic.TAG]
    write_notebook(tmp_path / src.name, before)
    assert arithmetic.tag({src.name: [20, 24]}, tmp_path) == 2
    assert arithmetic.tag({src.name: [20]}, tmp_path) == 0  # already there
    after = json.loads((tmp_path / src.name).read_text())
    assert arithmetic.tagged_cells(tmp_path / src.name) == [20, 24]
    for a, b in zip(before["cells"], after["cells"]):
        assert a["source"] == b["source"] and a.get("outputs") == b.get("outputs")
    with pytest.raises(SystemExit, match="another version of the notebook"):
        arithmetic.tag({src.name: [10_000]}, tmp_path)
    assert arithmetic.untag(tmp_path) == 2 and arithmetic.tagged_cells(tmp_path / src.name) == []


def _item(tags):
    return SimpleNamespace(cell=SimpleNamespace(metadata={"tags": tags}), options={"check": True})


def test_tagged_cells_are_left_uncompared_only_on_another_vendor():
    items = [_item([arithmetic.TAG]), _item([]), _item(["hide-input"])]
    assert arithmetic.cells_not_to_compare(items, "AuthenticAMD", "AuthenticAMD") == []
    assert arithmetic.cells_not_to_compare(items, None, "GenuineIntel") == []
    assert arithmetic.cells_not_to_compare(items, "AuthenticAMD", "GenuineIntel") == [items[0]]


NOTEBOOK = {"nbformat": 4, "nbformat_minor": 5, "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
            "cells": [{"cell_type": "code", "id": "a", "execution_count": 1, "source": "print(1 + 1)",
                       "metadata": {"tags": [arithmetic.TAG]},
                       "outputs": [{"output_type": "stream", "name": "stdout", "text": "3\n"}]},  # "made elsewhere"
                      {"cell_type": "code", "id": "b", "execution_count": 2, "source": "print('same')",
                       "metadata": {}, "outputs": [{"output_type": "stream", "name": "stdout", "text": "same\n"}]}]}


@pytest.mark.parametrize("vendor", ["AuthenticAMD", "SomeOtherVendor"])
def test_nbval_skips_comparing_tagged_cells_only_on_another_vendor(tmp_path, vendor):
    """The real hooks under real nbval: the tagged cell's output differs from the committed one."""
    import subprocess
    import sys

    (tmp_path / "check.ipynb").write_text(json.dumps(NOTEBOOK))
    (tmp_path / "conftest.py").write_text(  # notebooks/conftest.py, on a machine of the given vendor
        "from book_tools import arithmetic\n"
        f"arithmetic.read_stamp = lambda path=None: 'AuthenticAMD'\n"
        "arithmetic.chapter_stamps = lambda path=None: {}\n"
        f"arithmetic.cpu_vendor = lambda: {vendor!r}\n"
        f"exec(open({str(ROOT / 'notebooks' / 'conftest.py')!r}).read())\n")
    result = subprocess.run([sys.executable, "-m", "pytest", "--nbval", "check.ipynb", "-q", "-p", "no:cacheprovider",
                             "--junitxml=r.xml"], cwd=tmp_path, capture_output=True, text=True,
                            env={**__import__("os").environ, "PYTHONPATH": str(ROOT)})
    summary = reproduce.summarize_junit(tmp_path / "r.xml")
    if vendor == "AuthenticAMD":  # the vendor the outputs were made on: every cell compared
        assert result.returncode == 1 and "Cell outputs differ" in result.stdout, result.stdout
        assert summary.startswith("notebook cells compared: 2 in 1 notebooks (1 reproduced, 1 failed"), summary
    else:
        assert result.returncode == 0, result.stdout + result.stderr
        assert "1 cells tagged 'cpu-arithmetic' in 1 notebooks ran, but their outputs were not compared" in result.stdout
        assert summary.endswith("1 more ran without their outputs being compared (tagged 'cpu-arithmetic', "
                                "made on another processor vendor)"), summary


def test_nbval_compares_a_chapter_stamped_apart_by_its_own_vendor(tmp_path):
    """`apart` was re-executed alone on SomeOtherVendor; `check` follows the batch's AMD; this machine is AMD."""
    import subprocess
    import sys

    for name in ("check", "apart"):
        (tmp_path / f"{name}.ipynb").write_text(json.dumps(NOTEBOOK))
    (tmp_path / "conftest.py").write_text(
        "from book_tools import arithmetic\n"
        "arithmetic.read_stamp = lambda path=None: 'AuthenticAMD'\n"
        "arithmetic.chapter_stamps = lambda path=None: {'apart': {'vendor': 'SomeOtherVendor', "
        "'checkpoints': arithmetic.checkpoints_digest()}}\n"
        "arithmetic.cpu_vendor = lambda: 'AuthenticAMD'\n"
        f"exec(open({str(ROOT / 'notebooks' / 'conftest.py')!r}).read())\n")
    result = subprocess.run([sys.executable, "-m", "pytest", "--nbval", "check.ipynb", "apart.ipynb", "-q",
                             "-p", "no:cacheprovider", "--junitxml=r.xml"], cwd=tmp_path, capture_output=True,
                            text=True, env={**__import__("os").environ, "PYTHONPATH": str(ROOT)})
    assert result.returncode == 1 and "check.ipynb::Cell 0" in result.stdout, result.stdout
    assert "apart.ipynb::Cell 0" not in result.stdout.split("short test summary")[-1], result.stdout
    assert ("1 cells tagged 'cpu-arithmetic' in 1 notebooks ran, but their outputs were not compared: the committed "
            "outputs follow SomeOtherVendor's") in result.stdout, result.stdout


def test_a_partial_batch_on_another_vendor_is_guarded(monkeypatch, tmp_path):
    stamp = tmp_path / "outputs_made_on.json"
    arithmetic.write_stamp("SomeOtherVendor", stamp)
    monkeypatch.setattr(arithmetic, "STAMP_PATH", stamp)
    monkeypatch.setattr(arithmetic, "read_stamp", lambda path=stamp: "SomeOtherVendor")
    sensitive = [nb for nb in CHAPTERS if arithmetic.tagged_cells(nb)]
    plain = [nb for nb in CHAPTERS if not arithmetic.tagged_cells(nb)]
    assert sensitive and plain
    assert reproduce.check_arithmetic(sensitive[:1]) == sensitive[:1]
    assert reproduce.check_arithmetic(plain) == plain  # none may write other checkpoints, tagged or not
    assert reproduce.check_arithmetic(CHAPTERS) == []  # the whole batch re-stamps every chapter
    monkeypatch.setattr(arithmetic, "read_stamp", lambda path=stamp: arithmetic.cpu_vendor())
    assert reproduce.check_arithmetic(sensitive[:1]) == []  # on the batch's vendor


def test_a_chapter_re_executed_alone_is_stamped_apart_and_the_batch_clears_it(monkeypatch, tmp_path):
    from book_tools import checkpoint_files

    checkpoints = tmp_path / "checkpoints"
    checkpoints.mkdir()
    (checkpoints / "model.json").write_text('{"w": 1}')
    monkeypatch.setattr(checkpoint_files, "CHECKPOINTS", checkpoints)
    stamp = tmp_path / "outputs_made_on.json"
    arithmetic.write_stamp("AuthenticAMD", stamp)
    arithmetic.stamp_chapter("06_ppo_and_gae", "GenuineIntel", apart=True, path=stamp)
    arithmetic.stamp_chapter("05_policy_gradients", "GenuineIntel", apart=False, path=stamp)  # no tagged cell
    assert list(arithmetic.chapter_stamps(stamp)) == ["06_ppo_and_gae"]
    assert arithmetic.made_on("06_ppo_and_gae", stamp) == "GenuineIntel"
    assert arithmetic.made_on("04_gru_pretraining", stamp) == "AuthenticAMD"
    assert arithmetic.read_stamp(stamp) == "AuthenticAMD"
    (checkpoints / "model.json").write_text('{"w": 2}')  # a chapter before it trained another model since
    with pytest.raises(arithmetic.StaleStamp, match=r"06_ppo_and_gae was re-executed alone on GenuineIntel from other "
                                                    r"checkpoints.*--only 06"):
        arithmetic.made_on("06_ppo_and_gae", stamp)
    arithmetic.stamp_chapter("06_ppo_and_gae", "AuthenticAMD", apart=True, path=stamp)  # again, on the batch's vendor
    assert arithmetic.chapter_stamps(stamp) == {} and "chapters" not in json.loads(stamp.read_text())
    arithmetic.stamp_chapter("06_ppo_and_gae", "GenuineIntel", apart=True, path=stamp)
    arithmetic.write_stamp("GenuineIntel", stamp)  # the whole batch
    assert arithmetic.chapter_stamps(stamp) == {}
    for bad in ('{"cpu_vendor": "AuthenticAMD", "chapters": ["06"]}',
                '{"cpu_vendor": "AuthenticAMD", "chapters": {"06": "GenuineIntel"}}'):
        stamp.write_text(bad)
        with pytest.raises(ValueError, match="re-run the batch"):
            arithmetic.made_on("06", stamp)


def test_a_chapter_that_writes_other_checkpoints_or_fails_is_put_back(monkeypatch, tmp_path):
    from book_tools import checkpoint_files

    checkpoints, notebook = tmp_path / "checkpoints", tmp_path / "04_x.ipynb"
    checkpoints.mkdir()
    (checkpoints / "model.json").write_text('{"w": 1}')
    notebook.write_text("committed outputs")

    def execute(nb, fail=False):  # the chapter trains another model here, and writes its outputs
        (checkpoints / "model.json").write_text('{"w": 2}')
        nb.write_text("other outputs")
        if fail:
            raise SystemExit("a cell failed")
        return 1.0

    monkeypatch.setattr(checkpoint_files, "CHECKPOINTS", checkpoints)
    monkeypatch.setattr(reproduce, "execute", execute)
    with pytest.raises(SystemExit, match=r"wrote other checkpoints \(model.json\).*put back"):
        reproduce._execute_apart(notebook)
    assert (checkpoints / "model.json").read_text() == '{"w": 1}' and notebook.read_text() == "committed outputs"
    monkeypatch.setattr(reproduce, "execute", lambda nb: execute(nb, fail=True))
    with pytest.raises(SystemExit, match="a cell failed"):
        reproduce._execute_apart(notebook)
    assert (checkpoints / "model.json").read_text() == '{"w": 1}' and notebook.read_text() == "committed outputs"
    monkeypatch.setattr(reproduce, "execute", lambda nb: nb.write_text("new outputs") and 2.0)
    assert reproduce._execute_apart(notebook) == 2.0 and notebook.read_text() == "new outputs"


def test_training_from_random_weights_is_tagged_and_chapters_without_training_are_not():
    tagged = {nb.stem[:2] for nb in CHAPTERS if arithmetic.tagged_cells(nb)}
    assert {"04", "09"} <= tagged  # the GRU's and the tiny coder's pretraining
    assert not tagged & {"01", "02", "03"}


def test_the_summary_counts_uncompared_cells_apart(tmp_path):
    uncompared = '<properties><property name="outputs_compared" value="no"/></properties>'
    xml = tmp_path / "r.xml"
    xml.write_text('<testsuites><testsuite>'
                   '<testcase classname="notebooks.04_a.ipynb" name="Cell 0"/>'
                   f'<testcase classname="notebooks.04_a.ipynb" name="Cell 1">{uncompared}</testcase>'
                   f'<testcase classname="notebooks.04_a.ipynb" name="Cell 2">{uncompared}<failure/></testcase>'
                   '</testsuite></testsuites>')
    line = reproduce.summarize_junit(xml)
    assert line.startswith("notebook cells compared: 2 in 1 notebooks (1 reproduced, 1 failed, 0 skipped); "
                           "1 more ran without their outputs being compared"), line


def test_checkpoint_comparison_reads_numbers_not_bytes(tmp_path):
    import torch

    from book_tools import checkpoint_files

    before, after = tmp_path / "before", tmp_path / "after"
    for d in (before, after):
        (d / "sub").mkdir(parents=True)
    torch.save({"state_dict": {"w": torch.ones(3)}, "config": {"hidden_dim": 4}}, before / "m.pt")
    torch.save({"config": {"hidden_dim": 4}, "state_dict": {"w": torch.ones(3)}}, after / "m.pt")  # other key order
    (before / "sub" / "log.json").write_text('{"loss": 1.5, "step": 1}')
    (after / "sub" / "log.json").write_text('{"step": 1, "loss": 1.5}')
    assert checkpoint_files.changed_files(before, after) == []
    torch.save({"state_dict": {"w": torch.ones(3) + 1e-7}, "config": {"hidden_dim": 4}}, after / "m.pt")
    (after / "new.bin").write_bytes(b"x")
    assert checkpoint_files.changed_files(before, after) == ["m.pt", "new.bin"]
