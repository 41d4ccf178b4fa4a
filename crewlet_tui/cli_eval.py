"""`crewlet search eval`: measure, against a store's own vectors, whether the two-stage search recovers the
exact ranking (core/evaluate.py).

`crewlet search QUERY` is a command of its own, so `eval` (and `floor`, cli_floor.py) is dispatched by the
search command: when its first word is `eval` the rest is this command's arguments (`crewlet search eval
--help` is its help). To search for the word "eval" alone, put an option first: `crewlet search --mode
hybrid eval`.
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

import typer
from typer.core import TyperCommand

from .cli_common import JSON_OPT, STATE, console, emit_json, err_console, fail, handle_errors
if TYPE_CHECKING:
    import click

eval_app = typer.Typer(add_completion=False)


@eval_app.command("eval")
@handle_errors
def search_eval(
    store: Optional[Path] = typer.Option(None, "--store", metavar="FILE", help="The SQLite file to measure (default: this home's "
                                         "crewlet.db). A copy inside a backup works with nothing stopped."),
    probes: Optional[int] = typer.Option(None, "--probes", min=1, metavar="N", help="Measure what reading N lists would recall "
                                         "instead of the count the index reads now (a narrowed search still reads "
                                         "more from there)."),
    window: Optional[int] = typer.Option(None, "--window", min=1, metavar="BYTES", help="The per-source bound the embedding duty runs "
                                         "at, in bytes, where providers.embeddings lowers it below 8 KiB."),
    as_json: bool = JSON_OPT,
) -> None:
    """Measure whether search by meaning recovers the exact ranking on this corpus's own vectors.

    25 documents sampled from the corpus are each searched with their own vector (never counted as their own answer) and compared with the exact scan's top 150: through the semantic index when there is one, and with the full scan, unfiltered, per source kind and per container, each against the recall floor for the size of the corpus it searches.

    Exit 0 when every shape meets its floor with no document of the exact top ten dropped, 1 when one does not (or there is nothing to measure), 2 for usage."""
    from core.evaluate import evaluate, render  # numpy-heavy: only when this command runs

    from .progress_bars import ProgressBars

    path = store if store is not None else STATE.home.db_file
    bars = ProgressBars(err_console, enabled=not as_json and sys.stderr.isatty())
    try:
        report = evaluate(Path(path).expanduser(), probes=probes, window=window,
                          progress=lambda done, total, label: bars("eval", done, total, label))
    finally:
        bars.close()
    if as_json:
        emit_json(report.to_json())
    else:
        for line in render(report):
            console.print(line, markup=False, highlight=False, soft_wrap=True)
    if not report.passed:
        if as_json:
            raise typer.Exit(1)
        fail("below the floor: " + "; ".join(report.failures))


EVAL_COMMAND: Any = typer.main.get_command(eval_app)


def _subcommands() -> dict[str, Any]:
    from .cli_floor import FLOOR_COMMAND

    return {"eval": EVAL_COMMAND, "floor": FLOOR_COMMAND}


class SearchCommand(TyperCommand):
    """`crewlet search QUERY`, and `crewlet search eval …` / `crewlet search floor …` when the first word
    is `eval` or `floor` (to search for either word alone, put an option first)."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if args[:1] in (["eval"], ["floor"]):
            command = _subcommands()[args[0]]
            # named from the root ("crewlet search eval"), not after the search's own QUERY argument
            sub = command.make_context(f"{ctx.info_name} {args[0]}", list(args[1:]), parent=ctx.parent)
            ctx.meta["crewlet.sub"] = (command, sub)
            return []
        return super().parse_args(ctx, args)

    def invoke(self, ctx: click.Context) -> Any:
        found = ctx.meta.get("crewlet.sub")
        if found is not None:
            command, sub = found
            with sub:
                return command.invoke(sub)
        return super().invoke(ctx)
