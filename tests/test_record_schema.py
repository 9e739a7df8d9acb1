"""Every record (notebooks/data/, the one records folder) has the one format of benchmarks/schema.py, or is listed
in its LEGACY with what it lacks; benchmarks/experiments.toml gives each record's command, device and pages; and no
record is older than a change to its code without a reason (STILL_VALID in benchmarks/still_valid.py). Fast: JSON, the AST and a few git
calls."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks import schema  # noqa: E402

RECORDS = schema.record_files()
NAMES = [p.relative_to(ROOT).as_posix() for p in RECORDS]
VALID_EXAMPLE = "notebooks/data/smollm2_cpu_seeds.json"  # made by new_record: a whole, valid record


def _load(name: str) -> dict:
    return json.loads((ROOT / name).read_text())


def test_the_records_are_found():
    assert len(NAMES) >= 30
    assert {"notebooks/data/smollm2_cpu_seeds.json", "notebooks/data/generation_throughput.json",
            "notebooks/data/variants_gpu/two_digit_seed0.json"} <= set(NAMES)
    assert not any(n.endswith("adapter_config.json") for n in NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_record_validates_or_is_listed_as_legacy(name):
    problems = schema.validate(_load(name))
    if name in schema.LEGACY:
        assert problems, f"{name} now validates: take it out of schema.LEGACY"
    else:
        assert not problems, (f"{name} is not in the record format of benchmarks/schema.py:\n  "
                              + "\n  ".join(problems) + "\nRemake it with a script that uses _common.new_record, "
                              "or list it in schema.LEGACY with what it lacks")


def test_every_legacy_entry_names_a_record_that_exists():
    assert set(schema.LEGACY) <= set(NAMES), sorted(set(schema.LEGACY) - set(NAMES))
    assert all(reason.strip() for reason in schema.LEGACY.values())


EXPERIMENTS = schema.experiments()
# the pages that may name a record: the chapters and the book's pages (the Results pages among them)
PAGES = {p.relative_to(ROOT).as_posix(): p.read_text()
         for p in sorted((ROOT / "notebooks").glob("*.ipynb")) + sorted((ROOT / "book").rglob("*.md"))
         if "_build" not in p.parts}


def test_experiments_list_every_record_once():
    assert sorted(EXPERIMENTS) == sorted(NAMES), (
        f"benchmarks/experiments.toml lists no record for {sorted(set(NAMES) - set(EXPERIMENTS))} and lists "
        f"{sorted(set(EXPERIMENTS) - set(NAMES))}, which are not records")


def _as_listed(command: str, name: str) -> str:
    """The command a record names, as experiments.toml lists it: its scratch folder (--work) is DIR, and an output
    written elsewhere under the record's own file name (a GPU machine writes outside the repository; the file is
    then copied into notebooks/data/) is the record's path."""
    words = shlex.split(command)
    for i, word in enumerate(words[:-1]):
        if word == "--work":
            words[i + 1] = "DIR"
        elif word == "--output" and Path(words[i + 1]).name == Path(name).name:
            words[i + 1] = name
    return shlex.join(words)


@pytest.mark.parametrize("name", NAMES)
def test_an_experiment_names_its_script_device_and_the_pages_that_name_it(name):
    entry = EXPERIMENTS[name]
    words = entry["command"].split()
    assert words[0] == "python", f"{name}: a command runs python, got {entry['command']!r}"
    if words[1] == "-m":
        assert words[2] == "course_lib", f"{name}: {entry['command']!r}"
    else:
        assert (ROOT / words[1]).is_file(), f"{name}: its command runs {words[1]}, which does not exist"
    assert entry["device"] in ("cpu", "cuda"), f"{name}: device {entry['device']!r}"
    assert "--device cuda" not in entry["command"] or entry["device"] == "cuda", (
        f"{name}: device {entry['device']} but its command is {entry['command']!r}")
    record = _load(name)
    if not entry.get("by_hand") and name not in schema.LEGACY:
        assert _as_listed(record["command"], name) == entry["command"], (
            f"{name} was made by {record['command']!r}; experiments.toml says {entry['command']!r}")
    short, stem = name.removeprefix("notebooks/"), Path(name).stem
    # a page names it by its path, or by its name in quotes (a notebook's f"data/{name}.json")
    naming = sorted(page for page, text in PAGES.items()
                    if short in text or any(f"{q}{stem}{q}" in text for q in ('\\"', "'")))
    assert sorted(entry["pages"]) == naming, f"{name}: experiments.toml says pages {entry['pages']}, the pages that " \
                                             f"name it are {naming}"
    if "batch_before" in entry:
        assert f"notebooks/{entry['batch_before']}.ipynb" in naming, (
            f"{name}: the batch makes it before {entry['batch_before']}, which does not read it")


def test_some_real_records_validate_fully():
    valid = [n for n in NAMES if not schema.validate(_load(n))]
    assert VALID_EXAMPLE in valid and len(valid) >= 2, valid


@pytest.mark.parametrize("field", schema.REQUIRED_FIELDS)
def test_validate_names_a_missing_field(field):
    record = _load(VALID_EXAMPLE)
    del record[field]
    problems = schema.validate(record)
    assert [p for p in problems if p.startswith(f"{field}: missing")], problems
    assert all(p.startswith(f"{field}:") for p in problems), problems


@pytest.mark.parametrize("field, value, says", [
    ("code_revision", None, "git commit"), ("code_revision", "e8b323e", "40 hex"),
    ("seconds", "70 min", "seconds"), ("seconds", -1, "seconds"), ("threads", True, "whole number"),
    ("date", "27/11/2026", "YYYY-MM-DD"), ("script", "benchmarks/nowhere.py", "does not exist"),
    ("versions", {"python": "3.11.7"}, "torch"), ("runs", [], "non-empty"), ("runs", {"seed0": {}}, "list"),
    ("schema_version", 0, "expected 1"), ("machine", "", "non-empty"), ("uncommitted_changes", "no", "true or false"),
])
def test_validate_names_a_wrong_value(field, value, says):
    record = _load(VALID_EXAMPLE) | {field: value}
    problems = schema.validate(record)
    assert len(problems) == 1 and problems[0].startswith(f"{field}:") and says in problems[0], problems


def test_validate_checks_a_start_checkpoints_sha256():
    record = _load(VALID_EXAMPLE)
    assert schema.validate(record | {"pretrained_sha256": "0" * 64, "pretrained": "x.pt"}) == []
    assert schema.validate(record | {"pretrained_sha256": "abc", "pretrained": "x.pt"}) == [
        "pretrained_sha256: expected a SHA-256 (64 hex digits)"]
    assert [p.split(":")[0] for p in schema.validate(record | {"pretrained_sha256": "0" * 64})] == ["pretrained_sha256"]


def test_new_record_writes_the_schemas_header():
    """benchmarks/_common.new_record and the schema agree: its header is HEADER_FIELDS, and with rows and a
    summary the record validates."""
    from benchmarks import _common

    record = _common.new_record("benchmarks/smollm2_cpu_seeds.py", config={"steps": 1}, machine="cpu (test), 2 cores",
                                device="cpu", seconds=1.25)
    assert tuple(record) == schema.HEADER_FIELDS
    assert _common.SCHEMA_VERSION == schema.SCHEMA_VERSION
    problems = schema.validate(record | {"runs": [{"seed": 0}], "summary": {"mean": 0.5}})
    if record["code_revision"] is None:  # not a git clone: new_record cannot name the commit
        assert [p.split(":")[0] for p in problems] == ["code_revision"]
    else:
        assert problems == []


# ---------------------------------------------------------------------------------------------------------
# Staleness

def test_definitions_ignore_moves_imports_docstrings_and_comments():
    before = ('"""A module."""\nimport os\n\nN = 3  # three\n\n\ndef f(x):\n    """Doc."""\n'
              '    from course_lib import rl\n    return x + N\n')
    after = ('"""Another module\'s words."""\nfrom pathlib import Path\n\n\ndef f(x):\n    """Other words."""\n'
             '    from course_lib.core import rl  # moved\n\n    return x + N\n\n\nN = 3\n')
    assert schema.definitions(before) == schema.definitions(after) and set(schema.definitions(after)) == {"f", "N"}
    changed = schema.definitions(after.replace("x + N", "x - N"))
    assert changed["f"] != schema.definitions(before)["f"] and changed["N"] == schema.definitions(before)["N"]


def test_definitions_ignore_which_module_a_caller_names():
    """A function moved to another module, its callers changed to name the new one: no change."""
    before = "from course_lib.lm import evaluation\n\ndef g(t):\n    return evaluation.prompt_for(t, course_lib.x.K)\n"
    after = "from course_lib.lm import protocol\n\ndef g(t):\n    return protocol.prompt_for(t, course_lib.y.K)\n"
    is_module = lambda name: name.rsplit(".", 1)[-1] in ("evaluation", "protocol")  # noqa: E731
    assert schema.definitions(before, is_module) == schema.definitions(after, is_module)
    assert schema.definitions(before, is_module) != schema.definitions(before.replace("(t,", "(t + 1,"), is_module)


def test_dependencies_follow_course_lib_imports():
    deps = {p.relative_to(ROOT).as_posix() for p in schema.dependencies("benchmarks/smollm2_cpu_seeds.py")}
    assert "course_lib/__init__.py" in deps
    assert {p for p in deps if "/gru/" in p} == set(), "the language-model script does not import the GRU"
    assert len(deps) >= 10 and all(p.startswith("course_lib/") or p == "benchmarks/_common.py" for p in deps)


def test_dependencies_follow_the_benchmark_modules_a_script_imports():
    """A script's `from _common import ...` and its imports of another script are its code too (and what they
    import); schema.py, the record format and its review lists, is not."""
    deps = {p.relative_to(ROOT).as_posix() for p in schema.dependencies("benchmarks/smollm2_gpu_engines.py")}
    assert {"benchmarks/_common.py", "benchmarks/generation_throughput.py"} <= deps
    assert "benchmarks/schema.py" not in deps and "benchmarks/smollm2_gpu_engines.py" not in deps
    assert "course_lib/runs.py" in deps  # through _common.provenance's import


def test_a_file_the_command_names_is_part_of_the_code():
    """A study's config file, named in the record's command, changed since the record's commit: the record is
    stale (d3318b3 added the study files; a4f0f0c, its parent, had none)."""
    record = {"script": "benchmarks/gru_study.py", "code_revision": "a4f0f0c",
              "command": "python benchmarks/gru_study.py benchmarks/studies/teacher_ablation.toml --jobs 2"}
    assert schema.data_files(record) == ["benchmarks/studies/teacher_ablation.toml"]
    try:
        then = schema.changed_since(record)
        now = schema.changed_since(record | {"code_revision": "HEAD"})
    except schema.NoHistory as e:
        pytest.skip(f"no history here: {e}")
    assert "benchmarks/studies/teacher_ablation.toml::<file>" in then
    assert not [k for k in now if k.startswith("benchmarks/studies/")]


def _changed(record):
    try:
        return schema.changed_since(record)
    except schema.NoHistory as e:
        pytest.skip(f"no history here: {e}")


def test_a_function_added_to_a_helper_is_no_change_but_its_caller_is():
    """7e1fc25 added _common.reuse_or_clear and 9ebaa4b made ppo_from_copying_start's main call it: against
    d3318b3, the caller changed and the new helper alone is not reported."""
    changed = _changed({"script": "benchmarks/ppo_from_copying_start.py", "code_revision": "d3318b3",
                        "command": "python benchmarks/ppo_from_copying_start.py --seeds 0 1"})
    assert "benchmarks/ppo_from_copying_start.py::main" in changed
    assert not [k for k in changed if k.startswith("benchmarks/_common.py::reuse_or_clear")]


def test_a_script_new_since_the_revision_is_all_change():
    """gru_study.py did not exist at a4f0f0c: its functions are reported (the exemption is for helpers only)."""
    changed = _changed({"script": "benchmarks/gru_study.py", "code_revision": "a4f0f0c",
                        "command": "python benchmarks/gru_study.py benchmarks/studies/gru_methods.toml"})
    assert {"benchmarks/gru_study.py::run_one", "benchmarks/gru_study.py::main"} <= set(changed)


def test_a_try_of_imports_alone_is_an_import():
    both = "try:\n    from .x import y\nexcept ImportError:\n    from x import y\n"
    assert schema.definitions(both) == {}
    assert len(schema.definitions(both.replace("    from x import y", "    y = None"))) == 1  # it runs more
    assert len(schema.definitions(both + "else:\n    z = 1\n")) == 1


def _moved(tmp_path, now: dict[str, str], old: dict[str, str]) -> dict[str, str]:
    """staleness._changes for a record of benchmarks/script.py whose benchmarks/ files are `now` (written here)
    and were `old` at its revision (no course_lib)."""
    from benchmarks import staleness

    for rel, text in now.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    code = staleness._CodeAt("r" * 40, "benchmarks/script.py", [], [tmp_path / rel for rel in now], list(now), [], old)
    return staleness._changes(code, tmp_path)


def test_a_definition_moved_unchanged_out_of_the_script_is_no_change(tmp_path):
    f, g, main = "def f(x):\n    return x + 1\n", "def g():\n    return 2\n", "def main():\n    f(1)\n"
    common = "def main():\n    return 'common'\n"
    old = {"benchmarks/script.py": f + g + main, "benchmarks/_common.py": common}
    moved = {"benchmarks/script.py": main, "benchmarks/helper.py": f + g, "benchmarks/_common.py": common}
    assert _moved(tmp_path, moved, old) == {}
    edited = _moved(tmp_path / "edited", moved | {"benchmarks/helper.py": f.replace("+ 1", "+ 2") + g}, old)
    assert list(edited) == ["benchmarks/helper.py::f"]
    # a copy of a definition that is still where it was (_common's main) is not the script's, moved
    copied = _moved(tmp_path / "copied", moved | {"benchmarks/helper.py": f + g + common}, old)
    assert list(copied) == ["benchmarks/helper.py::main"]
    # text that names its own file means something else in another one
    where = "def here():\n    return __file__\n"
    tied = _moved(tmp_path / "tied", moved | {"benchmarks/helper.py": f + g + where},
                  old | {"benchmarks/script.py": f + g + main + where})
    assert list(tied) == ["benchmarks/helper.py::here"]
    # a script new since the revision is all change, whatever left the others
    renamed = _moved(tmp_path / "renamed", {"benchmarks/script.py": f + main, "benchmarks/_common.py": ""},
                     {"benchmarks/_common.py": f})
    assert set(renamed) == {"benchmarks/script.py::f", "benchmarks/script.py::main"}


def test_a_gone_script_or_named_file_makes_the_record_stale():
    assert _changed({"script": "benchmarks/nowhere.py", "code_revision": "a4f0f0c",
                     "command": "python benchmarks/nowhere.py"}) == {"benchmarks/nowhere.py::<file>": "deleted"}
    # explore_ablation.py existed at a4f0f0c and is gone: a command that names it depends on it
    changed = _changed({"script": "benchmarks/gru_study.py", "code_revision": "a4f0f0c",
                        "command": "python benchmarks/gru_study.py benchmarks/explore_ablation.py"})
    assert changed["benchmarks/explore_ablation.py::<file>"] == "deleted"


def test_a_run_folder_is_reused_only_if_made_at_this_commit(tmp_path, monkeypatch):
    from benchmarks import _common

    state = {"code_revision": "a" * 40, "uncommitted_changes": False}
    monkeypatch.setattr(_common, "code_state", lambda: dict(state))
    run = tmp_path / "variant" / "seed0"
    assert _common.reuse_or_clear(run) is False and (run / "made_at.json").is_file()  # a new run, marked
    (run / "eval.json").write_text("{}")
    (run / "checkpoints").mkdir()
    assert _common.reuse_or_clear(run) is True  # finished at this commit
    state["code_revision"] = "b" * 40
    assert _common.reuse_or_clear(run) is False  # made by other code: emptied, folders too, and marked anew
    assert sorted(p.name for p in run.iterdir()) == ["made_at.json"]
    (run / "eval.json").write_text("{}")
    assert _common.reuse_or_clear(run, {"updates": 2}) is False  # other settings: made again
    (run / "eval.json").write_text("{}")
    assert _common.reuse_or_clear(run, {"updates": 2}) is True
    made = json.loads((run / "made_at.json").read_text())
    (run / "made_at.json").write_text(json.dumps({**made, "torch": "0.0"}))  # another torch: made again
    assert _common.reuse_or_clear(run, {"updates": 2}) is False
    (run / "eval.json").write_text("{}")
    assert _common.reuse_or_clear(run, {"updates": 2}) is True
    monkeypatch.setattr(_common, "machine", lambda: "another processor")  # another machine: made again
    assert _common.reuse_or_clear(run, {"updates": 2}) is False
    (run / "eval.json").write_text("{}")
    assert _common.reuse_or_clear(run, {"updates": 2}) is True
    state["code_revision"] = None  # a copy without a commit: never reused
    assert _common.reuse_or_clear(run, {"updates": 2}) is False
    (run / "eval.json").write_text("{}")
    assert _common.reuse_or_clear(run, {"updates": 2}) is False
    state["code_revision"] = "b" * 40
    state["uncommitted_changes"] = True
    assert _common.reuse_or_clear(run) is False  # made with uncommitted code: marked so, but ...
    (run / "eval.json").write_text("{}")
    assert _common.reuse_or_clear(run) is False  # ... never reused, even by the same uncommitted code


def test_a_record_names_the_one_commit_its_runs_were_made_at(tmp_path, monkeypatch):
    from benchmarks import _common

    state = {"code_revision": "a" * 40, "uncommitted_changes": False}
    monkeypatch.setattr(_common, "code_state", lambda: dict(state))
    runs = {f"seed{n}": tmp_path / f"seed{n}" for n in (0, 1)}
    for run in runs.values():
        _common.reuse_or_clear(run)
    assert _common.made_by(runs) == state
    state["code_revision"] = "b" * 40  # a commit while they ran: seed 1 made by other code
    _common.reuse_or_clear(runs["seed1"])
    with pytest.raises(SystemExit, match="different code") as raised:
        _common.made_by(runs)
    assert "seed0" in str(raised.value) and "b" * 40 in str(raised.value)
    with pytest.raises(SystemExit, match="'code_revision': None"):  # unmarked
        _common.made_by({"seed2": tmp_path / "seed2"})


def test_a_commands_outputs_are_not_its_code():
    record = {"script": "benchmarks/x.py", "command": "python benchmarks/x.py benchmarks/studies/a.toml "
                                                      "--out benchmarks/records/x.json --notebook-data benchmarks/y.json"}
    assert schema.data_files(record) == ["benchmarks/studies/a.toml"]


WITH_REVISION = [n for n in NAMES if isinstance(_load(n).get("code_revision"), str)]


def test_records_with_a_revision_exist():
    assert VALID_EXAMPLE in WITH_REVISION


@pytest.mark.parametrize("name", WITH_REVISION)
def test_record_is_not_older_than_its_code(name):
    record = _load(name)
    try:
        unexplained = schema.unexplained_changes(name, record)
    except schema.NoHistory as e:
        pytest.skip(f"cannot check {name} against its commit {record['code_revision'][:12]}: {e}")
    assert not record.get("uncommitted_changes") or name in schema.STILL_VALID, (
        f"{name} was made with uncommitted changes in course_lib or benchmarks: its code is not {record['code_revision'][:12]}")
    assert not unexplained, (
        f"{name} was made at {record['code_revision'][:12]}; since then these definitions of its code changed "
        "(benchmarks/staleness.py says how it decides):\n  "
        + "\n  ".join(f"{k} (now {v})" for k, v in unexplained.items())
        + f"\nRemake it ({record['command']}), or read the changes (python benchmarks/schema.py --changed {name}) "
        "and, where the record still holds, list them in STILL_VALID (benchmarks/still_valid.py) with the reason")


def test_still_valid_lists_records_with_a_revision_and_a_reason():
    assert set(schema.STILL_VALID) <= set(WITH_REVISION)
    assert all(entry["reason"].strip() and entry["reviewed"] for entry in schema.STILL_VALID.values())


def test_timed_contenders_take_turns_and_the_fastest_try_is_kept():
    """benchmarks/_common.take_turns runs a, b, a, b (a slow moment hurts one try of one contender), and fastest
    keeps the try with the least seconds, listing every try's."""
    from benchmarks import _common

    order, seconds = [], iter([3.0, 1.0, 2.0, 4.0])

    def run(name):
        order.append(name)
        return {"seconds": next(seconds), "name": name}

    tries = _common.take_turns({"a": lambda: run("a"), "b": lambda: run("b")}, 2)
    assert order == ["a", "b", "a", "b"]
    assert _common.fastest(tries["a"]) == {"seconds": 2.0, "name": "a", "tries_s": [3.0, 2.0]}
    assert _common.fastest(tries["b"]) == {"seconds": 1.0, "name": "b", "tries_s": [1.0, 4.0]}


def test_a_course_lib_command_started_in_another_process_is_followed():
    """ppo_benchmark.py and ppo_from_copying_start.py start `python -m course_lib ppo`: its module is their code."""
    for script in ("benchmarks/ppo_benchmark.py", "benchmarks/ppo_from_copying_start.py"):
        files = [p.relative_to(ROOT).as_posix() for p in schema.dependencies(script)]
        assert "course_lib/cli/ppo_cli.py" in files and "course_lib/gru/ppo_run.py" in files, script
    assert "course_lib/cli/ppo_cli.py" not in [p.relative_to(ROOT).as_posix()
                                               for p in schema.dependencies("benchmarks/gru_study.py")]


def test_a_commands_paths_are_written_from_the_repository_root(monkeypatch, tmp_path):
    from benchmarks import _common

    monkeypatch.chdir(ROOT / "benchmarks")
    assert _common.command_args(["studies/explore_ablation.toml", "--out", "../runs/not_made_yet", "--seeds", "0",
                                 "--output", str(tmp_path / "x.json")]) == [
        "benchmarks/studies/explore_ablation.toml", "--out", "runs/not_made_yet", "--seeds", "0",
        "--output", str(tmp_path / "x.json")]  # an output outside the repository stays as given


def test_ppo_benchmark_writes_the_one_format(tmp_path, monkeypatch):
    """benchmarks/ppo_benchmark.py's record, its seeds' runs stood in for: it validates and names their commit."""
    from conftest import load_benchmark

    from benchmarks import _common

    bench = load_benchmark("ppo_benchmark")
    state = {"code_revision": "c" * 40, "uncommitted_changes": False}
    monkeypatch.setattr(_common, "code_state", lambda: dict(state))
    common = sys.modules["_common"]  # the script's own import of benchmarks/_common.py
    monkeypatch.setattr(common, "code_state", lambda: dict(state))
    rates = {f"{g}_pass_rate": 0.5 for g in ("train", "val", "val_near", "val_far", "test", "test_near", "test_far")}

    def run_seed(seed, out, extra):
        run = out / f"seed{seed}"
        common.reuse_or_clear(run, {"seed": seed, "ppo_options": extra})
        (run / "config.json").write_text(json.dumps({"seed": seed, "temperature": 1.5}))
        (run / "metrics.jsonl").write_text(json.dumps({"update": 0, "entropy": 1.0}) + "\n")
        row = {"id": "t", "split": "val", "novelty": "near", "greedy_passed": True, "greedy_completion": "x"}
        (run / "eval.json").write_text(json.dumps({"per_task": [row], "baseline": {"per_task": [row]}}))
        return {"seed": seed, "command_seconds": 10.0, "command_cpu_seconds": 12.0, "ppo_update_seconds": 5.0,
                "pretrain_seconds": 3.0, "ppo": rates, "pretrained": rates, "expert_iteration": {**rates, "wall_s": 5.0},
                "best_of_n": {"val_solved": 0.5, "wall_s": 5.0}, "load_average": 1.0}

    monkeypatch.setattr(bench, "run_seed", run_seed)
    record_path = tmp_path / "ppo_benchmark.json"
    bench.main(["--seeds", "0", "1", "--out", str(tmp_path / "runs"), "--notebook-data", str(record_path)])
    record = json.loads(record_path.read_text())
    assert schema.validate(record) == [] and record["code_revision"] == "c" * 40
    assert record["config"] == {"seeds": [0, 1], "temperature": 1.5} and [r["seed"] for r in record["runs"]] == [0, 1]
    assert record["summary"]["ppo.val_pass_rate"]["values"] == [0.5, 0.5] and record["seconds"] == 2 * 20.0
