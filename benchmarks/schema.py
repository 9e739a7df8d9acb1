"""The one record format: the fields every benchmark record carries, and a check of them (whether a record is
older than a change to the code it was made with is benchmarks/staleness.py's check).

A *record* is a JSON file under notebooks/data/ that a chapter or a Results page
reads (every ``*.json`` there, in subfolders too, except PEFT's ``adapter_config.json`` files, which are
adapter weights' settings, not records). A record written today starts from
``benchmarks/_common.new_record``, which writes the header fields below in this order; the script adds the
rows and the summary:

    schema_version        SCHEMA_VERSION, the version of this format
    script                the script that wrote it, relative to the repository root (benchmarks/NAME.py)
    command               the command that remakes it
    code_revision         the git commit it was made at (40 hex digits)
    uncommitted_changes   whether course_lib/ had uncommitted changes then (true: its code was not that commit's)
    date                  the day it was made (YYYY-MM-DD)
    machine               the processor (and GPU) it ran on
    device                torch's device: cpu, cuda, cuda:0, ...
    cpu_capability        torch's CPU kernels (torch.backends.cpu.get_cpu_capability(): AVX512, AVX2, ...)
    threads               torch's threads
    versions              library versions: python and torch at least (transformers, peft where installed)
    config                the settings its runs used
    seconds               the wall time it took, in seconds
    runs                  its rows: one per seed (or per setting measured), each a dict
    summary               what the rows add up to (a dict)

and, where it started from committed checkpoint files, ``pretrained_sha256`` (their SHA-256 by
``course_lib.runs.file_sha256``, with ``pretrained``, a path, or ``start``, a list of paths, naming them).

``validate(record)`` lists what is wrong with a record (nothing: it is valid). Records made before this
format are listed in LEGACY with what they lack. benchmarks/experiments.toml gives every record's command (the one
that remakes it), device and pages; tests/test_record_schema.py checks that every record validates or is listed,
that every listed file exists, and that experiments.toml lists every record with its own command.

Staleness (whether a record is older than a change to the code it was made with) is benchmarks/staleness.py,
and the reviews of records whose code changed but which still hold are benchmarks/still_valid.py; this module
gives their names too.

    python benchmarks/schema.py                     each record: valid, LEGACY, or what is wrong with it
    python benchmarks/schema.py --changed RECORD    what changed in a record's code since its code_revision
"""

from __future__ import annotations

import datetime
import re
from pathlib import Path

try:  # imported as benchmarks.schema, or from benchmarks/ (a script, python benchmarks/schema.py)
    from .staleness import (COMMANDS, NOT_CODE, OUTPUT_OPTIONS, STILL_VALID, NoHistory, changed_since, data_files,
                            definitions, dependencies, show_changes, unexplained_changes)
except ImportError:
    from staleness import (COMMANDS, NOT_CODE, OUTPUT_OPTIONS, STILL_VALID, NoHistory, changed_since, data_files,
                           definitions, dependencies, show_changes, unexplained_changes)

__all__ = ["COMMANDS", "NOT_CODE", "OUTPUT_OPTIONS", "STILL_VALID", "NoHistory", "changed_since", "data_files", "definitions",
           "dependencies", "unexplained_changes"]  # the staleness check's names, as this module gives them too

ROOT = Path(__file__).resolve().parents[1]
SCHEMA_VERSION = 1

# name -> what it is; new_record (benchmarks/_common.py) writes HEADER_FIELDS, in this order, and nothing else
HEADER = {
    "schema_version": "the version of this format (SCHEMA_VERSION)",
    "script": "the script that wrote it, relative to the repository root (benchmarks/NAME.py)",
    "command": "the command that remakes it",
    "code_revision": "the git commit it was made at (40 hex digits)",
    "uncommitted_changes": "whether course_lib/ or benchmarks/ had uncommitted changes when it was made",
    "date": "the day it was made (YYYY-MM-DD)",
    "machine": "the processor (and GPU) it ran on",
    "device": "torch's device (cpu, cuda, cuda:0, ...)",
    "cpu_capability": "torch's CPU kernels (AVX512, AVX2, ...)",
    "threads": "torch's threads",
    "versions": "library versions: python and torch at least",
    "config": "the settings its runs used",
    "seconds": "the wall time it took, in seconds",
}
BODY = {
    "runs": "its rows, one per seed (or per setting measured), each a dict",
    "summary": "what the rows add up to (a dict)",
}
HEADER_FIELDS = tuple(HEADER)
REQUIRED_FIELDS = HEADER_FIELDS + tuple(BODY)

_HEX40, _HEX64 = re.compile(r"[0-9a-f]{40}"), re.compile(r"[0-9a-f]{64}")


def _text(v):
    return None if isinstance(v, str) and v.strip() else "expected a non-empty string"


def _check_script(v):
    if not isinstance(v, str) or not re.fullmatch(r"benchmarks/[\w-]+\.py", v):
        return "expected the script's path from the repository root, benchmarks/NAME.py"
    return None if (ROOT / v).is_file() else f"{v} does not exist"


def _check_date(v):
    try:
        datetime.date.fromisoformat(v)
    except (TypeError, ValueError):
        return "expected a date YYYY-MM-DD"
    return None


def _check_versions(v):
    if not isinstance(v, dict):
        return "expected a dict of library -> version"
    missing = [k for k in ("python", "torch") if not isinstance(v.get(k), str)]
    return f"no version of {', '.join(missing)}" if missing else None


def _check_runs(v):
    if not isinstance(v, list) or not v:
        return "expected a non-empty list of rows"
    return None if all(isinstance(r, dict) for r in v) else "expected every row to be a dict"


_CHECKS = {
    "schema_version": lambda v: None if v == SCHEMA_VERSION else f"expected {SCHEMA_VERSION}",
    "script": _check_script,
    "command": _text,
    "code_revision": lambda v: (None if isinstance(v, str) and _HEX40.fullmatch(v)
                                else "expected a git commit (40 hex digits)"),
    "uncommitted_changes": lambda v: None if isinstance(v, bool) else "expected true or false",
    "date": _check_date,
    "machine": _text,
    "device": _text,
    "cpu_capability": _text,
    "threads": lambda v: (None if isinstance(v, int) and not isinstance(v, bool) and v > 0
                          else "expected a positive whole number"),
    "versions": _check_versions,
    "config": lambda v: None if isinstance(v, dict) and v else "expected a non-empty dict",
    "seconds": lambda v: (None if isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0
                          else "expected a number of seconds >= 0"),
    "runs": _check_runs,
    "summary": lambda v: None if isinstance(v, dict) and v else "expected a non-empty dict",
}
assert tuple(_CHECKS) == REQUIRED_FIELDS


def validate(record: dict) -> list[str]:
    """What is wrong with `record`, one line per problem, each naming the field; [] when it is valid."""
    if not isinstance(record, dict):
        return [f"record: expected a JSON object, got {type(record).__name__}"]
    problems = []
    for name in REQUIRED_FIELDS:
        if name not in record:
            problems.append(f"{name}: missing ({(HEADER | BODY)[name]})")
        elif (problem := _CHECKS[name](record[name])) is not None:
            problems.append(f"{name}: {problem}, got {record[name]!r:.80}")
    if "pretrained_sha256" in record:
        if not (isinstance(record["pretrained_sha256"], str) and _HEX64.fullmatch(record["pretrained_sha256"])):
            problems.append("pretrained_sha256: expected a SHA-256 (64 hex digits)")
        if not (isinstance(record.get("pretrained"), str) or isinstance(record.get("start"), list)):
            problems.append("pretrained_sha256: no `pretrained` (a path) or `start` (a list of paths) names its files")
    return problems


RECORD_DIR = "notebooks/data"  # the one records folder: the chapters', the Results pages' and the benchmarks'
EXPERIMENTS = "benchmarks/experiments.toml"  # every record's command, device and pages
NOT_RECORDS = ("adapter_config.json",)  # PEFT's settings beside saved adapter weights


def record_files(root: Path = ROOT) -> list[Path]:
    """Every record: each *.json under RECORD_DIR (subfolders too) but NOT_RECORDS."""
    return sorted(p for p in (root / RECORD_DIR).rglob("*.json") if p.name not in NOT_RECORDS)


# Records made before this format, which do not validate (validate() says which fields each lacks): path ->
# what kind of record it is and what it keeps under other names (its command in experiments.toml remakes it, in
# this format once its script writes it with new_record). None names the commit it was made at, so none can be checked for
# staleness: each is as valid as its own checks make it (the SHA-256 of the checkpoint it started from where it
# has one, which tests/test_records.py checks against the committed checkpoint).
_NO_REVISION = "no code_revision, date or versions (made before new_record)"
_SMOLLM2_CPU = (f"{_NO_REVISION}; has script, machine, python and torch_threads; no device (the CPU); settings as "
                "rl/greedy/sampled/lora, wall time as wall_seconds; runs but no summary. Its script is the one that "
                "made it: benchmarks/smollm2_rl.py, or a wrapper of it (smollm2_methods.py, trl_grpo.py, "
                "smollm2_teacher_grpo.py, smollm2_humaneval_rl.py) that a study file in benchmarks/studies/lm/ has "
                "replaced (its command in experiments.toml remakes the record in this format)")
_VARIANTS_GPU = ("made on a GPU by benchmarks/variants_pretraining.py (its docstring gives the options): no header at "
                 f"all, {_NO_REVISION}, no script, machine or wall time; settings.device says cuda")
LEGACY = {
    # chapters 4-8: the GRU
    "notebooks/data/variants_gpu/same_data_seed0.json": _VARIANTS_GPU,
    **{f"notebooks/data/variants_gpu/two_digit_seed{n}.json": _VARIANTS_GPU for n in (0, 1, 2)},
    "notebooks/data/gru_ppo_cuda.json":
        "made by hand on a GPU from the commands it lists (python -m course_lib ppo ... --device cuda, resumed "
        "across devices), no script: no schema_version, code_revision, date, device, config or wall time; has "
        "machine and versions; rows as commands/eval/curves; tests/test_gpu_records.py reads it",
    # chapters 9-11: the language models
    "notebooks/data/smollm2_rl.json": _SMOLLM2_CPU,
    "notebooks/data/trl_grpo.json": _SMOLLM2_CPU,
    "notebooks/data/smollm2_teacher_grpo.json": _SMOLLM2_CPU,
    "notebooks/data/smollm2_humaneval_rl.json": _SMOLLM2_CPU,
    "notebooks/data/smollm2_humaneval_problems.json":
        f"{_NO_REVISION}; has script, machine and torch_threads; no device, no wall time; runs (the seeds of "
        "smollm2_humaneval_rl.json re-run, per HumanEval test problem) but no summary",
    "notebooks/data/smollm2_rl_humaneval.json":
        f"{_NO_REVISION}; has script, machine and torch_threads; no device, no wall time; runs (the seeds of "
        "smollm2_rl.json re-run, per HumanEval test problem) but no summary",
    "notebooks/data/smollm2_gpu_long.json":
        "no schema_version, code_revision or date; has script, machine and device; versions as top-level "
        "python/torch/transformers, wall time as wall_seconds; runs but no summary",
    "notebooks/data/smollm2_gpu_seeds.json":
        "no schema_version, code_revision or date; has script, machine and device; versions as top-level "
        "python/torch/transformers; no wall time; rows as per_seed (a dict), no runs or summary (the script now "
        "writes this format, its per-seed records naming their commit)",
    "notebooks/data/smollm2_gpu_seeds_fast.json":
        "the format of smollm2_gpu_seeds.json (made at commit 888e48b, which its log names; the date is in its "
        "per-seed wall times' log, 2026-11-28); its rl settings name the engine that sampled the rollouts (fast)",
    # the batch's kernel client: checks of the book's tooling, not training records
    "notebooks/data/widget_stress-plain-stock-capturing.json":
        f"a count of plain papermill runs of chapter 6 as committed in ec82eb7 (notebook_source says how to get "
        f"it): {_NO_REVISION} (versions as packages, no torch), no script or device; has command and machine; "
        "rows as chapters",
}


def experiments(root: Path = ROOT) -> dict[str, dict]:
    """benchmarks/experiments.toml: record path -> its entry (command, device, batch_before, by_hand, pages)."""
    from book_tools.reproduce import experiments as entries  # the one reader of the file, the batch's

    return {r["path"]: r for r in entries(root / EXPERIMENTS)}


def main() -> None:
    import argparse
    import json

    parser = argparse.ArgumentParser(description="Check every record against the schema (and its code's changes).")
    parser.add_argument("--changed", metavar="RECORD", help="show what changed in a record's code since it was made")
    args = parser.parse_args()
    if args.changed:
        show_changes(args.changed)
        return
    for file in record_files():
        rel = file.relative_to(ROOT).as_posix()
        problems = validate(json.loads(file.read_text()))
        print(f"{rel}: {'valid' if not problems else 'LEGACY' if rel in LEGACY else 'INVALID'}")
        for problem in problems if rel not in LEGACY else []:
            print(f"    {problem}")


if __name__ == "__main__":
    main()
