"""Tests for the task set (tasks/*.toml) and its loaders (course_lib/tasks/).

Task code is never executed in this process: every program runs in its own
`python -I` subprocess (see `run_program`), in parallel, once per session.
"""

import json
import shutil
import statistics
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from course_lib.tasks import (NOVELTIES, SPLITS, Task, TaskFormatError, default_tasks_dir, edit_distance,
                              load_humaneval, load_mbpp_jsonl, load_task_file, load_tasks,
                              nearest_train_distances, split_groups)

FIXTURES = Path(__file__).parent / "fixtures"
MBPP_SAMPLE = FIXTURES / "mbpp_sample.jsonl"
WRONG = "    return None\n"
SEED000 = {"abs_value", "reverse_string", "factorial", "is_palindrome", "count_vowels", "fizzbuzz_str",
           "sum_list", "max_of_list", "is_even", "fibonacci", "gcd", "count_words", "to_upper"}
TASKS = load_tasks()

# -----------------------------------------------------------------------------
# running programs, out of process

# Runs the program once, then each test snippet in a fresh copy of its namespace,
# and prints one bool per snippet. Any exception (or no program) means False.
HARNESS = r"""
import json, sys
job = json.load(sys.stdin)
ns = {"__name__": "__task__"}
try:
    exec(compile(job["program"], "<program>", "exec"), ns)
    ok = True
except BaseException:
    ok = False
results = []
for test in job["tests"]:
    passed = False
    if ok:
        try:
            exec(compile(test, "<test>", "exec"), dict(ns))
            passed = True
        except BaseException:
            pass
    results.append(passed)
sys.stdout.write(json.dumps(results))
"""


def run_program(program: str, tests) -> list[bool]:
    """Pass/fail per test snippet, from a separate interpreter (10 s limit)."""
    try:
        out = subprocess.run([sys.executable, "-I", "-c", HARNESS], input=json.dumps(
            {"program": program, "tests": list(tests)}), capture_output=True, text=True, timeout=10)
        return json.loads(out.stdout)
    except (subprocess.TimeoutExpired, json.JSONDecodeError):
        return [False] * len(tests)


def run_many(jobs: dict) -> dict:
    """{key: (program, tests)} -> {key: [bool, ...]}, run concurrently."""
    with ThreadPoolExecutor(max_workers=8) as pool:
        futures = {k: pool.submit(run_program, prog, tests) for k, (prog, tests) in jobs.items()}
        return {k: f.result() for k, f in futures.items()}


@pytest.fixture(scope="module")
def results():
    jobs = {}
    for t in TASKS:
        jobs[t.id, "ref"] = (t.reference_program, t.tests)
        jobs[t.id, "wrong"] = (t.program(WRONG), t.tests)
    return run_many(jobs)


# -----------------------------------------------------------------------------
# the set as a whole

def test_set_size_and_splits():
    assert len(TASKS) >= 60
    by_split = {s: [t for t in TASKS if t.split == s] for s in SPLITS}
    assert len(by_split["train"]) >= 35
    for s in ("val", "test"):
        novelties = [t.novelty for t in by_split[s]]
        assert len(novelties) >= 12, s
        assert set(novelties) <= set(NOVELTIES), s  # every course val/test task is labelled
        assert novelties.count("far") >= 3, s
        assert novelties.count("near") > novelties.count("far"), s  # mostly near variants
    assert all(t.novelty is None for t in by_split["train"])


def test_families_have_train_tasks():
    families = {t.family for t in TASKS}
    assert 8 <= len(families) <= 10
    assert families == {t.family for t in TASKS if t.split == "train"}


def test_ids_unique_and_order_deterministic():
    ids = [t.id for t in TASKS]
    assert len(ids) == len(set(ids))
    assert [t.id for t in load_tasks()] == ids
    assert [t.split for t in TASKS] == sorted((t.split for t in TASKS), key=SPLITS.index)
    assert [t.id for t in load_tasks(["val", "test"])] == [t.id for t in TASKS if t.split != "train"]
    assert {t.split for t in load_tasks("val")} == {"val"}
    with pytest.raises(ValueError):
        load_tasks("dev")


def test_seed000_originals_present():
    seeds = {t.id for t in TASKS if t.origin == "seed000"}
    assert seeds == SEED000
    assert all(t.split == "train" for t in TASKS if t.id in SEED000)


def test_default_tasks_dir():
    assert default_tasks_dir() == Path(__file__).resolve().parents[1] / "tasks"


# -----------------------------------------------------------------------------
# each task

@pytest.mark.parametrize("task", TASKS, ids=lambda t: t.id)
def test_task_shape(task: Task):
    assert len(task.tests) >= 3
    for test in task.tests:  # one line each, calling the entry point
        assert "\n" not in test and test.startswith("assert ") and f"{task.entry_point}(" in test
    assert task.prompt.startswith(f"def {task.entry_point}(")
    assert task.prompt.endswith('"""\n') and task.prompt.count("\n") == 2  # signature + docstring
    assert (task.prompt + task.solution).isascii()  # a char-level policy writes these
    assert len(task.solution.splitlines()) <= 8
    assert task.reference_program == task.prompt + task.solution
    assert Path(task.source).name == f"{task.family}.toml"


@pytest.mark.parametrize("task", TASKS, ids=lambda t: t.id)
def test_reference_solution_passes(task, results):
    assert results[task.id, "ref"] == [True] * len(task.tests)


@pytest.mark.parametrize("task", TASKS, ids=lambda t: t.id)
def test_wrong_solution_fails(task, results):
    assert not all(results[task.id, "wrong"])


def test_harness_can_fail():
    assert run_program("def f():\n    return 1\n", ["assert f() == 1", "assert f() == 2", "1/0"]) == [
        True, False, False]
    assert run_program("def f(:\n", ["assert True"]) == [False]


# -----------------------------------------------------------------------------
# malformed task files

GOOD = '''family = "demo"

[[task]]
id = "inc"
split = "val"
novelty = "near"
entry_point = "inc"
prompt = """def inc(x):
    \\"\\"\\"Return x + 1.\\"\\"\\"
"""
solution = """    return x + 1
"""
tests = ["assert inc(1) == 2", "assert inc(0) == 1", "assert inc(-1) == 0"]
'''


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_good_template_loads(tmp_path):
    [task] = load_task_file(write(tmp_path, "demo.toml", GOOD))
    assert task.id == "inc" and task.family == "demo" and task.novelty == "near" and task.difficulty == 1


def test_tasks_load_from_a_folder_or_one_toml_file_and_a_missing_path_is_named(tmp_path):
    path = write(tmp_path, "demo.toml", GOOD)
    assert [t.id for t in load_tasks(tasks_dir=path)] == [t.id for t in load_tasks(tasks_dir=tmp_path)] == ["inc"]
    with pytest.raises(FileNotFoundError, match="nowhere does not exist: give a folder of TOML task files"):
        load_tasks(tasks_dir=tmp_path / "nowhere")
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match=r"no \*\.toml task files"):
        load_tasks(tasks_dir=tmp_path / "empty")


def test_novelty_is_optional_outside_the_course(tmp_path):
    """A held-out set written elsewhere need not label novelty: its results group by split alone."""
    [task] = load_task_file(write(tmp_path, "demo.toml", GOOD.replace('novelty = "near"\n', "")))
    assert task.split == "val" and task.novelty is None
    groups = split_groups([{"id": task.id, "split": task.split, "novelty": task.novelty}])
    assert list(groups) == ["val"]


@pytest.mark.parametrize("old, new, field", [
    ('entry_point = "inc"\n', "", "entry_point"),                      # missing field
    ('id = "inc"', 'id = 7', "id"),                                      # wrong type
    ('tests = [', 'tests = "assert inc(1) == 2" #', "tests"),          # wrong type
    ('"assert inc(0) == 1"', '3', "tests"),                             # non-string test
    ('"assert inc(0) == 1"', '"assert (inc(0) == 1, 1)"', "tests"),     # always-true assert warns
    ('split = "val"', 'split = "dev"', "split"),                        # bad split
    ('split = "val"', 'split = "train"', "novelty"),                   # train must not have it
    ('novelty = "near"', 'novelty = "close"', "novelty"),
    ('entry_point = "inc"', 'entry_point = "dec"', "entry_point"),     # not defined in prompt
    ('id = "inc"', 'id = "inc"\ndifficulty = 9', "difficulty"),
    ('id = "inc"', 'id = "inc"\nlevel = 2', "level"),                  # unknown field (typo)
    ('    return x + 1', '    return x +', "solution"),                # does not compile
    ('family = "demo"', 'family = 3', "family"),
])
def test_malformed_file_names_file_and_field(tmp_path, old, new, field):
    assert old in GOOD
    path = write(tmp_path, "broken.toml", GOOD.replace(old, new, 1))
    with pytest.raises(TaskFormatError) as err:
        load_task_file(path)
    assert "broken.toml" in str(err.value) and field in str(err.value)


def test_invalid_toml(tmp_path):
    with pytest.raises(TaskFormatError, match="broken.toml"):
        load_task_file(write(tmp_path, "broken.toml", GOOD + "\n[[task]\n"))


def test_duplicate_id_within_and_across_files(tmp_path):
    with pytest.raises(TaskFormatError, match=r"twice\.toml.*'id'.*duplicate"):
        load_task_file(write(tmp_path, "twice.toml", GOOD + GOOD.split("\n", 1)[1]))
    other = tmp_path / "other"
    other.mkdir()
    write(other, "a.toml", GOOD)
    write(other, "b.toml", GOOD.replace('"demo"', '"demo2"'))
    with pytest.raises(TaskFormatError, match=r"b\.toml.*'id'.*a\.toml"):
        load_tasks(tasks_dir=other)


def test_one_bad_file_fails_the_whole_load(tmp_path):
    shutil.copy(default_tasks_dir() / "arithmetic.toml", tmp_path)
    assert len(load_tasks(tasks_dir=tmp_path)) > 0
    write(tmp_path, "zz_broken.toml", GOOD.replace('split = "val"', 'split = "dev"'))
    with pytest.raises(TaskFormatError, match="zz_broken.toml"):
        load_tasks(tasks_dir=tmp_path)
    with pytest.raises(FileNotFoundError):
        load_tasks(tasks_dir=tmp_path / "nope")


# -----------------------------------------------------------------------------
# HumanEval and MBPP

def test_humaneval_split():
    tasks = load_humaneval()
    test, train = load_humaneval("test"), load_humaneval("train")
    assert len(tasks) == 164 and len(test) == 33 and len(train) == 131
    assert {t.id for t in test} == {f"HumanEval/{i}" for i in range(0, 164, 5)}
    assert {t.id for t in test} | {t.id for t in train} == {t.id for t in tasks}
    for t in tasks:
        assert t.family == "humaneval" and len(t.tests) == 1
        assert f"check({t.entry_point})" in t.tests[0] and "def check(" in t.tests[0]


def test_humaneval_canonical_solutions_pass():
    tasks = {t.id: t for t in load_humaneval()}
    picked = [tasks[f"HumanEval/{i}"] for i in (0, 2, 23, 53, 163)]
    out = run_many({t.id: (t.reference_program, t.tests) for t in picked}
                   | {(t.id, "wrong"): (t.program(WRONG), t.tests) for t in picked})
    for t in picked:
        assert out[t.id] == [True], t.id
        assert out[t.id, "wrong"] == [False], t.id


def test_mbpp_fixture_loads_and_passes():
    tasks = load_mbpp_jsonl(MBPP_SAMPLE)
    assert [t.entry_point for t in tasks] == ["count_z", "mean_square", "bump"]
    assert all(t.split == "test" and t.family == "mbpp" and len(t.tests) == 3 for t in tasks)
    assert all('"""Write a function' in t.prompt for t in tasks)
    out = run_many({t.id: (t.reference_program, t.tests) for t in tasks}
                   | {(t.id, "wrong"): (t.program(WRONG), t.tests) for t in tasks})
    for t in tasks:
        assert out[t.id] == [True, True, True], t.id
        assert not all(out[t.id, "wrong"]), t.id
    assert load_mbpp_jsonl(MBPP_SAMPLE, split="train")[0].split == "train"


def test_mbpp_field_map_and_errors(tmp_path):
    row = json.loads(MBPP_SAMPLE.read_text().splitlines()[0])
    row["prompt"] = row.pop("text")
    path = write(tmp_path, "renamed.jsonl", json.dumps(row) + "\n")
    assert load_mbpp_jsonl(path, field_map={"text": "prompt"})[0].entry_point == "count_z"
    with pytest.raises(TaskFormatError, match=r"renamed\.jsonl:1.*'text'"):
        load_mbpp_jsonl(path)
    bad = write(tmp_path, "bad.jsonl", MBPP_SAMPLE.read_text() + "{not json\n")
    with pytest.raises(TaskFormatError, match=r"bad\.jsonl:4"):
        load_mbpp_jsonl(bad)
    row["test_list"] = ["assert other(1) == 2"]
    path = write(tmp_path, "nocall.jsonl", json.dumps(row) + "\n")
    with pytest.raises(TaskFormatError, match=r"nocall\.jsonl:1.*test_list"):
        load_mbpp_jsonl(path, field_map={"text": "prompt"})


# -----------------------------------------------------------------------------
# distances

def test_edit_distance():
    assert edit_distance("", "") == 0
    assert edit_distance("abc", "") == 3
    assert edit_distance("kitten", "sitting") == 3
    assert edit_distance("x * 2", "x * 5") == 1
    assert edit_distance("flaw", "lawn") == edit_distance("lawn", "flaw") == 2


def test_nearest_train_distances():
    rows = nearest_train_distances(TASKS)
    held_out = [t for t in TASKS if t.split != "train"]
    assert [r["id"] for r in rows] == [t.id for t in held_out]
    train_ids = {t.id for t in TASKS if t.split == "train"}
    for r in rows:
        assert 0 < r["distance"] <= 1, r
        assert r["nearest_train_id"] in train_ids
    train_solutions = {t.solution for t in TASKS if t.split == "train"}
    assert not any(t.solution in train_solutions for t in held_out)
    # the labels should agree with the text: near variants are closer than far ones
    mean = {n: statistics.mean(r["distance"] for r in rows if r["novelty"] == n) for n in ("near", "far")}
    assert mean["near"] < mean["far"]
