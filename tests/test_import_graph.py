"""The house's import graph, read from the code with `ast` (every import counts: at the top, inside a
function, under TYPE_CHECKING): no circle between the packages of `core`, and no arrow from a lower floor
to a higher one but the ones docs/architecture.md names and justifies ("The floors").

A package of `core` is its first name below `core` (`core/search/ivf/kmeans.py` is `search`, `core/node.py`
is `node`); imports inside one package are its own business. A feature's settings module
(`core/<feature>/settings.py`, its section of company.toml) is a room of its own, `<feature>.settings`, on
floor 1 whatever its feature's floor: `config` (floor 2) composes every section, so a section imports the
kit (`settings`, floor 0) and never its feature's higher rooms.
"""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CORE = ROOT / "core"

# the floors, lowest first: a package imports packages on its own floor or below
FLOORS = [
    {"errors", "durable", "clock", "text", "store", "process", "settings", "http_client", "stats", "leftovers"},
    {"paths", "log", "embed", "chat", "diagnostics", "leases", "repos", "sections"},
    {"config"},
    {"replica"},
    {"pages", "vectors", "recover", "repaired"},
    {"node"},
    {"repair", "search", "agents"},
    {"sync", "importer", "evaluate", "remote", "bank"},
    {"duties", "knowledge"},
    {"mcp", "ask"},
]
# the arrows that run up a floor, each named and justified in docs/architecture.md (at most two)
UPWARD: dict[tuple[str, str], str] = {}


def package_of(module: str) -> str | None:
    parts = module.split(".")
    if parts[0] != "core" or len(parts) < 2:
        return None
    name = parts[1]
    return name if (CORE / name).is_dir() or (CORE / f"{name}.py").is_file() else None


def module_name(path: Path) -> tuple[str, list[str]]:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    package = parts[:-1] if parts[-1] != "__init__" else parts[:-1]
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts), package


def imported(path: Path) -> list[tuple[str, int]]:
    """Every module `path` imports, as absolute names (with the names a `from` imports, which may be
    modules), and the line."""
    _, package = module_name(path)
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            out += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[:len(package) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            out.append((module, node.lineno))
            out += [(f"{module}.{alias.name}", node.lineno) for alias in node.names]
    return out


def package_graph() -> dict[str, dict[str, list[str]]]:
    """package -> package it imports -> where (file:line)."""
    graph: dict[str, dict[str, list[str]]] = {}
    for path in sorted(CORE.rglob("*.py")):
        name, _ = module_name(path)
        source = package_of(name) or "__init__"
        for module, line in imported(path):
            target = package_of(module)
            if target and target != source:
                graph.setdefault(source, {}).setdefault(target, []).append(f"{path.relative_to(ROOT)}:{line}")
    return graph


def circles(graph: dict[str, dict[str, list[str]]]) -> list[list[str]]:
    """The strongly connected components of more than one package (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            part = []
            while True:
                w = stack.pop()
                on.discard(w)
                part.append(w)
                if w == v:
                    break
            if len(part) > 1:
                found.append(sorted(part))

    for v in sorted(set(graph) | {w for targets in graph.values() for w in targets}):
        if v not in index:
            visit(v)
    return found


def test_no_circle_between_core_packages() -> None:
    graph = package_graph()
    found = circles(graph)
    said = [f"{a} -> {b} ({', '.join(graph[a][b][:3])})" for part in found for a in part for b in graph.get(a, {})
            if b in part]
    assert not found, "circles between core packages: " + "; ".join(said)


def test_the_circle_check_sees_a_deferred_import(tmp_path) -> None:
    """A circle made of one import at the top and one inside a function is a circle."""
    graph = {"a": {"b": ["core/a.py:1"]}, "b": {"a": ["core/b.py:9"]}, "c": {"a": ["core/c.py:2"]}}
    assert circles(graph) == [["a", "b"]]
    deferred = tmp_path / "m.py"
    deferred.write_text("def f():\n    from core.node import Node\n", encoding="utf-8")
    assert [m for m, _ in ast_imports(deferred)] == ["core.node", "core.node.Node"]


def ast_imports(path: Path) -> list[tuple[str, int]]:
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            out.append((node.module, node.lineno))
            out += [(f"{node.module}.{a.name}", node.lineno) for a in node.names]
    return out


def test_every_arrow_runs_down_or_level_but_the_named_ones() -> None:
    floor = {name: i for i, names in enumerate(FLOORS) for name in names}
    graph = package_graph()
    upward = {(a, b): where for a, targets in graph.items() for b, where in targets.items()
              if a in floor and b in floor and floor[b] > floor[a]}
    unnamed = {k: v for k, v in upward.items() if k not in UPWARD}
    assert not unnamed, "arrows up a floor: " + "; ".join(f"{a} -> {b} ({', '.join(w[:3])})"
                                                           for (a, b), w in unnamed.items())
    assert len(UPWARD) <= 2
    doc = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    for a, b in UPWARD:
        assert f"`{a}` → `{b}`" in doc, f"docs/architecture.md does not name the arrow {a} -> {b}"


def test_the_sections_stand_on_floor_one_and_import_only_the_kit() -> None:
    """company.toml's sections (core/sections/) stand below config, which composes them, and below the features
    that read them, importing only floor 0: config imports no feature's package, so no circle runs through it."""
    assert {f"{s}.py" for s in ("embed", "chat", "log", "remote", "pages", "repos", "bank")} <= \
        {p.name for p in (CORE / "sections").glob("*.py")}
    assert not list(CORE.glob("*/settings.py")), "a section belongs in core/sections/, below config"
    graph = package_graph()
    assert set(graph.get("sections", {})) <= set(FLOORS[0]), graph.get("sections")
    assert set(graph.get("config", {})) <= set(FLOORS[0]) | set(FLOORS[1]), graph.get("config")


def test_every_package_has_a_floor() -> None:
    """A new package of core is given its floor here (and in docs/architecture.md), not left out."""
    named = set().union(*FLOORS)
    packages = {p.name for p in CORE.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    packages |= {p.stem for p in CORE.glob("*.py") if p.stem != "__init__"}
    assert packages <= named, f"core packages on no floor: {sorted(packages - named)}"
