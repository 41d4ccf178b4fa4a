"""`crewlet worker`: the node's background duties (core/duties), driven from a terminal.

`--once` runs every duty until none has anything left to do, then exits; without it the runner ticks
until Ctrl-C. `--status` reads what each duty's last pass left (from any process: the app's worker
included) without running anything.
"""
from __future__ import annotations

import os
import sys
import threading
from datetime import datetime
from typing import TYPE_CHECKING

import typer

from .cli_common import (JSON_OPT, console, damage_json, damage_line, emit_json, fail, handle_errors, open_node, warn,
                         when)
from .sanitize import markup_safe as escape

if TYPE_CHECKING:
    from core.duties.runner import DutyReport

    from .progress_bars import ProgressBars
    from core.node import Node
# the duties and the runner are imported when the command runs (start-up: every command imports this module)

app = typer.Typer()             # this module's top-level commands (cli_root adds them to `crewlet`)
LABEL = "crewlet worker"   # who holds the duties' leases, as another process says it


@app.command()
@handle_errors
def worker(
    once: bool = typer.Option(False, "--once", help="Run every duty until none has anything left to do, then exit."),
    interval: float = typer.Option(2.0, "--interval", min=0.1, metavar="SECONDS", help="Seconds between keyword-index passes."),
    status: bool = typer.Option(False, "--status", help="Show each duty's last pass and who runs it; run nothing."),
    as_json: bool = JSON_OPT,
) -> None:
    """Run the background duties: apply the logs, index, reap the trash, embed, train the semantic index.

    One process runs each duty at a time (a lease): while the app is open on this home, its own background worker holds them and this command says so."""
    from core.duties.roster import run_duties

    from .progress_bars import ProgressBars

    from core.knowledge import remote_site

    with open_node() as node:
        if status:
            _show_status(node, as_json)
            return
        site = remote_site(node.company)
        knowledge = {"backend": site.backend, "url": site.url} if site is not None else None
        if site is not None and not as_json:   # default_duties runs the apply and diary-fill duties there
            console.print(escape(f"this company's knowledge lives in {site.where}, read live: the worker applies "
                                 "the log (it carries agents' reads) and fills the agents' diaries, and keeps no "
                                 "local copy of the knowledge to index, embed or reap"), soft_wrap=True)
        bars = ProgressBars(console, enabled=not as_json and sys.stdout.isatty())
        try:
            if once:
                try:
                    # --once is waited for: the local model embeds on every core (core/embed/local.py runs a
                    # request's runs side by side, the same vectors as one thread); the loop keeps half for the rest
                    reports = run_duties(node, label=LABEL, once=True, index_interval_s=interval, progress=bars,
                                         embed_threads=os.cpu_count() or 1)
                except KeyboardInterrupt:
                    bars.close()
                    fail("worker stopped: what its passes finished is kept, and `crewlet worker --once` "
                         "carries on from there", code=130)
                bars.close()
                damage = node.damage
                if as_json:
                    emit_json({"duties": [r.to_json() for r in reports], "log_damage": damage_json(damage),
                               "knowledge": knowledge})
                else:
                    for line in _summary(reports):
                        console.print(escape(line), soft_wrap=True)
                if damage is not None:
                    # the duties that need no sound log ran; the worker did not do its job: exit 1, one line
                    fail(damage_line(damage))
                return
            _loop(node, interval, bars, as_json)
        finally:
            bars.close()


def _summary(reports: list[DutyReport]) -> list[str]:
    """One line per duty: its last report, and how many passes it took."""
    last: dict[str, DutyReport] = {}
    passes: dict[str, int] = {}
    for r in reports:
        last[r.duty] = r
        passes[r.duty] = passes.get(r.duty, 0) + (1 if r.ran else 0)
    out = []
    for name, r in last.items():
        line = r.line()
        if passes[name] > 1:
            line += f" ({passes[name]} passes)"
        out.append(line)
    return out


def _loop(node: Node, interval: float, bars: ProgressBars, as_json: bool) -> None:
    from core.duties.roster import run_duties

    console.print(f"[dim]crewlet worker on {escape(str(node.home.root))} — Ctrl-C stops it[/]")
    stop = threading.Event()
    if node.damage is not None:
        warn(damage_line(node.damage))
    said: dict[str, str] = {}   # each duty's last line: the same failure is said once, not every tick

    def show(report: DutyReport) -> None:
        worked = bool(report.result and report.result.worked)
        if not (worked or report.error or (not report.ran and report.skipped)):
            return
        line = report.line()
        if not worked and said.get(report.duty) == line:
            return
        said[report.duty] = line
        stamp = datetime.now().strftime("%H:%M:%S")
        if as_json:
            emit_json({"at": stamp} | report.to_json())
        else:
            bars.close()
            console.print(f"[dim]{stamp}[/] {escape(report.line())}", soft_wrap=True)

    try:   # another process or node appending wakes the duties at once
        run_duties(node, label=LABEL, stop=stop, index_interval_s=interval, progress=bars, on_report=show)
    except KeyboardInterrupt:
        stop.set()
        console.print("worker stopped")


def _show_status(node: Node, as_json: bool) -> None:
    from core.duties.runner import duty_records

    records = duty_records(node)
    if as_json:
        emit_json({"duties": [r.to_json() for r in records.values()]})
        return
    if not records:
        console.print("no duty has run on this home yet — `crewlet worker --once` runs them")
        return
    width = max(len(name) for name in records)
    for name, r in sorted(records.items()):
        last = f"last pass {when(r.last_run_at)} by {r.holder}" if r.last_run_at else "never run"
        what = f"[red]failed: {escape(r.last_error)}[/]" if r.last_error else escape(r.last_summary or "—")
        console.print(f"{name:<{width}}  {what}  [dim]{escape(last)}[/]", soft_wrap=True)
