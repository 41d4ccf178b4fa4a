"""The `crewlet` command (the console script's entry point). With no subcommand it opens the app.

Start-up is paid by every command line, so:

- the app's own command line (`crewlet`, with at most `--home` and `--as`) runs the app without typer and
  the command modules: the app's first screen is what that person waits for;
- every other line goes to the typer application (cli_root.py), whose command modules import the engine
  inside the commands (see cli_common);
- a command that does not open the app defers asyncio: Whoosh imports it at the top of its index module
  for async helpers a command never calls — a fifth of a keyword search's imports.

`app` (the typer application) stays importable from here for tests and scripts.
"""
from __future__ import annotations

import gc
import importlib.util
import os
import sys
import threading
import types
from typing import Any

APP_COMMANDS = {None, "open"}           # what runs the Textual app (on asyncio): nothing deferred for it
GLOBAL_OPTIONS = {"--home": "CREWLET_HOME", "--as": "CREWLET_AS"}


def _globals_only(argv: list[str]) -> dict[str, str] | None:
    """The global options' values when the command line holds nothing else (the app's own line), else
    None. Like typer: an option given wins over its environment variable."""
    values = {opt: os.environ[env] for opt, env in GLOBAL_OPTIONS.items() if os.environ.get(env)}
    i = 0
    while i < len(argv):
        arg = argv[i]
        name, eq, value = arg.partition("=")
        if name not in GLOBAL_OPTIONS:
            return None
        if not eq:
            if i + 1 >= len(argv):
                return None          # an option without its value: typer's usage error says so
            value = argv[i + 1]
            i += 1
        values[name] = value
        i += 1
    return values


def _command(argv: list[str]) -> str | None:
    """The subcommand named on the command line (None: the app), past the global options."""
    skip = False
    for arg in argv:
        if skip:
            skip = False
        elif arg in GLOBAL_OPTIONS:
            skip = True
        elif not arg.startswith("-"):
            return arg
    return None


class _Deferred(types.ModuleType):
    """A module whose code runs the first time one of its attributes is read. Its import attributes
    (`__spec__`, `__path__`, …) are set up front, so a later `import asyncio` — which reads `__spec__` —
    does not run it (importlib's LazyLoader would, on this Python)."""

    _lock = threading.Lock()

    def __getattr__(self, name: str) -> Any:
        with _Deferred._lock:
            if type(self) is _Deferred:
                # from here on an ordinary module, mid-import included (the class changes on purpose: no type
                # says so)
                self.__class__ = types.ModuleType  # type: ignore[assignment]
                spec = self.__spec__
                assert spec is not None and spec.loader is not None   # set up front, with the module
                spec.loader.exec_module(self)  # the real module's code, into this very object
        return getattr(self, name)


def defer_asyncio() -> None:
    """Put a deferred asyncio in sys.modules: its code (a fifth of a keyword search's imports) runs,
    whole and unchanged, the first time anything reads one of its attributes."""
    if "asyncio" in sys.modules:
        return
    spec = importlib.util.find_spec("asyncio")
    if spec is None or spec.loader is None:  # pragma: no cover - a Python without asyncio
        return
    module = importlib.util.module_from_spec(spec)
    module.__class__ = _Deferred
    sys.modules["asyncio"] = module


def _searches_eval(argv: list[str]) -> bool:
    """`crewlet search eval …`: the recall measurement, whose matrix products use every core."""
    words = [arg for i, arg in enumerate(argv)
             if not arg.startswith("-") and (i == 0 or argv[i - 1] not in GLOBAL_OPTIONS)]
    return words[:2] == ["search", "eval"]


def _ranks_by_meaning(argv: list[str]) -> bool:
    """Will this `crewlet search` line embed its question (hybrid, the default, or semantic)? Read ahead of
    the typer parse, as a hint only: a wrong guess costs a few milliseconds of import, never an answer."""
    rest = argv[argv.index("search") + 1:] if "search" in argv else []
    if rest[:1] and rest[0] in ("eval", "floor"):
        return False
    for i, arg in enumerate(rest):
        if arg == "--":
            break
        if arg in ("--help", "-h"):
            return False
        value = None
        if arg in ("--mode", "-m"):
            value = rest[i + 1] if i + 1 < len(rest) else None
        elif arg.startswith("--mode="):
            value = arg.partition("=")[2]
        elif arg.startswith("-m") and not arg.startswith("--"):
            value = arg[2:]
        if value is not None and value.strip().lower() == "keyword":
            return False
    return True


def one_blas_thread() -> None:
    """One OpenBLAS thread for a one-shot search (unless the environment says otherwise). numpy starts
    OpenBLAS's thread pool when it is imported — one thread per core, each allocating its buffers —
    which took ~50 ms of a keyword search's ~0.3 s on a busy 2-core machine; the one matrix product a
    search may do (a query vector against the candidates) is too small to gain from it."""
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


def one_question() -> None:
    """A one-shot search that embeds its question embeds that one: its model session opens without
    onnxruntime's prepacking, ~45 ms of CPU repaid only over many runs (core/embed/local.py,
    one_question_process). Set before anything loads the model (onnxruntime and the tokenizer load on first
    use, not with the module)."""
    from core.embed import local

    local.one_question_process()


def run_app_directly(values: dict[str, str]) -> None:
    """`crewlet` alone: the app on the home, as the typer callback opens it.

    The cyclic garbage collector is paused from here to the first screen painted (the app turns it
    back on, launch.run_app at the latest): the launch allocates the objects of Textual's and
    crewlet's imports, the stylesheet and the first screen, and little of it is garbage; the
    collections it set off, a full one among them, were about a tenth of the launch (bench/startup.py)."""
    gc.disable()
    from core.paths import resolve_home

    try:
        home = resolve_home(values.get("--home"))
        # the home opens (and its spaces are listed) first; then Textual and the app load (opening.py)
        opening = None
        if home.exists():
            from .opening import Opening

            opening = Opening(home, values.get("--as"))
        from .launch import run_app

        run_app(home, actor=values.get("--as"), opening=opening)
    except Exception as exc:
        # the one line and exit code the typer path gives: its error handling, imported only on the way out
        import typer

        from .cli_common import STATE, handle_errors

        STATE.home_arg = values.get("--home")   # an error without a file name is told against this home
        error = exc

        def again() -> None:
            raise error

        try:
            handle_errors(again)()
        except typer.Exit as done:
            raise SystemExit(done.exit_code) from None
        raise
    finally:
        gc.enable()


def main() -> None:
    argv = sys.argv[1:]
    values = _globals_only(argv)
    if values is not None:
        run_app_directly(values)
        return
    command = _command(argv)
    if command not in APP_COMMANDS:
        defer_asyncio()
    if command == "search" and not _searches_eval(argv):
        one_blas_thread()
        if _ranks_by_meaning(argv):
            one_question()
    from .cli_root import app as typer_app

    _closed_pipe_is_no_failure()
    try:
        typer_app()
    except SystemExit as done:
        if done.code == 1 and type(sys.stdout).__name__ == "PacifyFlushWrapper":
            # typer met the closed pipe itself (its EPIPE branch wraps stdout in PacifyFlushWrapper, then exits 1)
            from .cli_common import closed_pipe

            closed_pipe()
        raise


def _closed_pipe_is_no_failure() -> None:
    """`crewlet --help | head -1`: rich (typer's help, every console of ours) exits 1 when stdout's reader has
    gone, by its `Console.on_broken_pipe` hook; the reader going away is no failure, said as every command says it
    (cli_common.closed_pipe: exit 0, quietly)."""
    from rich.console import Console

    from .cli_common import closed_pipe

    def on_broken_pipe(self: Console) -> None:
        closed_pipe()

    Console.on_broken_pipe = on_broken_pipe  # type: ignore[method-assign]


def __getattr__(name: str) -> Any:
    if name == "app":  # the typer application, built on first use
        from .cli_root import app as typer_app

        return typer_app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


if __name__ == "__main__":
    main()
