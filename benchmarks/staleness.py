"""Whether a record is older than a change to the code it was made with (the record format is benchmarks/schema.py).

Staleness. A record that names its code_revision is stale when the code it depends on changed since that commit. The
rule (``changed_since``): the code a record depends on is its script plus every course_lib module and every
benchmarks/ module (_common.py, another script; not NOT_CODE: the record format, this check and its reviews) the
script imports, directly or through those modules, as the files are now (the working tree); it changed when one of
their top-level definitions (a function, a class, an assignment, any other statement) has no identical twin of the
same name anywhere in course_lib (for a benchmarks/ module: in the same file; for one new since, other than the
script, among the definitions that have left the record's benchmarks/ files since, unless its text names __file__,
__name__, globals() or a global, whose meaning moves with it) at code_revision; a function or class added to a
benchmarks/ module other than the script, under a name that neither course_lib nor the script and its benchmarks/
modules used at code_revision, is no change by itself (only code that calls it runs it, and that code changed); a
record whose script is gone is stale. A file under benchmarks/ that the record's command names (a study's config
file; not an output, the value of an option in OUTPUT_OPTIONS) changed when its text did. Two definitions are
identical when their source is the same once imports, docstrings, comments, blank lines and the module part of
qualified names (``course_lib.lm.decode.sample``, ``decode.sample`` where ``decode`` is an imported course_lib
module: ``sample``) are left out, so moving a file (``git mv``), moving a definition to another module, or changing
only its imports (a `try:` of imports alone counts as imports), the module its callers name, its docstrings or
comments is no change; anything else is, even a renamed variable or an error message. A stale record fails the test
unless STILL_VALID (still_valid.py) lists each changed definition, with the fingerprint it was reviewed at and why
the record still holds; a definition changed again after the review fails again. Records without a code_revision
cannot be checked this way: they are in LEGACY, which says so. A `python -m course_lib COMMAND` that a script starts
in another process counts as an import of the command's module (COMMANDS). Not covered: book_tools, another script a
script starts by subprocess, the task files under tasks/, the installed libraries (the record's versions say which),
and which definition a name binds where only imports changed (a definition removed from a file, and the same name
imported there from elsewhere, is judged by the imported definition's own file).

    python benchmarks/schema.py --changed RECORD    what changed in a record's code since its code_revision
"""

from __future__ import annotations

import ast
import dataclasses
import hashlib
import io
import re
import subprocess
import tokenize
from pathlib import Path

try:  # imported as benchmarks.staleness, or from benchmarks/
    from .still_valid import STILL_VALID
except ImportError:
    from still_valid import STILL_VALID

ROOT = Path(__file__).resolve().parents[1]


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
        if not body.strip() or not body.strip(" ;") or _only_imports(node):
            continue  # an import (a try of imports too: `from .x import y` or else `from x import y`), or the docstring
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


def _only_imports(node: ast.stmt) -> bool:
    """A `try:` whose body and handlers hold imports alone (a module imported as part of a package or from its
    folder): what it runs is those imports."""
    return (isinstance(node, ast.Try) and not node.orelse and not node.finalbody
            and all(isinstance(n, (ast.Import, ast.ImportFrom))
                    for n in node.body + [b for h in node.handlers for b in h.body]))


def _module_file(module: str, root: Path) -> Path | None:
    base = root.joinpath(*module.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


# benchmarks/ modules a script's imports never make a dependency: the record format and its review lists
NOT_CODE = ("schema", "staleness", "still_valid", "rule_reviews")
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
                             "staleness.COMMANDS, so that its code is followed")
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
    is_module = _is_module(root)
    sources = {path.relative_to(root).as_posix(): path.read_text() for path in deps}  # the code now, read once
    units = {rel: _units(source, is_module) for rel, source in sources.items()}
    # what left a benchmarks/ file of the record's since the revision: name -> fingerprints (a definition that moved
    # out of the script into a module new since, unchanged, is the same code)
    moved_from: dict[str, set[str]] = {}
    for rel in local:
        if rel in old:
            still = {n.split(" #")[0] for n in units[rel]}
            for name, fps in same_file.get(rel, {}).items():
                if name not in still:
                    moved_from.setdefault(name, set()).update(fps)
    old_local_text = "\n".join(old.get(rel, "") for rel in local)
    changed = {}
    for rel, source in sources.items():
        moved = rel in local and rel not in old and rel != script  # a benchmarks/ module new since the revision
        then = (moved_from if moved else same_file.get(rel, {})) if rel in local else pool
        # a function or class added to a benchmarks/ module (not the script) under a name that neither course_lib
        # nor the script and its benchmarks/ modules used at the revision (so it moved from nowhere)
        added_ok = {name for name in _callables(source) if name not in then and name not in pool
                    and rel != script and rel in old
                    and not re.search(rf"\b{re.escape(name)}\b", old_local_text)} if rel in local else set()
        for name, text in units[rel].items():
            base, fp = name.split(" #")[0], _fingerprint(text)
            # moved, text that names its own file or module means something else there
            if (fp not in then.get(base, set()) and base not in added_ok) or (moved and _WHERE_IT_IS.search(text)):
                changed[f"{rel}::{name}"] = fp
    for rel in data:
        now = (root / rel).read_text() if (root / rel).is_file() else None
        if old.get(rel) != now:
            changed[f"{rel}::<file>"] = "deleted" if now is None else _fingerprint(now)
    return changed


# text tied to the module it is in: its file, its name, its globals (`x.__name__`, an attribute, is not)
_WHERE_IT_IS = re.compile(r"(?<![\w.])(?:__file__|__name__|globals\()|^\s*global\s", re.M)


def _reviewed(path: str, key: str, fingerprint: str) -> bool:
    versions = STILL_VALID.get(path, {}).get("reviewed", {}).get(key, ())
    return fingerprint in ((versions,) if isinstance(versions, str) else versions)


def unexplained_changes(path: str, record: dict, root: Path = ROOT) -> dict[str, str]:
    """changed_since's definitions that STILL_VALID does not list for `path` at their fingerprint now."""
    return {k: fp for k, fp in changed_since(record, root).items() if not _reviewed(path, k, fp)}


def show_changes(path: str) -> None:
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
            where = ([rel] if rel in old else [f for f in local if f in old]) if rel in local else old_files
            before = next((_units(old[f], was_module)[name] for f in where
                           if f in old and name in _units(old[f], was_module)), "")
            now = _units((ROOT / rel).read_text(), _is_module(ROOT))[name]
        status = "reviewed" if _reviewed(path, key, fp) else "NOT REVIEWED"
        print(f"=== {key} {fp} ({status})")
        print("\n".join(difflib.unified_diff(before.splitlines(), now.splitlines(), f"{revision[:8]}", "now",
                                             lineterm="", n=1)) or "(new)")
