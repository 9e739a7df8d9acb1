"""The one record format: the fields every benchmark record carries, a check of them, and of whether a
record is older than a change to the code it was made with.

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

Staleness. A record that names its code_revision is stale when the code it depends on changed since that commit.
The rule (``changed_since``): the code a record depends on is its script plus every course_lib module and every
benchmarks/ module (_common.py, another script; not this one) the script imports, directly or through those
modules, as the files are now (the working tree); it changed when one of their top-level definitions (a
function, a class, an assignment, any other statement) has no identical twin of the same name anywhere in
course_lib (for a benchmarks/ module: in the same file) at code_revision; a function or class added to a
benchmarks/ module other than the script, under a name that neither course_lib nor the script and its
benchmarks/ modules used at code_revision, is no change by itself (only code that calls it runs it, and that
code changed); a record whose script is gone is stale. A file under benchmarks/ that the record's command names
(a study's config file; not an output, the value of an option in OUTPUT_OPTIONS) changed when its text did. Two
definitions are identical when their source is the same once imports, docstrings, comments, blank lines and the
module part of qualified names (``course_lib.lm.decode.sample``, ``decode.sample`` where ``decode`` is an
imported course_lib module: ``sample``) are left out, so moving a file (``git mv``), moving a definition to
another module, or changing only its imports, the module its callers name, its docstrings or comments is no
change; anything else is, even a renamed variable or an error message. A stale record fails the test unless
STILL_VALID lists each changed definition, with the fingerprint it was reviewed at and why the record still
holds; a definition changed again after the review fails again. Records without a code_revision cannot be
checked this way: they are in LEGACY, which says so. A `python -m course_lib COMMAND` that a script starts in
another process counts as an import of the command's module (COMMANDS). Not covered: book_tools, another script
a script starts by subprocess, the task files under tasks/, and the installed libraries (the record's versions
say which).

    python benchmarks/schema.py                     each record: valid, LEGACY, or what is wrong with it
    python benchmarks/schema.py --changed RECORD    what changed in a record's code since its code_revision
"""

from __future__ import annotations

import ast
import dataclasses
import datetime
import hashlib
import io
import re
import subprocess
import tokenize
from pathlib import Path

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
    "notebooks/data/ppo_benchmark.json":
        f"{_NO_REVISION}; no script, machine, device or wall time; has config, runs and summary (its script now "
        "writes this format; chapter 6 prints it, so it is remade with the chapter, on the processor vendor the "
        "chapters' outputs were made on: notebooks/outputs_made_on.json)",
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
    "notebooks/data/smollm2_start_sampled.json":
        f"written by the course's eval command (chapter 10 gives it), not by a script: {_NO_REVISION}, no script, "
        "command or wall time; has machine and device; settings as top-level n_samples/temperature/max_new_tokens",
    "notebooks/data/smollm2_start_eval.json":
        f"written by the course's eval command (its command field), not by a script: {_NO_REVISION}, no script or "
        "wall time; has machine and device",
    # the batch's kernel client: checks of the book's tooling, not training records
    "notebooks/data/widget_stress-course.json":
        f"a stall count of the batch's kernel client: {_NO_REVISION}, no script, command or machine (device says "
        "'CPU, 2 cores'); rows as cells",
    "notebooks/data/widget_stress-stock.json":
        f"a stall count of papermill's kernel client: {_NO_REVISION}, no script, command or machine (device says "
        "'CPU, 2 cores'); rows as cells",
    "notebooks/data/widget_stress-plain-stock.json":
        f"a count of plain papermill runs of chapter 6: {_NO_REVISION} (versions as packages, no torch), no script "
        "or device; has command and machine; rows as chapters",
    "notebooks/data/widget_stress-plain-stock-capturing.json":
        f"a count of plain papermill runs of chapter 6 as committed in ec82eb7 (notebook_source says how to get "
        f"it): {_NO_REVISION} (versions as packages, no torch), no script or device; has command and machine; "
        "rows as chapters",
}


def experiments(root: Path = ROOT) -> dict[str, dict]:
    """benchmarks/experiments.toml: record path -> its entry (command, device, batch_before, by_hand, pages)."""
    from book_tools.reproduce import experiments as entries  # the one reader of the file, the batch's

    return {r["path"]: r for r in entries(root / EXPERIMENTS)}


# ---------------------------------------------------------------------------------------------------------
# Staleness: has the code a record depends on changed since its code_revision?

class NoHistory(Exception):
    """No git here, or not the record's commit (a tarball, a shallow clone): staleness cannot be checked."""


def _git(*args: str, stdin: str | None = None) -> str:
    try:
        done = subprocess.run(["git", "-C", str(ROOT), *args], input=stdin, capture_output=True, text=True)
    except OSError as e:
        raise NoHistory(f"git cannot run: {e}") from e
    if done.returncode:
        raise NoHistory(f"git {' '.join(args[:2])} failed: {done.stderr.strip()[:200]}")
    return done.stdout


def _fingerprint(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def definitions(source: str, is_module=None) -> dict[str, str]:
    """A module's top-level definitions: name -> fingerprint of its source without imports, docstrings,
    comments, blank lines and the module part of qualified names (so the same on every Python version).
    The module part: `course_lib.lm.decode.` anywhere, and `decode.` where the module imports a course_lib
    module under that name (`from course_lib.lm import decode`; is_module(dotted name) says which names
    are modules, not functions). Statements without a name (an `if`, a call) are named by their
    fingerprint; a module that does not parse is one definition, its text."""
    return {name: _fingerprint(text) for name, text in _units(source, is_module).items()}


def _left_out(tree: ast.Module, source: str, lines: list[str]) -> list[tuple[int, int, int, int]]:
    """The spans a fingerprint leaves out: imports, docstrings and comments, as (line, col, end_line, end_col),
    lines counted from 1, columns in UTF-8 bytes (as the AST counts them)."""
    cut = []  # (line, col, end_line, end_col) spans to leave out, lines counted from 1
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            cut.append((node.lineno, node.col_offset, node.end_lineno, node.end_col_offset))
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if (isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
                    and isinstance(first.value.value, str)):
                cut.append((first.lineno, first.col_offset, first.end_lineno, first.end_col_offset))
    try:
        for tok in tokenize.generate_tokens(io.StringIO(source).readline):
            if tok.type == tokenize.COMMENT:  # tokenize counts characters, the AST bytes
                (row, col), (end_row, end_col) = tok.start, tok.end
                cut.append((row, len(lines[row - 1][:col].encode()), end_row,
                            len(lines[end_row - 1][:end_col].encode())))
    except (tokenize.TokenError, SyntaxError):
        pass
    return cut


def _units(source: str, is_module=None) -> dict[str, str]:
    """definitions' names -> the text they fingerprint."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return {"<unparsable>": source}
    aliases = set()  # local names of course_lib modules
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("course_lib"):
            aliases |= {a.asname or a.name for a in node.names
                        if is_module is not None and is_module(f"{node.module}.{a.name}")}
        elif isinstance(node, ast.Import):
            aliases |= {a.asname for a in node.names if a.asname and a.name.startswith("course_lib")}
    qualifier = re.compile(r"(?<![\w.])(?:course_lib\.(?:\w+\.)*"
                           + "".join(f"|{re.escape(a)}\\." for a in sorted(aliases)) + r")(?=\w)")
    lines = source.splitlines(keepends=True)
    cut = _left_out(tree, source, lines)
    # blank the cut spans out of a copy of the lines (offsets are in UTF-8 bytes for AST nodes)
    raw = [line.encode() for line in lines]
    for line, col, end_line, end_col in cut:
        for n in range(line, end_line + 1):
            b = raw[n - 1]
            start = col if n == line else 0
            stop = end_col if n == end_line else len(b.rstrip(b"\r\n"))
            raw[n - 1] = b[:start] + b" " * (stop - start) + b[stop:]
    text = [b.decode(errors="replace").rstrip() for b in raw]
    out: dict[str, str] = {}
    for node in tree.body:
        first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
        body = qualifier.sub("", "\n".join(t for t in text[first - 1:node.end_lineno] if t.strip()))
        if not body.strip() or not body.strip(" ;"):
            continue  # an import, or the module's docstring
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            name = node.name
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            name = ", ".join(ast.unparse(t) for t in targets)
        else:
            name = f"statement {_fingerprint(body)}"
        key, n = name, 1
        while key in out:
            n += 1
            key = f"{name} #{n}"
        out[key] = body
    return out


def _module_file(module: str, root: Path) -> Path | None:
    base = root.joinpath(*module.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


# benchmarks/ modules a script's imports never make a dependency: the record format and its review lists
NOT_CODE = ("schema",)
# a script that starts `python -m course_lib COMMAND` in another process runs that command's module
COMMANDS = {"ppo": "course_lib.cli.ppo_cli", "eval": "course_lib.cli.ppo_cli", "llm": "course_lib.cli.llm_cli"}
_STARTS_COMMAND = re.compile(r"""["']-m["']\s*,\s*["']course_lib["']\s*,\s*["'](\w+)["']""")


def dependencies(script: str, root: Path = ROOT) -> list[Path]:
    """The code `script` runs besides itself: the course_lib files it imports, directly or through other modules
    (imports inside functions too), with the packages' __init__.py files on the way, and the benchmarks/ modules
    it imports (benchmarks/_common.py, another script; not NOT_CODE), as they are in the working tree. A
    `python -m course_lib COMMAND` it starts in another process ([sys.executable, "-m", "course_lib", "ppo", ...])
    counts as an import of the command's module (COMMANDS)."""
    seen: set[Path] = set()
    todo = [root / script]
    while todo:
        path = todo.pop()
        source = path.read_text()
        tree = ast.parse(source)
        unknown = sorted(set(_STARTS_COMMAND.findall(source)) - set(COMMANDS))
        if unknown:
            raise ValueError(f"{path} starts python -m course_lib {', '.join(unknown)}: add the command's module to "
                             "schema.COMMANDS, so that its code is followed")
        modules = {COMMANDS[c] for c in _STARTS_COMMAND.findall(source)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                modules |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                modules |= {node.module} | {f"{node.module}.{a.name}" for a in node.names}
            elif (isinstance(node, ast.ImportFrom) and node.module and node.level == 1
                  and path.parent == root / "benchmarks"):
                modules.add(node.module)  # benchmarks/_common.py's `from .schema import ...`
        for module in modules:
            parts = module.split(".")
            if parts[0] != "course_lib":
                local = root / "benchmarks" / f"{parts[0]}.py"  # a script's `from _common import ...`
                if len(parts) == 1 and parts[0] not in NOT_CODE and local.is_file() and local != root / script \
                        and local not in seen:
                    seen.add(local)
                    todo.append(local)
                continue
            for i in range(1, len(parts) + 1):  # a module's packages are imported with it
                file = _module_file(".".join(parts[:i]), root)
                if file is not None and file not in seen:
                    seen.add(file)
                    todo.append(file)
    return sorted(seen)


def _callables(source: str) -> set[str]:
    """The top-level functions and classes of a module's source."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return set()
    return {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}


OUTPUT_OPTIONS = ("--out", "--output", "--notebook-data", "--work", "--adapter-dir")  # a command's outputs


def data_files(record: dict, root: Path = ROOT) -> list[str]:
    """The files under benchmarks/ that the record's command names besides its script (a study's config file),
    whether or not they exist now: what it ran is in them too."""
    import shlex

    try:
        words = shlex.split(record.get("command") or "")
    except ValueError:
        return []
    outputs = {i + 1 for i, w in enumerate(words) if w in OUTPUT_OPTIONS}  # what a run writes is not its code
    return sorted({w for i, w in enumerate(words) if i not in outputs and w != record["script"]
                   and w.startswith("benchmarks/") and Path(w).suffix})


def _is_module(root: Path):
    return lambda module: _module_file(module, root) is not None


def _was_module(files: list[str]):
    files = set(files)
    return lambda module: any(module.replace(".", "/") + end in files for end in (".py", "/__init__.py"))


def _sources_at(revision: str, paths: list[str]) -> dict[str, str]:
    """path -> the file's text at `revision` (paths missing there are left out), in one git call."""
    if not paths:
        return {}
    out = _git("cat-file", "--batch", stdin="".join(f"{revision}:{p}\n" for p in paths))
    data, sources, pos = out.encode(), {}, 0
    for p in paths:
        end = data.index(b"\n", pos)
        header = data[pos:end].split()
        pos = end + 1
        if len(header) == 3 and header[1] == b"blob":
            size = int(header[2])
            sources[p] = data[pos:pos + size].decode(errors="replace")
            pos += size + 1
    return sources


@dataclasses.dataclass
class _CodeAt:
    """A record's code now and at its code_revision: what changed_since compares and --changed shows."""
    revision: str
    script: str
    old_files: list[str]  # course_lib's .py files at the revision
    deps: list[Path]  # the script and the files it depends on, now
    local: list[str]  # those of deps under benchmarks/ (compared file by file)
    data: list[str]  # the files under benchmarks/ its command names
    old: dict[str, str]  # path -> text at the revision (course_lib, local and data)


def _code_at(record: dict, root: Path = ROOT) -> _CodeAt:
    """Collect a record's code now and at its revision (its script must exist; changed_since checks the history
    first). Raises NoHistory where git cannot read the revision."""
    revision, script = record["code_revision"], record["script"]
    old_files = [p for p in _git("ls-tree", "-r", "--name-only", revision, "--", "course_lib").splitlines()
                 if p.endswith(".py")]
    deps = [root / script] + dependencies(script, root)
    local = [rel for rel in (p.relative_to(root).as_posix() for p in deps) if not rel.startswith("course_lib/")]
    data = data_files(record, root)
    return _CodeAt(revision, script, old_files, deps, local, data, _sources_at(revision, old_files + local + data))


def changed_since(record: dict, root: Path = ROOT) -> dict[str, str]:
    """The definitions the record's code changed since its code_revision: 'path::name' -> fingerprint now
    (the rule is in this module's docstring); a file its command names changed as a whole: 'path::<file>'.
    Raises NoHistory where git or the commit is not here."""
    if not (root / ".git").exists():
        raise NoHistory("not a git clone")
    _git("cat-file", "-e", f"{record['code_revision']}^{{commit}}")
    if not (root / record["script"]).is_file():
        return {f"{record['script']}::<file>": "deleted"}  # the script that made it is gone: remake it with today's
    return _changes(_code_at(record, root), root)


def _changes(code: _CodeAt, root: Path) -> dict[str, str]:
    """changed_since's comparison of a record's code now with its code at the revision."""
    old_files, deps, local, data, old, script = code.old_files, code.deps, code.local, code.data, code.old, code.script
    was_module = _was_module(old_files)
    pool: dict[str, set[str]] = {}  # course_lib at the revision: name -> fingerprints
    for path in old_files:
        for name, fp in definitions(old.get(path, ""), was_module).items():
            pool.setdefault(name.split(" #")[0], set()).add(fp)
    same_file: dict[str, dict[str, set[str]]] = {}  # a benchmarks/ file is compared with itself at the revision
    for rel in local:
        for name, fp in definitions(old.get(rel, ""), was_module).items():
            same_file.setdefault(rel, {}).setdefault(name.split(" #")[0], set()).add(fp)
    old_local_text = "\n".join(old.get(rel, "") for rel in local)
    changed = {}
    for path in deps:
        rel = path.relative_to(root).as_posix()
        then = same_file.get(rel, {}) if rel in local else pool
        source = path.read_text()
        # a function or class added to a benchmarks/ module (not the script) under a name that neither course_lib
        # nor the script and its benchmarks/ modules used at the revision (so it moved from nowhere)
        added_ok = {name for name in _callables(source) if name not in then and name not in pool
                    and rel != script and rel in old
                    and not re.search(rf"\b{re.escape(name)}\b", old_local_text)} if rel in local else set()
        for name, fp in definitions(source, _is_module(root)).items():
            base = name.split(" #")[0]
            if fp not in then.get(base, set()) and base not in added_ok:
                changed[f"{rel}::{name}"] = fp
    for rel in data:
        now = (root / rel).read_text() if (root / rel).is_file() else None
        if old.get(rel) != now:
            changed[f"{rel}::<file>"] = "deleted" if now is None else _fingerprint(now)
    return changed


# Records whose code changed since their code_revision, reviewed: path -> why the record still holds, and
# each changed definition ('path::name' as changed_since names it) with the fingerprint it was reviewed at (a
# tuple: each of several versions reviewed). To review: `python benchmarks/schema.py --changed RECORD` prints
# each changed definition beside its text at the record's commit.
_MOVED = {  # 7aa8d29, course_lib by role (core/, gru/, lm/, cli/)
    "course_lib/lm/llm.py::REPO_ROOT": "60d68bf188c7",
    "course_lib/runs.py::check_record_made_from": "6f40117e8631",
}
_MOVED_REASON = ("REPO_ROOT is parents[2] because llm.py moved one folder down (the same folder); "
                 "check_record_made_from changed only its error message")
_LEFT_PADDED = {  # 51a4a98: one left-padding helper (behaviour unchanged)
    "course_lib/lm/decode.py::left_padded": "eef8ca127588",
    "course_lib/lm/decode.py::sample": "358392e4225e",
    "course_lib/lm/evaluation.py::_hf_writer": "2c1cb548ed44",
}
_LEFT_PADDED_REASON = ("decode.left_padded builds the same left-padded ids and mask that sample (pad 0) and _hf_writer "
                       "(the tokenizer's pad) built inline before")
_METHOD_TABLE = {  # the RL core's method table: reviewed in the working tree on 2026-11-27, before it was committed
    "course_lib/core/rl.py::Method": "f718ba496e07",
    "course_lib/core/rl.py::METHODS": "82b6f7df8542",
    "course_lib/core/rl.py::kl_weight": "fafbc8336ba1",
    "course_lib/core/rl.py::with_kl_weight": "cba584c8b545",
    "course_lib/core/rl.py::RLSettings": "89351ddf2cde",
    "course_lib/lm/llm_rl.py::METHODS": "87d8cb60f8bc",
    "course_lib/lm/llm_rl.py::LMTrainer": "ea74f8a40362",
    # e3650a4fbd33: 7aa8d29's (the engine option's help names fast-bf16); 13ffd34c9ba5: with the method table
    "course_lib/lm/llm_rl.py::RLConfig": ("e3650a4fbd33", "13ffd34c9ba5"),
}
_METHOD_TABLE_REASON = (
    "the method table (core.rl.Method/METHODS) replaces METHOD_PARTS, KL_METHODS and the language model's kl_coef "
    "override of 0.05: for grpo it gives the same parts (group advantages, normalised; the clipped loss; no critic; "
    "no teacher terms) and, with kl_coef=0.05 as the record's settings give it, the same KL weight, 0.05")
_RENAMED = {  # one name per shared setting: reviewed in the working tree on 2026-11-27, before it was committed
    "course_lib/config.py::RENAMED": "4b324de32f4e",
    "course_lib/config.py::renamed": "01871786d718",
    "course_lib/config.py::coerce": "7e72754e71d4",
    "course_lib/config.py::Config": "4ae853f7023f",
    # c271b5115c70: rollout_splits read by config.coerce, the parser of every tuple option, not a copy of it
    # 3384048909f5 / 2e4dc789556f: a setting the method does not read (unused) is refused away from its default;
    # these records' settings (grpo; gae_lambda, vf_coef, min_std at their defaults) pass, and run as before
    "course_lib/core/rl.py::RLSettings": ("f8a008103ad9", "c271b5115c70", "3384048909f5"),
    "course_lib/lm/llm_rl.py::ROLLOUT_SPLITS": "e1801d47381c",
    "course_lib/lm/llm_rl.py::RLConfig": ("b75dd38ebea6", "2e4dc789556f"),
    "course_lib/lm/llm_rl.py::rollout": "8c023c203952",
    "course_lib/lm/llm_rl.py::LMTrainer": "07a81faffa62",
}
_RENAMED_REASON = (
    "a rename with the same defaults: RLConfig's timeout, clip_norm and splits are RLSettings' sandbox_timeout, "
    "max_grad_norm and rollout_splits (2.0 s, 1.0, train and val as before), group_size moved to RLSettings with "
    "the same default (4) and check, and rollout and LMTrainer read the new names; config.RENAMED reads a stored "
    "config's old names as the new ones, and coerce splits a tuple option's items on commas too (a list of names "
    "without commas reads as before)")
_STEP_INFO = {  # the step's context as a dataclass: reviewed on 2026-11-27
    "course_lib/core/rl.py::StepInfo": "4a958eab2d33",
    "course_lib/core/rl.py::Trainer": "3cc335d0b8a8",
    "course_lib/lm/llm_rl.py::LMStep": "106345003c73",
    "course_lib/lm/llm_rl.py::LMTrainer": "04c18d859c37",
}
_STEP_INFO_REASON = (
    "what collect() hands the step's other parts is a dataclass (rl.StepInfo; the language model's LMStep: teacher, "
    "own, times) instead of a dict with the same keys; Trainer.step runs the same calls in the same order, and "
    "learn moved to core/update.py unchanged")
_ONE_SCORER = {  # one evaluator for both policies: reviewed in the working tree on 2026-11-27, before it was committed
    "course_lib/lm/evaluation.py::evaluate": "de12074d14f4",
    "course_lib/scoring.py::UNREADABLE": "34230280ea56",
    "course_lib/scoring.py::score": "ae651c80e47c",
    "course_lib/scoring.py::_reports": "50d18313524f",
    "course_lib/scoring.py::_mean": "59d9c96243ce",
}
_ONE_SCORER_REASON = (
    "evaluate writes the same completions with the same generate calls (greedy, then n_samples samples: the same "
    "seed and order) and scoring.score runs them in the sandbox as run_completions did and computes the same "
    "numbers, rounded to 4 places; only names changed ({group}_pass_rate, pass@1 from n samples, is "
    "{group}_pass@1), pass_at_k moved to scoring unchanged, and the per-task rows keep greedy_passed, n and c")
_CHUNKED = {  # the learner scores rows of similar length together: reviewed on 2026-11-27
    "course_lib/lm/llm_rl.py::RLConfig": "281f12473cc4",
    "course_lib/lm/llm_rl.py::rollout": "ac551939b2f4",
    "course_lib/lm/llm_rl.py::LMTrainer": "10ff7004bffa",
    "course_lib/lm/lm_policy.py::LEARNER_DTYPES": "14a97f192dfd",
    "course_lib/lm/lm_policy.py::LMActor": "f5695b74e301",
    "course_lib/lm/lm_policy.py::length_chunks": "6af92612feab",
}
_CHUNKED_REASON = (
    "LMActor scores rows of similar length together (length_chunks; score_tokens, 1024 tokens a pass on a CPU by "
    "default): the same log-probabilities, values and gradients as the one padded pass this record ran, up to float32 "
    "rounding (tests/test_rl_core.py compares them with one pass), so a rerun differs only where that rounding changes "
    "a later sample; learner_dtype is a new option whose default, float32, is what this record ran, and RLConfig, "
    "rollout and LMTrainer only hand the two settings to LMActor")
_ONE_LEARNER = {  # one builder of the learner's LMActor: reviewed on 2026-11-27
    "course_lib/lm/llm_rl.py::learner": "8da1d2ab92c4",
    "course_lib/lm/llm_rl.py::rollout": "f9cf61ea3432",
    "course_lib/lm/llm_rl.py::LMTrainer": "d6331b69ac35",
}
_ONE_LEARNER_REASON = (
    "rollout and LMTrainer build their LMActor through llm_rl.learner, with the arguments each passed to LMActor "
    "itself before (temperature, value head, score_tokens, learner_dtype)")
_HEADER_ARGS_REASON = ("new_record (benchmarks/_common.py) now takes the runs' threads and the script's arguments, which "
                       "the script set on the header after new_record before: the same fields with the same values")
_ENGINE_ON_ANY_DEVICE = {  # the fast engine runs where the policy is: reviewed on 2026-11-28
    "course_lib/lm/decode.py::Snapshot": "51d2cba01074",
    "course_lib/lm/decode.py::_Batch": "95471db0baa3",
    "course_lib/lm/decode.py::sample": "00f928bf170e",
    "course_lib/lm/decode.py::forced_logits": "0c4c09cd43f1",
    "course_lib/lm/evaluation.py::_fast_writer": "59228d0a5209",
}
_ENGINE_ON_ANY_DEVICE_REASON = (
    "the fast engine makes its buffers and draws its tokens on the policy's device (a GPU too) and reads each step's "
    "tokens and log-probabilities to the host in one copy instead of one per row: on a CPU the same ids, finishes and "
    "log-probabilities bit for bit (16 sampled rows of SmolLM2 at T = 0.8 compared with the code before), in about 18% "
    "less time on that call, so the record's fast-engine speeds are, if anything, low")
_FAST_ON_ANY_DEVICE = {  # sampling's default engine is the fast one on a GPU too: reviewed on 2026-11-28
    "course_lib/lm/evaluation.py::pick_engine": "abe125084d8d",
    "course_lib/lm/llm_rl.py::RLConfig": "3014db65aef3",
}
_FAST_ON_ANY_DEVICE_REASON = (
    "pick_engine's default for sampling is now the fast engine on a GPU as well as on a CPU (RLConfig.engine's help "
    "says so): on a CPU, where this record ran or where it named its engines, the same choice as before")
_KL_TO_LEARNER = {"course_lib/lm/decode.py::kl_to_learner": "25cf8a28a4ef",
                  "course_lib/lm/decode.py::token_kl": "8dc25cf87243"}  # reviewed on 2026-11-28
_KL_TO_LEARNER_REASON = (
    "decode.kl_to_learner is the per-token KL(sampler || learner) that the benchmarks computed inline, moved into the "
    "library (tests/test_decode.py checks it against the test's own computation); nothing that samples or learns "
    "calls it; its last three lines are decode.token_kl now, the same operations in the same order")
_ONE_FOLDER_REASON = ("OUTPUT names the folder the record now lives in, notebooks/data/ (the one records folder, where "
                      "the record was moved unchanged): where the script writes it, not what it writes")
_LEGEND_REASON = ("SPLIT_ROLES is the text of the legend under a results table (val's reference solutions, not "
                  "its own passing programs, are never trained on): words printed beside results, no result")
_LEGEND = {"course_lib/tasks/core.py::SPLIT_ROLES": "e166268baf05"}  # reviewed on 2026-11-28
_ONE_MASK_REASON = ("the environment's action mask (env.alphabet_mask) and the sampler's (models.next_token_mask) are "
                     "both made by tokenizers.id_mask now: the same masks, element for element and dtype for dtype "
                     "(checked on the course alphabet, all ids and a short list)")
_ONE_MASK = {"course_lib/tokenizers.py::id_mask": "202e32478830",
             "course_lib/gru/env.py::alphabet_mask": "a05c8859f96f",
             "course_lib/gru/models.py::next_token_mask": "286a2e6abc80"}  # reviewed on 2026-11-28
_TAKE_TURNS_REASON = ("its tries are timed by _common.take_turns and the fastest kept by _common.fastest (reviewed on "
                      "2026-11-28): the same contenders in the same order, the same number of tries and the same "
                      "choice of the least seconds, written once for every timing benchmark")
_ONE_SAMPLER_REASON = ("models.decode is the GRU's one writing loop: generate_ids (every row fed each step) and "
                       "actor.collect_rollout (finished rows leave the batch) call it with their own rules for choosing "
                       "a token; the same ids, log-probabilities, values, masks, rewards, bootstraps and episodes bit "
                       "for bit (3 random GRUs, greedy, T = 1 and T = 0.7 with a mask, rollouts of 5 and 40 tokens "
                       "with bootstrapped cut-off rows, compared with the code before)")
_ONE_SAMPLER = {"course_lib/gru/models.py::Decoded": "65e725acda7a", "course_lib/gru/models.py::decode": "74be8e050d4c",
                "course_lib/gru/models.py::generate_ids": "78435be56b06"}  # reviewed on 2026-11-28
# benchmarks/ modules a script imports (_common.py, another script), followed by the staleness check since 2026-11-28
# (it had followed course_lib and the script alone): their changes since each record was made, reviewed that day
_COMMON_HEADER = {"benchmarks/_common.py::machine": "8cbd267abd21", "benchmarks/_common.py::provenance": "5fa1ac550882"}
_COMMON_HEADER_REASON = ("_common's machine and provenance write a record's header, not what a run computes: machine "
                         "names the processor as 'cpu (MODEL), N cores' (a GPU first where there is one), and "
                         "provenance now names it so where it wrote 'MODEL, N cores'")
_CODE_STATE = {"benchmarks/_common.py::new_record": "7994848a3285", "benchmarks/_common.py::code_state": "47345f205a98"}
_CODE_STATE_REASON = ("_common's new_record and code_state write a record's header, not what a run computes: since "
                      "this record new_record may have gained the command's arguments and the runs' threads, and "
                      "now takes the code_state the runs were made at where the caller gives it (code=); code_state "
                      "now counts uncommitted changes in benchmarks/ too (an untracked file only if it is .py or "
                      ".toml), and COURSE_CODE_REVISION where that is set")
_TIMING = {"benchmarks/_common.py::fastest": "e8000eb4a566"}
_TIMING_REASON = ("_common's fastest, the choice of the least seconds among a contender's tries, was added after this "
                  "record (where this record's script calls it, its own review says so)")
_REUSE = {"benchmarks/_common.py::reuse_or_clear": "b9da2a22b0f9"}
_REUSE_REASON = ("_common's reuse_or_clear now also keeps the settings a run is made with in its made_at.json and "
                 "reuses a run only with the same settings: which runs are made again, not what a run computes; "
                 "every run of this record was made afresh by the code at its commit")
_GRU_STUDY_REUSE = {"benchmarks/gru_study.py::run_one": "0a7f49ad78d7",
                    "benchmarks/gru_study.py::parse": "a34dbee10f1f", "benchmarks/gru_study.py::main": "0400491ada51"}
_GRU_STUDY_REUSE_REASON = ("gru_study gives reuse_or_clear each run's settings and the start's SHA-256, the check "
                           "of the runs' made_at.json (now _common.made_by) compares only the code they were made "
                           "by, and parse reads the options where main did "
                           "(the same values: tests/test_studies.py); every run gets the same PPOConfig as before")
_COMMON_GRU_NAMES = {"benchmarks/_common.py::statement 53f107c8bc9a": "53f107c8bc9a",
                     "benchmarks/_common.py::_GRU_RECORD_ROW": "834039945062"}
_COMMON_GRU_NAMES_REASON = ("_common's _GRU_RECORD_ROW, added after this record, is the table of names by which its "
                            "GRU helpers name a GRU evaluation's greedy results (this language-model record reads "
                            "none), and its import of schema's header names works as a package and as a script alike")
_GENERATION_THROUGHPUT_SCRIPT = {  # reviewed on 2026-11-28
    "benchmarks/generation_throughput.py::main": "01c0060c9c31",
    "benchmarks/generation_throughput.py::measure": "dc670a1bbdac",
    "benchmarks/generation_throughput.py::int8_mismatch": "f909638d9f85",
    "benchmarks/generation_throughput.py::OUTPUT": "f989f506950a"}
_LM_STUDY_RUNNER = {  # reviewed on 2026-11-28
    **{f"benchmarks/smollm2_rl.py::{name}": fingerprint for name, fingerprint in (
        ("LOOPS", "cce1cfa7de02"), ("STUDIES", "4e8db7c5517a"), ("STUDY_KEYS", "1b833646635a"),
        ("SUMMARY_KEYS", "82ebd64e269b"), ("main", "5829c9e8b569"), ("parse", "96d4cc795e83"), ("run", "6592d1f864e4"),
        ("run_settings", "36c909d63a1d"), ("save", "1001c2f89902"), ("start_rows", "7e6fe6f0b6e1"),
        ("statement 85d88cdd4da2", "85d88cdd4da2"), ("_remake_args", "765a1481dfca"))}}
_LM_STUDY_RUNNER_REASON = ("smollm2_rl.py became the runner of the language model's study files (benchmarks/studies/lm/): "
                           "what it added or changed (the study's reading and checks, parse, run, save, start_rows, "
                           "main, run_settings' rl_config) runs only when it is the script; the scripts that import "
                           "it use its constants (MODEL, LORA, RL, REPO_ROOT) and its summarise, unchanged")
_COMMAND_ARGS = {"benchmarks/_common.py::command_args": "44b451a04744", "benchmarks/gru_study.py::record": "c360c8914a65",
                 "benchmarks/gru_study.py::read_study": "a165710453e4"}
_COMMAND_ARGS_REASON = ("gru_study's _command_args moved to _common as command_args (the same lines, the repository "
                        "root found from _common's folder, the same one), so that the language model's runner uses it "
                        "too, and writes an output option's path from the root even before the file exists; main "
                        "calls it there, record names its parameter `arguments`, and _common.made_by, where gru_study's made_at moved (the same "
                        "check of every run's made_at.json, so that ppo_benchmark makes it too); read_study reads "
                        "the file and checks the keys, name and seeds every study shares by _common.read_study_file "
                        "(the same checks and messages; tests/test_studies.py names each mistake), then its variants")
_LM_REUSE_RULES = {  # reviewed on 2026-11-28
    "benchmarks/smollm2_rl.py::run": "6592d1f864e4", "benchmarks/smollm2_rl.py::start_rows": "7e6fe6f0b6e1",
    "benchmarks/smollm2_rl.py::main": "5829c9e8b569", "benchmarks/smollm2_rl.py::_remake_args": "765a1481dfca", "benchmarks/smollm2_rl.py::parse": "96d4cc795e83",
    "benchmarks/smollm2_rl.py::save": "1001c2f89902"}
_LM_REUSE_RULES_REASON = ("run, start_rows and their helpers now extend a record (every setting the same), or reuse "
                          "another's start (the same model and evaluation settings), only when it was made by this "
                          "code on this machine with this torch; this record was "
                          "made afresh at its commit, its start measured by its own run (the record it could take "
                          "it from was made by other code); _remake_args writes the command from the seeds the "
                          "record holds, here the study's, so the command is the one it ran; the study file's "
                          "comments changed, not its settings; parse passes each seed once, and save summarises a "
                          "measure only where every trained row has it (here every row has every measure); _common.command_args also writes an output "
                          "option's path from the root before the file exists (this record's command names none), "
                          "and read_study_file refuses a seed listed twice (this study lists three different ones)")
STILL_VALID: dict[str, dict] = {
    "notebooks/data/engine_candidates.json": {
        "reason": "kl_rows and llama_update compute their per-token KL by decode.token_kl, the operations they wrote "
                  "out inline (float32 log-softmax at T of both logits, then sum p_s (log p_s - log p_t)); "
                  + _KL_TO_LEARNER_REASON
                  + "; " + _CODE_STATE_REASON + "; " + _TIMING_REASON,
        "reviewed": {**_CODE_STATE, **_TIMING, **_KL_TO_LEARNER, "benchmarks/engine_candidates.py::kl_rows": "235948ab7655",
                     "benchmarks/engine_candidates.py::llama_update": "db13a173cdda",
                     "benchmarks/engine_candidates.py::timings": "8d546c2b79c5"},
    },
    "notebooks/data/generation_throughput.json": {
        "reason": "main names the machine by _common.machine(): the same text on a CPU; int8_mismatch computes its KL "
                  "by decode.kl_to_learner, the same arithmetic; " + _KL_TO_LEARNER_REASON + "; " + _ONE_FOLDER_REASON
                  + "; " + _LEGEND_REASON + "; " + _ONE_MASK_REASON + "; " + _TAKE_TURNS_REASON
                  + "; " + _COMMON_HEADER_REASON + "; " + _CODE_STATE_REASON + "; " + _TIMING_REASON,
        "reviewed": {**_COMMON_HEADER, **_CODE_STATE, **_TIMING, **_LEGEND, **_ONE_MASK, **_KL_TO_LEARNER,
                     **_GENERATION_THROUGHPUT_SCRIPT},
    },
    "notebooks/data/smollm2_gpu_engines.json": {
        "reason": "the run on the GPU wrote its rows as one dict by measure; rows_of, added after, turns that dict into "
                  "the list of rows the record format asks for, and the record was reshaped by rows_of itself: the "
                  "same values, one row per engine and measure; main warms both engines up in one loop and averages "
                  "the later steps with statistics.mean, the same calls and numbers; " + _FAST_ON_ANY_DEVICE_REASON.replace(
                      "on a CPU, where this record ran or where it named its engines", "this record names its engines")
                  + "; " + _ONE_FOLDER_REASON + "; " + _LEGEND_REASON + "; " + _ONE_MASK_REASON + "; "
                  + _TAKE_TURNS_REASON + "; " + _COMMON_HEADER_REASON + "; " + _CODE_STATE_REASON + "; " + _TIMING_REASON
                  + "; it imports generation_throughput.py, whose changes are generation_throughput.json's, reviewed "
                  "there with the same reasons, and smollm2_gpu_long.py and smollm2_rl.py, where only the engine "
                  "option's help, the GPU record's header (code_state, threads) and the machine's text changed; "
                  + _LM_STUDY_RUNNER_REASON,
        "reviewed": {**_COMMON_HEADER, **_CODE_STATE, **_TIMING, **_LEGEND, **_ONE_MASK,
                     **_GENERATION_THROUGHPUT_SCRIPT,
                     "benchmarks/smollm2_gpu_long.py::parse": "a5024eb8b6f4",
                     "benchmarks/smollm2_gpu_long.py::header": "54f0d2f22732",
                     "benchmarks/smollm2_rl.py::save": "693ee32b77b6",
                     "benchmarks/smollm2_gpu_engines.py::rows_of": "1642eedfb8f9",
                     "benchmarks/smollm2_gpu_engines.py::generation": "a8e05f623acb",
                     "benchmarks/smollm2_gpu_engines.py::main": "9fe010dd40a5", **_FAST_ON_ANY_DEVICE,
                     **_LM_STUDY_RUNNER,
                     # sampler_kl computes its KL by decode.kl_to_learner, the same arithmetic
                     "benchmarks/smollm2_gpu_engines.py::sampler_kl": "23231149a1eb", **_KL_TO_LEARNER,
                     "benchmarks/smollm2_gpu_engines.py::OUTPUT": "71de8879d638"},
    },
    "notebooks/data/ppo_from_copying_start.json": {
        "reason": "main reuses a seed's run folder only if it was made by the current code from the same checkpoint "
                  "(_common.reuse_or_clear) where it reused any folder with an eval.json; this record's two runs "
                  "were made afresh at its commit, and the command each runs is the same; " + _CODE_STATE_REASON
                  + "; the ppo command it starts (followed since the check counts `python -m course_lib ppo`) "
                  "samples its rollouts by actor.collect_rollout, which now writes through the GRU's one loop: "
                  + _ONE_SAMPLER_REASON,
        "reviewed": {**_CODE_STATE, "benchmarks/ppo_from_copying_start.py::main": "ea5c39a6ad2f",
                     "course_lib/gru/actor.py::collect_rollout": "2ec26391019b"},
    },
    "notebooks/data/llm_rl_benchmark.json": {"reason": _CODE_STATE_REASON, "reviewed": {**_CODE_STATE}},
    "notebooks/data/teacher_grpo_benchmark.json": {"reason": _CODE_STATE_REASON, "reviewed": {**_CODE_STATE}},
    **{f"notebooks/data/{name}.json": {"reason": f"{_REUSE_REASON}; {_GRU_STUDY_REUSE_REASON}; {_CODE_STATE_REASON}; "
                                                 f"{_COMMAND_ARGS_REASON}",
                                       "reviewed": {**_REUSE, **_GRU_STUDY_REUSE, **_CODE_STATE, **_COMMAND_ARGS}}
       for name in ("teacher_ablation", "gru_methods", "explore_ablation", "lambda_ablation")},
    "notebooks/data/reward_ablation.json": {
        "reason": f"{_REUSE_REASON}; run_one gives it the run's PPOConfig settings and the start's SHA-256, and builds "
                  f"the same PPOConfig from them; {_CODE_STATE_REASON}",
        "reviewed": {**_REUSE, **_CODE_STATE, "benchmarks/reward_ablation.py::run_one": "8673ebb937f0"}},
    **{f"notebooks/data/{name}.json": {"reason": _LM_REUSE_RULES_REASON,
                                       "reviewed": {**_LM_REUSE_RULES, f"benchmarks/studies/lm/{name}.toml::<file>": fp,
                                                    "benchmarks/_common.py::command_args": "44b451a04744",
                                                    "benchmarks/_common.py::read_study_file": "0e4606a4654a"}}
       for name, fp in (("smollm2_ppo", "dca68d9f0eba"), ("smollm2_reinforce", "4db494a033cd"))},
    "notebooks/data/scoring_benchmark.json": {"reason": f"{_REUSE_REASON} (this script calls neither); {_CODE_STATE_REASON}",
                                              "reviewed": {**_REUSE, **_CODE_STATE}},
    "notebooks/data/smollm2_step_time.json": {
        "reason": f"{_REUSE_REASON} (this script calls neither); {_CODE_STATE_REASON}; {_LM_STUDY_RUNNER_REASON}",
        "reviewed": {**_REUSE, **_CODE_STATE, **_LM_STUDY_RUNNER}},
    "notebooks/data/variants_pretraining.json": {
        "reason": _HEADER_ARGS_REASON + " (the command, with the arguments it ran with); " + _LEGEND_REASON + "; "
                  + _ONE_MASK_REASON + "; " + _ONE_SAMPLER_REASON
                  + "; " + _COMMON_HEADER_REASON + "; " + _CODE_STATE_REASON,
        "reviewed": {**_COMMON_HEADER, **_CODE_STATE, **_LEGEND, **_ONE_MASK, **_ONE_SAMPLER,
                     "benchmarks/variants_pretraining.py::main": "bddd6aad89d7"},
    },
    "notebooks/data/smollm2_cpu_seeds.json": {
        "reason": f"{_MOVED_REASON}; {_LEFT_PADDED_REASON}; the bfloat16 engine (21c9ac9) is a new option: the "
                  "float32 fast engine this record sampled with (engine auto on a CPU) runs the same code, "
                  "Snapshot/_Linear with precision 'float32' being the old quantize=False; "
                  f"{_METHOD_TABLE_REASON} (config.rl: method grpo, kl_coef 0.05); {_RENAMED_REASON}; "
                  f"{_STEP_INFO_REASON}; {_ONE_SCORER_REASON} (what this record reads); {_CHUNKED_REASON}; "
                  f"{_ONE_LEARNER_REASON}; {_ENGINE_ON_ANY_DEVICE_REASON}; {_FAST_ON_ANY_DEVICE_REASON}; "
                  + _LEGEND_REASON + "; " + _ONE_MASK_REASON
                  + "; " + _COMMON_HEADER_REASON + "; " + _CODE_STATE_REASON + "; " + _COMMON_GRU_NAMES_REASON,
        "reviewed": {**_COMMON_HEADER, **_CODE_STATE, **_COMMON_GRU_NAMES,
                     **_LEGEND, **_ONE_MASK, **_MOVED, **_LEFT_PADDED, **_METHOD_TABLE, **_RENAMED, **_STEP_INFO,
                     **_ONE_SCORER, **_CHUNKED, **_ONE_LEARNER,
                     "course_lib/lm/decode.py::ENGINES": "26e1d58ed450",
                     "course_lib/lm/decode.py::PRECISIONS": "435d122a2e7f",
                     "course_lib/lm/decode.py::_Linear": "55157e094f39",
                     "course_lib/lm/evaluation.py::generate": "72d55126b132",
                     **_ENGINE_ON_ANY_DEVICE, **_FAST_ON_ANY_DEVICE,
                     # main names the machine by _common.machine(): the same text on a CPU
                     "benchmarks/smollm2_cpu_seeds.py::main": "ae4f09755efd", **_KL_TO_LEARNER},
    },
}


# One rule for reusing a run or extending a record (_common.made_here_by_this_code), reviewed on 2026-11-28: each
# record below gets the definitions of it that changed under it, and the reasons for those
_ONE_RULE = {"benchmarks/_common.py::reuse_or_clear": "88ec94285d6e",
             "benchmarks/gru_study.py::run_one": "da98898a08ce", "benchmarks/gru_study.py::parse": "016104da2817",
             **{f"benchmarks/smollm2_rl.py::{name}": fingerprint for name, fingerprint in (
                 ("start_rows", "8c2fea6b10b3"), ("run", "7f4be5e79834"), ("parse", "466b456cf468"),
                 ("_remake_args", "07b8bd6c823a"), ("read_study", "99783f3f8628"))}}
_ONE_RULE_REASONS = {
    "_common": "_common.reuse_or_clear now asks _common.made_here_by_this_code (the same commit with nothing uncommitted "
               "then or now, the same machine, the same torch, and a commit at all), so it also writes the machine "
               "and torch into a run's made_at.json and says why it makes a finished run again: which runs are made "
               "again, not what a run computes",
    "gru_study": "gru_study refuses --seeds or --variants that list a value twice, takes its record's path from "
                 "_common.record_path (notebooks/data/NAME.json, the same path) and says in its reuse message that "
                 "the run was made here: every run gets the same PPOConfig as before",
    "smollm2_rl": "the language model's runner asks _common.made_here_by_this_code where it kept its own copy of the "
                  "rule, extends a record when the record's config equals the settings it would run with (the keys it "
                  "compared one by one before) and takes record paths from _common.record_path (the same paths): which "
                  "seeds are run again, not what a run computes; what the scripts that import it use (MODEL, LORA, RL, "
                  "REPO_ROOT, summarise) is unchanged"}
for _name, _parts in {**dict.fromkeys(("explore_ablation", "gru_methods", "lambda_ablation", "teacher_ablation"),
                                      ("_common", "gru_study")),
                      **dict.fromkeys(("reward_ablation", "scoring_benchmark", "smollm2_gpu_seeds_long"), ("_common",)),
                      "smollm2_gpu_engines": ("smollm2_rl",),
                      **dict.fromkeys(("smollm2_ppo", "smollm2_reinforce", "smollm2_step_time"),
                                      ("_common", "smollm2_rl"))}.items():
    _entry = STILL_VALID.setdefault(f"notebooks/data/{_name}.json", {"reason": "", "reviewed": {}})
    _entry["reason"] = "; ".join(filter(None, (_entry["reason"], *(_ONE_RULE_REASONS[p] for p in _parts))))
    _entry["reviewed"] = {**_entry["reviewed"],
                          **{k: v for k, v in _ONE_RULE.items() if k.split("::")[0].split("/")[-1][:-3] in _parts}}
del _name, _parts, _entry


# One name per measure, reviewed on 2026-11-28: PPOConfig's target_kl help says "approximate KL" where it said
# "approx-KL"; the help text of an option, not what a run computes
_KL_NAME = {"course_lib/gru/ppo_config.py::PPOConfig": "d35ce7baa58f"}
_KL_NAME_REASON = ("PPOConfig's target_kl help names the measure 'approximate KL' (it said 'approx-KL'): the text of "
                   "the option's help, the same settings and defaults")
for _name in ("explore_ablation", "gru_methods", "lambda_ablation", "ppo_from_copying_start", "reward_ablation",
              "teacher_ablation"):
    _entry = STILL_VALID[f"notebooks/data/{_name}.json"]
    _entry["reason"] += "; " + _KL_NAME_REASON
    _entry["reviewed"] = {**_entry["reviewed"], **_KL_NAME}
del _name, _entry


def _reviewed(path: str, key: str, fingerprint: str) -> bool:
    versions = STILL_VALID.get(path, {}).get("reviewed", {}).get(key, ())
    return fingerprint in ((versions,) if isinstance(versions, str) else versions)


def unexplained_changes(path: str, record: dict, root: Path = ROOT) -> dict[str, str]:
    """changed_since's definitions that STILL_VALID does not list for `path` at their fingerprint now."""
    return {k: fp for k, fp in changed_since(record, root).items() if not _reviewed(path, k, fp)}


def _show_changes(path: str) -> None:
    """Print each definition the record's code changed since its code_revision, beside its old text."""
    import difflib
    import json

    record = json.loads((ROOT / path).read_text())
    revision = record.get("code_revision")
    if not isinstance(revision, str):
        print(f"{path} names no code_revision: its code's changes cannot be listed (LEGACY says what it lacks)")
        return
    if not (ROOT / record["script"]).is_file():
        print(f"{record['script']}, which made {path}, is gone: remake the record ({record['command']})")
        return
    code = _code_at(record)
    old, local, old_files = code.old, code.local, code.old_files
    was_module = _was_module(old_files)
    for key, fp in _changes(code, ROOT).items():
        rel, name = key.split("::", 1)
        if name == "<file>":
            before, now = old.get(rel, ""), (ROOT / rel).read_text() if (ROOT / rel).is_file() else ""
        else:
            where = [rel] if rel in local else old_files
            before = next((_units(old[f], was_module)[name] for f in where
                           if f in old and name in _units(old[f], was_module)), "")
            now = _units((ROOT / rel).read_text(), _is_module(ROOT))[name]
        status = "reviewed" if _reviewed(path, key, fp) else "NOT REVIEWED"
        print(f"=== {key} {fp} ({status})")
        print("\n".join(difflib.unified_diff(before.splitlines(), now.splitlines(), f"{revision[:8]}", "now",
                                             lineterm="", n=1)) or "(new)")


def main() -> None:
    import argparse
    import json

    parser = argparse.ArgumentParser(description="Check every record against the schema (and its code's changes).")
    parser.add_argument("--changed", metavar="RECORD", help="show what changed in a record's code since it was made")
    args = parser.parse_args()
    if args.changed:
        _show_changes(args.changed)
        return
    for file in record_files():
        rel = file.relative_to(ROOT).as_posix()
        problems = validate(json.loads(file.read_text()))
        print(f"{rel}: {'valid' if not problems else 'LEGACY' if rel in LEGACY else 'INVALID'}")
        for problem in problems if rel not in LEGACY else []:
            print(f"    {problem}")


if __name__ == "__main__":
    main()
