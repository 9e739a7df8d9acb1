"""Sizes a reader can hold in their head: no library module over 400 lines, and no function over 60 lines in the
library, the book's tooling or the benchmark scripts, except those listed in LONG with the reason they stay whole."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 60
FOLDERS = ("course_lib", "book_tools", "benchmarks")

# "path:function" -> why it stays whole
LONG = {
    "course_lib/sandbox/worker.py:run_harness":
        "runs untrusted code: every function it needs is bound to a local name before the code runs (the code may "
        "replace builtins, os.write or the module's globals), so its steps cannot move to other functions",
}


def long_functions(root: Path = ROOT) -> dict[str, int]:
    """"path:function" -> lines, of every function (methods and nested functions too) over MAX_FUNCTION_LINES."""
    found = {}
    for folder in FOLDERS:
        for path in sorted((root / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    lines = node.end_lineno - node.lineno + 1
                    if lines > MAX_FUNCTION_LINES:
                        found[f"{path.relative_to(root)}:{node.name}"] = lines
    return found


def test_no_library_module_is_over_400_lines():
    long = {str(p.relative_to(ROOT)): n for p in sorted((ROOT / "course_lib").rglob("*.py"))
            if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES}
    assert long == {}, f"split these modules (at most {MAX_MODULE_LINES} lines): {long}"


def test_no_function_is_over_60_lines_unless_listed_with_its_reason():
    found = long_functions()
    unlisted = {name: n for name, n in found.items() if name not in LONG}
    assert unlisted == {}, (f"split these functions (at most {MAX_FUNCTION_LINES} lines) or list them in LONG with "
                            f"the reason they stay whole: {unlisted}")
    stale = sorted(set(LONG) - set(found))
    assert stale == [], f"LONG lists functions that are not over {MAX_FUNCTION_LINES} lines (any more): {stale}"


def test_the_size_check_sees_a_long_function(tmp_path):
    (tmp_path / "course_lib").mkdir()
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_FUNCTION_LINES))
    (tmp_path / "course_lib" / "m.py").write_text(f"def f():\n{body}\n\n\ndef g():\n    return 1\n")
    assert long_functions(tmp_path) == {"course_lib/m.py:f": MAX_FUNCTION_LINES + 1}
