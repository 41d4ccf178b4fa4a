"""One style for every CLI command (crewlet_tui/cli_root.py says it): a module-level `app = typer.Typer()` per
command module, commands as module functions, and the helpers modules share public in cli_common.py — no
`_private` name crosses from one CLI module to another. Read with ast, as tests/test_import_graph.py reads
core, so a new module that slips back into another style fails here."""
from __future__ import annotations

import ast
from pathlib import Path

import typer

from crewlet_tui import cli_root

ROOT = Path(__file__).resolve().parent.parent
SURFACE = ROOT / "crewlet_tui"
CLI_MODULES = sorted(SURFACE.glob("cli*.py"))


def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def _imported_module(node: ast.ImportFrom, path: Path) -> str:
    """The dotted module an import names, a relative import resolved against the importing file's package."""
    if node.level == 0:
        return node.module or ""
    package = list(path.relative_to(ROOT).parent.parts)
    base = package[:len(package) - (node.level - 1)]
    return ".".join([*base, *([node.module] if node.module else [])])


def _is_command_decorator(dec: ast.expr) -> bool:
    """`@something.command(...)` (typer's, on an app or a sub-Typer)."""
    call = dec.func if isinstance(dec, ast.Call) else dec
    return isinstance(call, ast.Attribute) and call.attr == "command"


def test_there_are_cli_modules_to_read():
    names = {p.stem for p in CLI_MODULES}
    assert {"cli", "cli_root", "cli_common", "cli_pages", "cli_search"} <= names


def test_no_private_name_crosses_between_cli_modules():
    """Nor from a CLI module into the app's modules: what two surfaces share is public."""
    crossing = []
    for path in sorted(SURFACE.rglob("*.py")):
        for node in ast.walk(_tree(path)):
            if isinstance(node, ast.ImportFrom):
                module = _imported_module(node, path)
                if not module.startswith("crewlet_tui.cli") or module == f"crewlet_tui.{path.stem}":
                    continue
                crossing += [f"{path.name}: from {module} import {a.name}" for a in node.names
                             if a.name.startswith("_") and not a.name.startswith("__")]
            elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and path.stem.startswith("cli"):
                # `cli_search._catch_up(...)` after `from . import cli_search`
                if node.value.id.startswith("cli") and node.attr.startswith("_") and not node.attr.startswith("__"):
                    crossing.append(f"{path.name}: {node.value.id}.{node.attr}")
    assert not crossing, "shared CLI helpers belong, public, in cli_common.py:\n" + "\n".join(crossing)


def test_commands_are_module_functions_and_no_module_registers_closures():
    nested, registers = [], []
    for path in CLI_MODULES:
        tree = _tree(path)
        top = {id(n) for n in tree.body}
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                if node.name == "register":
                    registers.append(f"{path.name}: def register")
                if any(_is_command_decorator(d) for d in node.decorator_list) and id(node) not in top:
                    nested.append(f"{path.name}:{node.lineno} {node.name}")
    assert not registers, registers
    assert not nested, "a command is a module function, decorated at the module's top level:\n" + "\n".join(nested)


def test_every_module_with_commands_declares_its_app_and_the_root_lists_it():
    with_commands = set()
    for path in CLI_MODULES:
        tree = _tree(path)
        decorated = [n for n in tree.body if isinstance(n, ast.FunctionDef)
                     and any(_is_command_decorator(d) for d in n.decorator_list)]
        if not decorated:
            continue
        apps = [n for n in tree.body if isinstance(n, ast.Assign)
                and any(isinstance(t, ast.Name) and t.id == "app" for t in n.targets)]
        declares_app = bool(apps)
        if path.stem in ("cli_eval", "cli_floor"):   # words under `crewlet search`: cli_search.SearchCommand
            continue
        assert declares_app, f"{path.name} has commands but no module-level `app = typer.Typer()`"
        with_commands.add(path.stem)
    listed = {m.__name__.rsplit(".", 1)[1] for m in cli_root.COMMAND_MODULES}
    assert with_commands == listed


def test_every_command_of_the_tree_runs_a_module_function():
    def walk(cmd, path=()):
        yield path, cmd
        for name, sub in (getattr(cmd, "commands", {}) or {}).items():
            yield from walk(sub, (*path, name))

    closures = []
    for path, cmd in walk(typer.main.get_command(cli_root.app)):
        fn = cmd.callback
        while fn is not None and hasattr(fn, "__wrapped__"):
            fn = fn.__wrapped__
        if fn is not None and "<locals>" in fn.__qualname__:
            closures.append(" ".join(path))
    assert not closures, closures


def test_words_under_search_are_its_subcommands_and_an_option_first_makes_them_words(tmp_path):
    """`crewlet search eval|floor …` (cli_search.SearchCommand, a cli_common.WordsOrSubcommand) run their own
    command with its own help; with an option first, the word is what is searched for."""
    from typer.testing import CliRunner

    from crewlet_tui.cli import app

    runner = CliRunner()
    env = {"CREWLET_HOME": None, "CREWLET_AS": None, "COLUMNS": "200"}
    for word, says in (("eval", "Measure whether search by meaning"), ("floor", "The relevance floor")):
        res = runner.invoke(app, ["search", word, "--help"], env=env)
        assert res.exit_code == 0 and f"crewlet search {word}" in res.stdout and says in res.stdout, res.stdout
    # an option first: `eval` is the query, and a home that does not exist is refused in one line as a search is
    res = runner.invoke(app, ["--home", str(tmp_path / "none"), "search", "--mode", "keyword", "eval"], env=env)
    assert res.exit_code == 1 and "no crewlet home" in res.stderr, (res.stdout, res.stderr)
