"""APPS problems from a local file: function-call ones become Tasks whose reference passes; the rest are skipped."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from course_lib.lm.evaluation import run_completions
from course_lib.tasks import TaskFormatError, apps_record_to_mbpp, load_apps_jsonl

FIXTURE = Path(__file__).parent / "fixtures" / "apps_sample.jsonl"


def records() -> list[dict]:
    return [json.loads(line) for line in FIXTURE.read_text().splitlines()]


def write(tmp_path, rows, name="apps.jsonl") -> Path:
    path = tmp_path / name
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_fixture_loads_function_call_problems_only():
    tasks = load_apps_jsonl(FIXTURE, split="val")
    assert [t.id for t in tasks] == ["apps/4001", "apps/4002", "apps/4005"]  # stdin (4003) and class-based (4004) skipped
    assert [t.entry_point for t in tasks] == ["sum_even", "min_max", "is_pal"]
    assert [t.difficulty for t in tasks] == [1, 2, 3]
    assert all(t.family == "apps" and t.split == "val" for t in tasks)
    assert "sum of its even numbers" in tasks[0].prompt and tasks[0].prompt.rstrip().endswith('"""')
    assert len(tasks[0].tests) == 3  # one test per (inputs, output) pair


def test_references_pass_and_wrong_answers_fail():
    tasks = load_apps_jsonl(FIXTURE)
    assert run_completions(tasks, [t.solution for t in tasks]) == [True] * len(tasks)
    assert run_completions(tasks, ["    return None\n"] * len(tasks)) == [False] * len(tasks)


def test_difficulty_filter():
    assert [t.id for t in load_apps_jsonl(FIXTURE, difficulties=["introductory"])] == ["apps/4001"]
    with pytest.raises(ValueError, match="unknown APPS difficulties"):
        load_apps_jsonl(FIXTURE, difficulties=["easy"])


def test_unsupported_problems_raise_when_asked():
    with pytest.raises(TaskFormatError, match="standard-input problem"):
        load_apps_jsonl(FIXTURE, skip_unsupported=False)
    assert apps_record_to_mbpp(records()[3], "x")[1] == "class-based (LeetCode) problem"


def test_fn_name_as_its_own_field(tmp_path):
    row = records()[0]
    io = json.loads(row["input_output"])
    row["fn_name"] = io.pop("fn_name")
    row["input_output"] = json.dumps(io)
    assert [t.entry_point for t in load_apps_jsonl(write(tmp_path, [row]))] == ["sum_even"]


@pytest.mark.parametrize("change, words", [
    (lambda r: r.pop("question"), "field 'question': missing"),
    (lambda r: r.update(input_output="{not json"), "field 'input_output': not valid JSON"),
    (lambda r: r.update(input_output=json.dumps({"fn_name": "sum_even", "inputs": [[1]], "outputs": []})),
     "as many outputs as inputs"),
    (lambda r: r.update(input_output=json.dumps({"fn_name": "sum_even", "inputs": [1], "outputs": [1]})),
     "must be a list of arguments"),
    (lambda r: r.update(solutions=json.dumps([1, 2])), "list of program strings"),
    (lambda r: r.update(input_output=json.dumps({"fn_name": "not a name", "inputs": [[1]], "outputs": [1]})),
     "expected a Python name"),
])
def test_bad_records_name_the_line_and_field(tmp_path, change, words):
    row = records()[0]
    change(row)
    with pytest.raises(TaskFormatError, match=words) as e:
        load_apps_jsonl(write(tmp_path, [records()[1], row]))
    assert "apps.jsonl:2" in str(e.value)


def test_no_usable_problem_and_no_file(tmp_path):
    with pytest.raises(TaskFormatError, match="no function-call APPS problem"):
        load_apps_jsonl(write(tmp_path, [records()[2]]))
    row = records()[0]
    row["solutions"] = json.dumps(["def other(xs):\n    return 0\n"])
    with pytest.raises(TaskFormatError, match="no function-call"):
        load_apps_jsonl(write(tmp_path, [row]))
    assert "no solution defines `def sum_even`" in apps_record_to_mbpp(row, "x")[1]
    with pytest.raises(FileNotFoundError):
        load_apps_jsonl(tmp_path / "missing.jsonl")
    with pytest.raises(ValueError, match="unknown split"):
        load_apps_jsonl(FIXTURE, split="dev")


def test_parquet_like_records_with_lists(tmp_path):
    """On the hub APPS is Parquet; a reader may also hand over solutions/input_output already decoded."""
    row = records()[1]
    row["solutions"] = json.loads(row["solutions"])
    row["input_output"] = json.loads(row["input_output"])
    tasks = load_apps_jsonl(write(tmp_path, [row]))
    assert run_completions(tasks, [t.solution for t in tasks]) == [True]
