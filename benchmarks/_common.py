"""What the benchmark scripts share: summary statistics over seeds, and writing their JSON files."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import statistics
from pathlib import Path
from typing import Callable, Sequence

if __package__:  # imported as benchmarks._common
    from .schema import HEADER_FIELDS, NOT_CODE, OUTPUT_OPTIONS, RECORD_DIR, SCHEMA_VERSION
else:  # a script's `from _common import ...`, with benchmarks/ on sys.path
    from schema import HEADER_FIELDS, NOT_CODE, OUTPUT_OPTIONS, RECORD_DIR, SCHEMA_VERSION


def stats(values) -> dict:
    """Mean, sample standard deviation and the values themselves (None values are left out)."""
    values = [v for v in values if v is not None]
    return {"mean": round(statistics.mean(values), 4),
            "std": round(statistics.stdev(values), 4) if len(values) > 1 else 0.0, "values": values}


# A record keeps the names it was written with (records are never edited): the GRU's studies call greedy pass@1
# "{group}_pass_rate" and a task's greedy result passed, fraction, status and completion, the names of the GRU's
# evaluator before both policies scored through `course_lib.scoring`. A rerun writes the same names, so the
# chapters and the Results pages read old and new records alike.
_GRU_RECORD_ROW = {"greedy_passed": "passed", "greedy_fraction": "fraction", "greedy_status": "status",
                   "greedy_completion": "completion"}


def gru_record_rates(result: dict) -> dict:
    """{"{group}_pass_rate": greedy pass@1} of a GRU evaluation (`course_lib.scoring`'s "{group}_greedy_pass@1")."""
    return {k.removesuffix("_greedy_pass@1") + "_pass_rate": v for k, v in result.items()
            if k.endswith("_greedy_pass@1")}


def gru_record_row(row: dict) -> dict:
    """A per-task row of a GRU evaluation with its greedy fields named as the records name them."""
    return {_GRU_RECORD_ROW.get(k, k): v for k, v in row.items()}


def take_turns(contenders: dict[str, Callable[[], dict]], tries: int) -> dict[str, list[dict]]:
    """Each contender's result, `tries` times, the contenders taking turns (a, b, c, a, b, c, ...): a slow
    moment of the machine (another process's load) then slows one try of one contender, not every try of it."""
    runs: dict[str, list[dict]] = {name: [] for name in contenders}
    for _ in range(tries):
        for name, run in contenders.items():
            runs[name].append(run())
    return runs


def fastest(runs: list[dict], key: str = "seconds") -> dict:
    """The try with the least `key`, with every try's `key` added as tries_s."""
    return min(runs, key=lambda run: run[key]) | {"tries_s": [run[key] for run in runs]}


def write_json(path: Path, data) -> None:
    """`data` as indented JSON with a final newline, creating the folder if needed."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1) + "\n")


@contextlib.contextmanager
def locked(path: Path):
    """Hold an exclusive lock on the folder of `path` for a read-modify-write of it, so processes that
    update one record at the same time take turns instead of losing a write."""
    folder = os.open(Path(path).parent, os.O_RDONLY)
    try:
        fcntl.flock(folder, fcntl.LOCK_EX)
        yield
    finally:
        os.close(folder)  # closing the descriptor releases the lock


def machine(device="cpu") -> str:
    """The machine a record was made on, as every record names it: the processor and its cores, and before
    them the GPU (with torch's version and CUDA's) where `device` is one."""
    from book_tools.reproduce import cpu_model

    cpu = f"cpu ({cpu_model() or 'unknown CPU'}), {os.cpu_count()} cores"
    if str(device).startswith("cuda"):
        import torch

        return f"{torch.cuda.get_device_name(device)} (torch {torch.__version__}, CUDA {torch.version.cuda}); {cpu}"
    return cpu


def provenance(pretrained) -> dict:
    """What a record was made from and on: the start checkpoint's SHA-256 (a file, or a list of files;
    chapters check it against what they load) and the machine (CPU numbers depend on the processor)."""
    from course_lib.runs import file_sha256

    return {"pretrained_sha256": file_sha256(pretrained), "machine": machine()}


# benchmarks/ files that are not code a run computes with: the record format, its staleness check and the reviews
# (NOT_CODE), and the list of records (an uncommitted change to them leaves a run's code its commit's)
NOT_CODE_FILES = tuple(f":(exclude)benchmarks/{name}" for name in (*(f"{m}.py" for m in NOT_CODE), "experiments.toml"))


def code_state() -> dict:
    """The code a run starts from: {"code_revision": the commit, "uncommitted_changes": whether course_lib/ or
    benchmarks/ (its scripts and studies; not schema.py or experiments.toml, the format and the list) differed
    from it}. COURSE_CODE_REVISION names the commit where the tree is a copy whose .git is absent or stale (a GPU
    machine's copy); its code is then that commit's."""
    import subprocess

    def git(*args):
        try:
            return subprocess.run(["git", *args], cwd=Path(__file__).resolve().parents[1], capture_output=True,
                                  text=True, check=True).stdout.strip()
        except (OSError, subprocess.CalledProcessError):
            return None

    named = os.environ.get("COURSE_CODE_REVISION")
    changed = (git("status", "--porcelain", "--", "course_lib", "benchmarks", *NOT_CODE_FILES) or "").splitlines()
    # an untracked file counts where it is code or a study (not an output a script left in benchmarks/)
    changed = [line for line in changed if not line.startswith("??") or line.endswith((".py", ".toml"))]
    return {"code_revision": named or git("rev-parse", "HEAD"), "uncommitted_changes": not named and bool(changed)}


def where_made() -> dict:
    """What a CPU run made now is made by: the code (code_state()), the machine (the processor decides the last
    digits of every sum) and torch's version."""
    import torch

    return {**code_state(), "machine": machine(), "torch": torch.__version__}


def made_here_by_this_code(made: dict, now: dict | None = None) -> bool:
    """The one rule for reusing a finished CPU run or extending a CPU record: whether `made` (a run's made_at.json,
    as where_made() wrote it, or a record, whose torch is under versions) was made by this code (the same commit,
    nothing uncommitted then or now), on this machine, with this torch. now: where_made(), if the caller has it.
    Where the code has no commit (a copy without .git and no COURSE_CODE_REVISION) nothing is reused; where
    COURSE_CODE_REVISION names the commit, the copy is trusted to hold that commit's code."""
    now = now or where_made()
    torch_version = made["torch"] if "torch" in made else (made.get("versions") or {}).get("torch")
    return (isinstance(now["code_revision"], str) and not now["uncommitted_changes"]
            and made.get("uncommitted_changes") is False and made.get("code_revision") == now["code_revision"]
            and made.get("machine") == now["machine"] and torch_version == now["torch"])


def reuse_or_clear(run_dir: Path, settings: dict | None = None) -> bool:
    """Whether the finished run in `run_dir` (its eval.json) may be reused: only one made here by this code
    (made_here_by_this_code) with the same `settings` (what the caller runs it with, as JSON), as its made_at.json
    says. Otherwise the folder is emptied (an unfinished run, or one made by other code, on another machine, with
    other settings or before made_at.json named all of these) and made_at.json written for the run the caller now
    makes, so that a record never names a commit or settings its runs were not made with."""
    import shutil

    now = {**where_made(), "settings": json.loads(json.dumps(settings))}
    marked = run_dir / "made_at.json"  # the code, machine, torch and settings the run was started with
    if (run_dir / "eval.json").is_file() and marked.is_file():
        made = json.loads(marked.read_text())
        if made_here_by_this_code(made, now) and made.get("settings") == now["settings"]:
            return True
        differ = ", ".join(k for k, v in now.items() if made.get(k) != v)
        print(f"making {run_dir} again: its finished run differs in "
              f"{differ or 'nothing, but the code now has uncommitted changes or no commit'}")
    if run_dir.exists():
        shutil.rmtree(run_dir)
    run_dir.mkdir(parents=True)
    marked.write_text(json.dumps(now) + "\n")
    return False


def record_path(name: str) -> Path:
    """Where the record NAME lives: NAME.json in the one records folder (schema.RECORD_DIR)."""
    return Path(__file__).resolve().parents[1] / RECORD_DIR / f"{name}.json"


def made_by(run_dirs: dict[str, Path]) -> dict:
    """The code every run was made by ({"code_revision", "uncommitted_changes"}, from the made_at.json that
    reuse_or_clear wrote in each of `run_dirs`, {label: folder}): one, or an error naming the runs that differ
    (a commit made while they ran) or are unmarked."""
    states = {}
    for label, run_dir in run_dirs.items():
        marked = run_dir / "made_at.json"
        state = json.loads(marked.read_text()) if marked.is_file() else {}
        states[label] = {k: state.get(k) for k in ("code_revision", "uncommitted_changes")}
    distinct = {json.dumps(state, sort_keys=True) for state in states.values()}
    if len(distinct) != 1 or None in next(iter(states.values())).values():
        raise SystemExit(f"the runs were made by different code or are unmarked: {states}; run the command again "
                         "(with nothing committed meanwhile): it remakes the runs not made by this code")
    return next(iter(states.values()))


def read_study_file(path: Path, keys: dict[str, type], examples: str) -> tuple[dict, list[str]]:
    """A study's config file (TOML: benchmarks/studies/) and what is wrong with the part every study shares: a key
    missing, of the wrong type (keys: name -> type) or unknown, a name that is not the file's own (the record is
    NAME.json), seeds that are not a non-empty list of whole numbers. A file that cannot be read stops here, its
    error named with `examples`, the folder of good ones."""
    import tomllib

    try:
        study = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise SystemExit(f"{path}: cannot read the study ({e}); see {examples} for examples")
    wrong = [f"{k} (expected {t.__name__})" for k, t in keys.items() if not isinstance(study.get(k), t)]
    extra = sorted(set(study) - set(keys))
    problems = ([f"missing or wrong: {', '.join(wrong)}"] if wrong else []) + (
        [f"unknown keys: {', '.join(extra)}"] if extra else [])
    if not wrong:
        if study["name"] != path.stem:
            problems.append(f"name {study['name']!r} is not the file's name {path.stem!r} (the record is NAME.json)")
        if (not study["seeds"] or not all(isinstance(s, int) and not isinstance(s, bool) for s in study["seeds"])
                or len(set(study["seeds"])) != len(study["seeds"])):
            problems.append(f"seeds must be a non-empty list of different whole numbers, got {study['seeds']!r}")
    return study, problems


def new_record(script: str, *, config: dict, machine: str, device: str, seconds: float, args: Sequence[str] = (),
               threads: int | None = None, code: dict | None = None) -> dict:
    """The fields every new record starts with (benchmarks/schema.py's HEADER_FIELDS, in that order): what
    made it (script, command, code revision, library versions), with which settings, on what, when and in
    how long. The caller adds the rows (runs) and the summary; schema.validate checks the whole record.
    args: the script's command-line arguments, part of the command that remakes the record. threads: each
    run's torch threads where the runs did not use this process's (runs in worker processes, one thread each).
    code: the code_state() the runs were made at, where they were not made by this process since it began."""
    import datetime
    import platform
    import shlex

    import torch

    versions = {"python": platform.python_version(), "torch": torch.__version__}
    for name in ("transformers", "peft"):
        try:
            versions[name] = __import__(name).__version__
        except ImportError:
            pass
    record = {"schema_version": SCHEMA_VERSION, "script": script, "command": shlex.join(["python", script, *args]),
              **(code or code_state()), "date": datetime.date.today().isoformat(), "machine": machine, "device": device,
              "cpu_capability": torch.backends.cpu.get_cpu_capability(),
              "threads": torch.get_num_threads() if threads is None else threads,
              "versions": versions, "config": config, "seconds": round(seconds, 1)}
    if tuple(record) != HEADER_FIELDS:
        raise AssertionError(f"new_record writes {tuple(record)}, benchmarks/schema.py says {HEADER_FIELDS}")
    return record


def command_args(argv: Sequence[str] | None) -> list[str]:
    """A script's arguments (argv, or sys.argv's) as the record's command gives them: paths inside the repository
    relative to it, so that the command remakes the record from the repository root on any machine."""
    import sys

    root = Path(__file__).resolve().parents[1]
    out = []
    for a in (sys.argv[1:] if argv is None else argv):
        p = Path(a)  # a file that exists, or an output about to be written (schema.OUTPUT_OPTIONS)
        if (p.exists() or (out and out[-1] in OUTPUT_OPTIONS)) and p.resolve().is_relative_to(root):
            a = p.resolve().relative_to(root).as_posix()
        out.append(a)
    return out
