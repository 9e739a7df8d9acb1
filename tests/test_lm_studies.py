"""The language model's studies (benchmarks/studies/lm/*.toml, run by benchmarks/smollm2_rl.py): every study file
reads and asks for the settings its record was made with, a wrong study is named before any run starts, and a run
writes a record in the one format that is extended only by the code that made it."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from conftest import load_benchmark

ROOT = Path(__file__).resolve().parents[1]
STUDIES = sorted((ROOT / "benchmarks" / "studies" / "lm").glob("*.toml"))


@pytest.fixture(scope="module")
def runner():
    return load_benchmark("smollm2_rl")


def _stand_in(monkeypatch, runner, **fakes):
    """Stand in for code_state or machine where the runner calls them and where _common's rule
    (made_here_by_this_code) does."""
    common = sys.modules[runner.made_here_by_this_code.__module__]
    for name, fake in fakes.items():
        monkeypatch.setattr(runner, name, fake)
        monkeypatch.setattr(common, name, fake)


def test_there_are_studies():
    assert {p.stem for p in STUDIES} == {"smollm2_rl", "smollm2_reinforce", "smollm2_ppo", "trl_grpo",
                                         "smollm2_teacher_grpo", "smollm2_humaneval_rl"}


@pytest.mark.parametrize("path", STUDIES, ids=lambda p: p.stem)
def test_a_study_asks_for_the_settings_its_record_was_made_with(runner, path):
    from book_tools.reproduce import experiments
    from course_lib.core.rl import kl_weight

    args, study = runner.parse([str(path)])
    entry = next(e for e in experiments() if e["path"] == f"notebooks/data/{study['name']}.json")
    assert entry["command"] == f"python benchmarks/smollm2_rl.py {path.relative_to(ROOT).as_posix()}"
    assert args.output == ROOT / entry["path"] and args.seeds == study["seeds"]
    record = json.loads((ROOT / entry["path"]).read_text())
    rl = runner.rl_settings(study)
    settings = runner.run_settings(rl, loop="course", humaneval=study["humaneval"],
                                   humaneval_train=study["humaneval_train"])
    for key in ("model", "greedy", "sampled", "lora", "humaneval", "rollout_pool"):
        assert record.get(key) == settings.get(key), f"{path.name}: {key}"
    assert ("loop" in record) == (study["loop"] == "trl") and record["seeds"] == study["seeds"]
    if "code_revision" in record:  # made by this runner: the same settings, every RLConfig setting too
        assert record["rl"] == rl and record["rl_config"] == settings["rl_config"]
    else:  # made before: REINFORCE's and PPO's said kl_coef 0.05, which their loop ignored (weight 0)
        assert {k: v for k, v in record["rl"].items() if k != "kl_coef"} == {k: v for k, v in rl.items() if k != "kl_coef"}
        ran_with = 0.0 if rl["method"] in ("reinforce", "ppo") else record["rl"]["kl_coef"]
        assert kl_weight(rl["method"], rl["kl_coef"]) == ran_with


def test_a_seed_listed_twice_is_refused(runner, capsys):
    with pytest.raises(SystemExit):  # as gru_study refuses it: the record's command would list it twice
        runner.parse([str(STUDIES[0]), "--seeds", "1", "0", "1"])
    assert "--seeds lists a value twice: [1, 0, 1]" in capsys.readouterr().err
    args, _ = runner.parse([str(STUDIES[0]), "--seeds", "1", "0"])
    assert args.seeds == [1, 0]


GOOD = ('name = "x"\nseeds = [0]\nstart_from = ""\nloop = "course"\nhumaneval = false\nhumaneval_train = false\n'
        '[rl]\n')


@pytest.mark.parametrize("text, says", [
    (GOOD.replace('name = "x"', 'name = "other"'), "file's name"),
    (GOOD.replace("seeds = [0]", "seeds = []"), "seeds must be"),
    (GOOD.replace("seeds = [0]", "seeds = [0, 0]"), "different whole numbers"),
    (GOOD.replace('loop = "course"', 'loop = "mine"'), "loop must be one of course, trl"),
    (GOOD.replace('start_from = ""', 'start_from = "nosuch"'), "no record notebooks/data/nosuch.json"),
    (GOOD.replace("humaneval = false\n", ""), "missing or wrong: humaneval (expected bool)"),
    (GOOD + "[extra]\nepochs = 2\n", "unknown keys: extra"),
    (GOOD + 'method = "reinforce"\n', "kl_coef=0.05: reinforce's loss has no KL term"),
    (GOOD + "stepz = 3\n", "[rl], seed 0"),
    ("name = ", "cannot read the study"),
])
def test_a_wrong_study_is_named_before_any_run(runner, tmp_path, text, says):
    path = tmp_path / "x.toml"
    path.write_text(text)
    with pytest.raises(SystemExit) as raised:
        runner.read_study(path)
    assert says in str(raised.value) and str(path) in str(raised.value)


def test_a_run_writes_a_valid_record_extended_only_by_the_code_that_made_it(runner, tmp_path, monkeypatch):
    """The runner with stand-ins for the model, its training and its evaluation: which seeds run, what it writes."""
    import schema

    from course_lib.lm import lm_policy

    trained = []
    monkeypatch.setattr(lm_policy, "load_policy", lambda *a, **k: ("model", "tokenizer"))
    monkeypatch.setattr(runner, "measure", lambda model, tokenizer, tasks, seed: {
        "train_greedy_pass@1": 0.5, "val_greedy_pass@1": 0.25, "test_greedy_pass@1": 0.1 * seed,
        "test_pass_rate": 0.2})
    monkeypatch.setattr(runner, "train", lambda model, tokenizer, tasks, rl, seed, **k: trained.append(seed) or [
        {"step": 0, "reward": 0.5}])
    state = {"code_revision": "a" * 40, "uncommitted_changes": False}
    _stand_in(monkeypatch, runner, code_state=lambda: dict(state))
    study = runner.read_study(ROOT / "benchmarks" / "studies" / "lm" / "smollm2_reinforce.toml")
    out = tmp_path / "smollm2_reinforce.json"

    runner.run(study, out, [0, 1], "benchmarks/studies/lm/smollm2_reinforce.toml")
    record = json.loads(out.read_text())
    assert schema.validate(record) == [] and record["code_revision"] == "a" * 40
    assert record["command"] == ("python benchmarks/smollm2_rl.py benchmarks/studies/lm/smollm2_reinforce.toml "
                                 f"--seeds 0 1 --output {out}")  # what remakes it as it is
    # the start: measured here, since chapter 10's record (start_from) was made by other code
    assert [r["model"] for r in record["runs"]] == ["start", "reinforce", "reinforce"] and "from" not in record["runs"][0]
    assert record["summary"]["test_greedy_pass@1"] == {"start": 0.0, "reinforce": {"mean": 0.05, "std": 0.0707,
                                                                                      "values": [0.0, 0.1]}}
    assert record["rl"]["method"] == "reinforce" and record["config"]["rl"] == record["rl"] and trained == [0, 1]
    assert record["rl_config"]["engine"] == "auto" and record["rl_config"]["kl_coef"] == 0.0

    runner.run(study, out, [0, 1, 2], "s.toml")  # the same code: only the seed it lacks
    record = json.loads(out.read_text())
    assert trained == [0, 1, 2] and record["seeds"] == [0, 1, 2]
    assert record["command"] == f"python benchmarks/smollm2_rl.py s.toml --output {out}"  # the study's seeds: none
    other = runner.read_study(ROOT / "benchmarks" / "studies" / "lm" / "smollm2_ppo.toml")
    runner.run(other, out, [0], "s.toml")  # another study's settings: made again, never mixed into the record
    record = json.loads(out.read_text())
    assert trained == [0, 1, 2, 0] and record["rl"]["method"] == "ppo" and record["seeds"] == [0]
    assert [r["model"] for r in record["runs"]] == ["start", "ppo"]
    runner.run(study, out, [0], "s.toml")
    state["code_revision"] = "b" * 40  # other code: made again
    runner.run(study, out, [1], "s.toml")
    record = json.loads(out.read_text())
    assert trained == [0, 1, 2, 0, 0, 1] and record["seeds"] == [1] and record["code_revision"] == "b" * 40
    _stand_in(monkeypatch, runner, machine=lambda: "another processor")  # another machine: made again
    runner.run(study, out, [1], "s.toml")
    assert trained == [0, 1, 2, 0, 0, 1, 1]


def test_a_start_is_reused_only_from_a_record_made_by_this_code(runner, tmp_path, monkeypatch):
    settings = runner.run_settings(runner.RL, loop="course", humaneval=False, humaneval_train=False)
    _stand_in(monkeypatch, runner, code_state=lambda: {"code_revision": "a" * 40, "uncommitted_changes": False})
    legacy = ROOT / "notebooks" / "data" / "smollm2_rl.json"  # made before records named their commit
    assert runner.start_rows(legacy, settings) == []
    mine = tmp_path / "start.json"
    made = {**settings, "code_revision": "a" * 40, "uncommitted_changes": False, "machine": runner.machine(),
            "versions": {"torch": __import__("torch").__version__},
            "runs": [{"model": "start", "seed": 0}, {"model": "grpo", "seed": 0}]}
    monkeypatch.setattr(runner, "REPO_ROOT", tmp_path)
    mine.write_text(json.dumps(made))
    assert runner.start_rows(mine, settings) == [{"model": "start", "seed": 0, "from": "start.json"}]
    for change in ({"uncommitted_changes": True}, {"code_revision": "b" * 40}, {"machine": "another processor"},
                   {"versions": {"torch": "0.0"}}, {"sampled": {**settings["sampled"], "n_samples": 2}}):
        mine.write_text(json.dumps({**made, **change}))
        assert runner.start_rows(mine, settings) == [], change
