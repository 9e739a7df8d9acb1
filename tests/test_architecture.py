"""The library's structure: no module imports another that (directly or through others) imports it back,
and the README's layout lists every module in layers that the imports respect."""

from __future__ import annotations

import ast
import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "course_lib"


def module_name(path: Path, package: Path = PACKAGE) -> str:
    """course_lib/core/rl.py -> "core.rl"; course_lib/sandbox/__init__.py -> "sandbox"; course_lib/sandbox/host.py -> "sandbox.host"."""
    parts = path.relative_to(package).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph(package: Path = PACKAGE) -> dict[str, set[str]]:
    """module -> the course_lib modules it imports, at its top or inside any function (subpackages included)."""
    files = {module_name(p, package): p for p in sorted(package.rglob("*.py")) if module_name(p, package)}
    graph: dict[str, set[str]] = {m: set() for m in files}
    for module, path in files.items():
        for node in ast.walk(ast.parse(path.read_text())):
            names: list[str] = []
            if isinstance(node, ast.ImportFrom) and node.module:
                if node.module.startswith("course_lib."):
                    base = node.module.removeprefix("course_lib.")
                    names.append(base)
                    names += [f"{base}.{a.name}" for a in node.names]  # from course_lib.sandbox import host
                elif node.module == "course_lib":
                    names += [a.name for a in node.names]
            elif isinstance(node, ast.Import):
                names += [a.name.removeprefix("course_lib.") for a in node.names if a.name.startswith("course_lib.")]
            graph[module] |= {n for n in names if n in files and n != module}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every import cycle, as the path that closes it (depth-first search)."""
    found, state = [], {}

    def visit(node, path):
        state[node] = "open"
        for nxt in sorted(graph[node]):
            if state.get(nxt) == "open":
                found.append(path[path.index(nxt):] + [nxt])
            elif nxt not in state:
                visit(nxt, path + [nxt])
        state[node] = "done"

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])
    return found


def test_the_cycle_finder_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c", "a"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_course_lib_has_no_import_cycle():
    graph = import_graph()
    assert {"gru.trainer", "gru.teacher", "core.rollout", "lm.llm", "lm.llm_rl", "lm.evaluation", "sandbox",
            "sandbox.host"} <= set(graph)
    assert "gru.teacher" in graph["gru.trainer"] and "core.rollout" in graph["gru.teacher"]  # the scan sees real edges
    assert {"sandbox.host", "sandbox.report"} <= graph["sandbox"] and "sandbox.confine" in graph["sandbox.host"]
    assert cycles(graph) == [], "import cycles: " + "; ".join(" -> ".join(c) for c in cycles(graph))


def readme_layers(readme: Path = PACKAGE.parent / "README.md") -> list[list[str]]:
    """The module names on each line of the README's layout block (continuation lines name none)."""
    block = readme.read_text().split("Inside `course_lib/`", 1)[1].split("```")[1]
    known = {name.split(".")[0] for name in import_graph()}
    layers = []
    for line in block.splitlines():
        names = []
        for word in re.split(r"\s+", line.strip()):
            if word not in known:
                break
            names.append(word)
        if names:
            layers.append(names)
    return layers


def test_the_readme_layout_lists_every_module_in_layers_the_imports_respect():
    layers = readme_layers()
    listed = [name for layer in layers for name in layer]
    modules = {name.split(".")[0] for name in import_graph()}
    assert sorted(listed) == sorted(modules), f"listed twice or missing: {set(modules) ^ set(listed)}"
    line_of = {name: i for i, layer in enumerate(layers) for name in layer}
    upward = [f"{m} -> {d}" for m, deps in import_graph().items() for d in deps
              if line_of[d.split(".")[0]] > line_of[m.split(".")[0]]]
    assert upward == [], "a module imports one listed below it in the README: " + ", ".join(upward)


def _imports_into(graph: dict[str, set[str]], source: str, targets: tuple[str, ...]) -> list[str]:
    """Every edge from a module of package `source` into a module of one of `targets`."""
    return sorted(f"{m} -> {d}" for m, deps in graph.items() if m.split(".")[0] == source
                  for d in deps if d.split(".")[0] in targets)


def test_the_rl_core_imports_neither_policy_and_the_policies_not_each_other():
    graph = import_graph()
    assert {"core.rl", "core.rollout", "gru.actor", "lm.lm_policy"} <= set(graph)
    assert "core.rl" in graph["gru.trainer"] and "core.rl" in graph["lm.llm_rl"]  # both policies use the core
    assert _imports_into(graph, "core", ("gru", "lm", "cli")) == []
    assert _imports_into(graph, "gru", ("lm", "cli")) == []
    assert _imports_into(graph, "lm", ("gru", "cli")) == []


def test_the_finder_of_forbidden_edges_finds_one():
    assert _imports_into({"core.rl": {"gru.models"}, "gru.models": set()}, "core", ("gru",)) == ["core.rl -> gru.models"]


def test_the_library_imports_no_book_tooling():
    offenders = [str(p.relative_to(PACKAGE.parent)) for p in sorted(PACKAGE.rglob("*.py"))
                 for node in ast.walk(ast.parse(p.read_text()))
                 if (isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "book_tools")
                 or (isinstance(node, ast.Import) and any(a.name.split(".")[0] == "book_tools" for a in node.names))]
    assert offenders == []


def test_importing_the_core_loads_no_environment_sandbox_or_policy():
    import subprocess
    import sys
    code = ("import sys\n"
            "import course_lib.core.rl, course_lib.core.samplers, course_lib.core.schedules\n"
            "bad = [m for m in sys.modules if m == 'gymnasium' or m.startswith(('course_lib.sandbox', "
            "'course_lib.gru', 'course_lib.lm', 'transformers'))]\n"
            "print(bad)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=PACKAGE.parent).stdout.strip()
    assert out == "[]", f"importing the RL core loaded {out}"
