"""The library's structure: no module imports another that (directly or through others) imports it back,
and the README's layout lists every module in layers that the imports respect."""

from __future__ import annotations

import ast
import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "course_lib"


def module_name(path: Path, package: Path = PACKAGE) -> str:
    """course_lib/rl.py -> "rl"; course_lib/sandbox/__init__.py -> "sandbox"; course_lib/sandbox/host.py -> "sandbox.host"."""
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
    assert {"trainer", "teacher", "rollout", "llm", "llm_rl", "evaluation", "sandbox", "sandbox.host"} <= set(graph)
    assert "teacher" in graph["trainer"] and "rollout" in graph["teacher"]  # the scan sees real edges
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
