"""`crewlet search eval`: measure, against a store's own vectors, whether the two-stage search recovers the
exact ranking (core/evaluate.py).

`crewlet search QUERY` is a command of its own, so `eval` (and `floor`, cli_floor.py) is dispatched by the
search command (cli_search.SearchCommand, a cli_common.WordsOrSubcommand): when its first word is `eval` the
rest is this command's arguments (`crewlet search eval --help` is its help). To search for the word "eval"
alone, put an option first: `crewlet search --mode hybrid eval`.
"""
from __future__ import annotations

import sys
from pathlib import Path

import typer

from .cli_common import JSON_OPT, STATE, console, emit_json, err_console, fail, handle_errors

eval_app = typer.Typer(add_completion=False)     # `crewlet search eval`: its one command


@eval_app.command("eval")
@handle_errors
def search_eval(
    store: Path | None = typer.Option(None, "--store", metavar="FILE", help="The SQLite file to measure (default: this home's "
                                         "crewlet.db). A copy inside a backup works with nothing stopped."),
    probes: int | None = typer.Option(None, "--probes", min=1, metavar="N", help="Measure what reading N lists would recall "
                                         "instead of the count the index reads now (a narrowed search still reads "
                                         "more from there)."),
    window: int | None = typer.Option(None, "--window", min=1, metavar="BYTES", help="The per-source bound the embedding duty runs "
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
