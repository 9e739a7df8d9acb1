"""The GRU's studies (benchmarks/studies/*.toml, run by benchmarks/gru_study.py): every study file reads, every
run it asks for is a valid PPOConfig, its record is the one experiments.toml lists, and a wrong study is named
before any run starts."""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

import pytest
from conftest import load_benchmark

ROOT = Path(__file__).resolve().parents[1]
STUDIES = sorted((ROOT / "benchmarks" / "studies").glob("*.toml"))


@pytest.fixture(scope="module")
def gru_study():
    return load_benchmark("gru_study")


def _args(study: dict, path: Path) -> argparse.Namespace:
    return argparse.Namespace(study=path, seeds=study["seeds"], variants=list(study["variants"]),
                              updates=study["updates"], episodes=study["episodes"], eval_every=study["eval_every"],
                              pretrained=ROOT / "notebooks" / "checkpoints" / "gru_pretrained.pt")


def test_there_are_studies():
    assert {p.stem for p in STUDIES} >= {"teacher_ablation", "explore_ablation", "lambda_ablation", "gru_methods"}


@pytest.mark.parametrize("path", STUDIES, ids=lambda p: p.stem)
def test_a_study_reads_and_every_run_is_a_valid_config(gru_study, path):
    from book_tools.reproduce import experiments

    study = gru_study.read_study(path)
    gru_study.check_settings(_args(study, path), study["variants"])  # raises SystemExit on a bad setting
    entry = next(e for e in experiments() if e["path"] == f"notebooks/data/{study['name']}.json")
    assert entry["command"] == f"python benchmarks/gru_study.py {path.relative_to(ROOT).as_posix()}"
    record = json.loads((ROOT / entry["path"]).read_text())
    base = record["base_config"]
    assert (record["variants"] == study["variants"] and record["seeds"] == study["seeds"]
            and (base["updates"], base["episodes_per_update"], base["eval_every"])
            == (study["updates"], study["episodes"], study["eval_every"])), (
        f"{entry['path']} was made with other settings than {path.name}: remake it ({entry['command']})")


def test_options_fill_from_the_study_before_or_after_its_file(gru_study):
    path = ROOT / "benchmarks" / "studies" / "teacher_ablation.toml"
    args, study = gru_study.parse(["--jobs", "1", "--updates", "3", str(path), "--seeds", "0", "1"])
    assert (args.jobs, args.updates, args.seeds, args.episodes) == (1, 3, [0, 1], study["episodes"])
    assert args.variants == list(study["variants"]) and args.out == ROOT / "runs" / "teacher_ablation"
    with pytest.raises(SystemExit):
        gru_study.parse([str(path), "--variants", "none", "nosuch"])
    for twice in (["--seeds", "1", "0", "1"], ["--variants", "none", "none"]):  # the record's command would list it twice
        with pytest.raises(SystemExit):
            gru_study.parse([str(path), *twice])
    args, _ = gru_study.parse([str(path), "--seeds", "1", "0"])
    assert args.seeds == [1, 0] and args.notebook_data == ROOT / "notebooks" / "data" / "teacher_ablation.json"


@pytest.mark.parametrize("text, says", [
    ('name = "other"\nupdates = 1\nepisodes = 8\neval_every = 0\nseeds = [0]\n[variants.a]\n', "file's name"),
    ('name = "study"\nupdates = 1\nepisodes = 8\neval_every = 0\nseeds = [0]\n', "variants"),
    ('name = "study"\nupdates = 1\nepisodes = 8\neval_every = 0\nseeds = ["0"]\n[variants.a]\n', "whole numbers"),
    ('name = "study"\nupdates = 1\nepisodes = 8\neval_every = 0\nseeds = [0]\nepochs = 2\n[variants.a]\n',
     "unknown keys: epochs"),
    ('name = "study"\nupdates = "1"\n', "updates (expected int)"),
    ('name = "study"\nupdates = 1\nepisodes = 8\n[', "cannot read"),
])
def test_a_wrong_study_file_is_named(gru_study, tmp_path, text, says):
    path = tmp_path / "study.toml"
    path.write_text(text)
    with pytest.raises(SystemExit, match=re.escape(says)):
        gru_study.read_study(path)


@pytest.mark.parametrize("settings, says", [({"bc_coef": -1.0}, "bc_coef must be >= 0"),
                                            ({"no_such_setting": 1}, "no_such_setting")])
def test_a_wrong_setting_is_named_with_its_variant_before_any_run(gru_study, tmp_path, settings, says):
    study = {"name": "study", "updates": 1, "episodes": 8, "eval_every": 0, "seeds": [0], "variants": {"a": settings}}
    with pytest.raises(SystemExit, match=f"variant 'a', seed 0: .*{says}"):
        gru_study.check_settings(_args(study, tmp_path / "study.toml"), study["variants"])
