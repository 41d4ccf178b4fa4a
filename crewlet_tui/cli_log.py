"""`crewlet log check` and `crewlet log repair`: the log against itself and against the database.

`check` reads every frame and names the first damage (byte offset, seq, what a repair would cost);
it exits 1 when anything is damaged, so a script can watch a home with it. `repair` keeps each log's
longest valid prefix, moves the damaged remainder into a file beside the log, and — only where the
database applied something the kept log does not hold — rebuilds the database from the kept log,
after saying which applied changes that loses. It asks first; `--yes` answers for a script.
"""
from __future__ import annotations

import sys
from contextlib import nullcontext
from typing import TYPE_CHECKING

import typer


from .cli_common import JSON_OPT, console, emit_json, err_console, existing_home, fail, handle_errors
from .sanitize import markup_safe

if TYPE_CHECKING:
    from rich.progress import Progress

    from core.repair import LogReport
# the repair machinery is imported when a command runs (start-up: every command imports this module)

log_app = typer.Typer(help="The ordered log: check it against the database, and repair damage.",
                      no_args_is_help=True)

LOST_LISTED = 20  # lost changes printed before "… and N more" (--json lists them all)


def register(app: typer.Typer) -> None:
    app.add_typer(log_app, name="log")



def _n(n: int, word: str) -> str:
    return f"{n:,} {word}{'' if n == 1 else 's'}"


def _summary(report: LogReport) -> str:
    h = report.health
    if h.damage is not None:
        return f"{report.spec.name} log damaged at byte offset {h.damage.offset:,}: {h.damage}"
    assert h.applied_problem is not None
    return f"{report.spec.name} log and the database disagree: {h.applied_problem}"


def _render(report: LogReport) -> None:
    h = report.health
    name = f"[bold]{markup_safe(report.spec.name)} log[/] {markup_safe(str(report.spec.path))}"
    seqs = f" (seq 1–{h.last_seq:,})" if h.records else ""
    applied = (f"applied through seq {h.applied.seq:,} (byte offset {h.applied.end:,})" if not h.applied.nothing
               else "has applied nothing yet")
    if report.ok:
        console.print(f"{name}: [green]sound[/] — {_n(h.records, 'record')}{seqs}, {h.size:,} bytes; "
                      f"the database {applied}", soft_wrap=True)
        if h.torn_tail:
            console.print(f"  an interrupted append of {h.torn_tail:,} bytes follows, past everything applied: "
                          "the next write cuts it off (not damage)", soft_wrap=True)
        return
    console.print(f"{name}: [red]damaged[/]", soft_wrap=True)
    rows: list[tuple[str, str]] = [
        ("valid prefix", f"{_n(h.records, 'record')}{seqs}, bytes 0–{h.end:,} of {h.size:,}")]
    if h.damage is not None:
        seq = f" (seq {h.damage.seq})" if h.damage.seq is not None else ""
        rows.append(("damage", f"{h.damage.kind} at byte offset {h.damage.offset:,}{seq}: {h.damage.reason}"))
    if h.remainder is not None:
        r = h.remainder
        intact = _n(r.intact, "intact record")
        if r.intact and r.first_seq is not None:
            intact += f" (seq {r.first_seq})" if r.intact == 1 else f" (seq {r.first_seq}…{r.last_seq})"
        rows.append(("past it", f"{r.size:,} bytes holding {intact}: a repair moves them into a file beside the "
                                "log, and they are no longer applied"))
    if h.applied_problem is None:
        disagree = " — within the valid prefix"
    elif h.applied.end > h.end:
        disagree = f" — past the valid prefix (seq {h.last_seq:,}, byte offset {h.end:,})"
    else:
        disagree = f" — {h.applied_problem.reason}"
    rows.append(("database", applied + disagree))
    if report.needs_rebuild:
        lost = report.lost
        rows.append(("a repair", f"rebuilds the database from the valid prefix and loses {_n(len(lost), 'applied change')}"
                                 + (":" if lost else "")))
    else:
        rows.append(("a repair", "cuts the log back to the valid prefix; the database keeps everything it holds"))
    width = max(len(k) for k, _ in rows)
    for key, value in rows:
        console.print(f"  {key:<{width}}  {markup_safe(value)}", soft_wrap=True)
    for change in report.lost[:LOST_LISTED]:
        console.print(f"    {markup_safe(change.line())}", soft_wrap=True)
    if len(report.lost) > LOST_LISTED:
        console.print(f"    … and {len(report.lost) - LOST_LISTED:,} more (--json lists them all)")


@log_app.command("check")
@handle_errors
def log_check(as_json: bool = JSON_OPT) -> None:
    """Read every frame of the log and set it against what the database applied.

    Names the first damage (its byte offset and seq) and what a repair would lose. Exit 0 when
    sound, 1 when damaged."""
    from core.repair import check_home

    home = existing_home()
    if _on_jetstream(home):
        _check_streams(as_json)
        return
    with err_console.status("reading the log…", spinner="dots") if sys.stderr.isatty() and not as_json else nullcontext():
        reports = check_home(home)
    bad = [r for r in reports if not r.ok]
    if as_json:
        emit_json({"home": str(home.root), "ok": not bad, "logs": [r.to_json() for r in reports]})
    else:
        for report in reports:
            _render(report)
        if bad:
            console.print("repair: `crewlet log repair` (it says what it will do and asks first)")
    if bad:
        err_console.print(f"[bold red]crewlet:[/] {markup_safe(_summary(bad[0]))}", soft_wrap=True)
        raise typer.Exit(1)


@log_app.command("repair")
@handle_errors
def log_repair(
    yes: bool = typer.Option(False, "--yes", "-y", help="Repair without asking (for scripts)."),
    as_json: bool = JSON_OPT,
) -> None:
    """Keep the log's longest valid prefix and move the damaged rest into a file beside it.

    Where the database applied something the kept log does not hold, it is rebuilt from the kept
    log (the old file is kept beside it) after saying what is lost. Stop the app and any
    `crewlet worker` on this home first."""
    from core.repair import check_home, repair_home

    home = existing_home()
    if _on_jetstream(home):
        from core.sync.nats_check import REPAIR_REFUSED

        fail(REPAIR_REFUSED, as_json=as_json, payload={"error": "jetstream", "message": REPAIR_REFUSED})
    reports = check_home(home)
    bad = [r for r in reports if not r.ok]
    if not bad:
        if as_json:
            emit_json({"home": str(home.root), "repaired": False, "logs": [r.to_json() for r in reports]})
        else:
            for report in reports:
                _render(report)
            console.print("nothing to repair")
        return
    if not as_json:
        for report in bad:
            _render(report)
    if not yes:
        if as_json or not sys.stdin.isatty():
            fail("a repair changes the home: run it in a terminal to be asked, or pass --yes", as_json=as_json,
                 payload={"error": "confirm", "message": "pass --yes to repair without asking",
                          "logs": [r.to_json() for r in bad]})
        if not typer.confirm("Repair as described?", default=False):
            fail("not repaired: nothing was changed")
    total = sum(r.health.last_seq for r in bad if r.needs_rebuild)
    progress = _Progress(enabled=not as_json and sys.stderr.isatty() and total > 0, total=total)
    try:
        result = repair_home(home, bad, progress=progress)
    finally:
        progress.close()
    after = check_home(home)
    still = [r for r in after if not r.ok]
    if as_json:
        emit_json({"home": str(home.root), "repaired": True, **result.to_json(), "ok": not still,
                   "logs": [r.to_json() for r in after]})
    else:
        for name, (path, moved) in result.moved.items():
            console.print(f"{markup_safe(name)} log: cut back to its valid prefix; {moved:,} bytes moved to "
                          f"{markup_safe(path)}", soft_wrap=True)
        if result.rebuilt:
            console.print(f"database rebuilt from the kept log ({result.applied:,} records replayed); the old one "
                          f"is kept as {markup_safe(result.database_kept_as or '')}", soft_wrap=True)
            console.print("the search index is built again by the next `crewlet worker` pass (or search)")
        for report in after:
            _render(report)
    if still:
        err_console.print(f"[bold red]crewlet:[/] {markup_safe(_summary(still[0]))}", soft_wrap=True)
        raise typer.Exit(1)


def _on_jetstream(home: object) -> bool:
    from core import config as config_mod

    cfg = getattr(home, "config_file")
    return cfg.is_file() and config_mod.load(cfg).log.backend == "jetstream"


def _check_streams(as_json: bool) -> None:
    """`log check` for a company on NATS JetStream: each stream read back and set against the database."""
    from core.node import Node
    from core.sync.nats_check import check_streams

    with Node.open(existing_home(), sync_containers=False, catch_up=False) as node:
        if node.offline is not None:
            fail(node.offline.line(), as_json=as_json, payload={"error": "offline", **node.offline.to_json()})
        with err_console.status("reading the streams…", spinner="dots") if sys.stderr.isatty() and not as_json \
                else nullcontext():
            reports = check_streams(node)
    bad = [r for r in reports if not r.ok]
    if as_json:
        emit_json({"home": str(node.home.root), "ok": not bad, "logs": [r.to_json() for r in reports]})
    else:
        for r in reports:
            console.print(markup_safe(r.line()), soft_wrap=True)
    if bad:
        err_console.print(f"[bold red]crewlet:[/] {markup_safe(bad[0].line())}", soft_wrap=True)
        raise typer.Exit(1)


class _Progress:
    """A progress bar on stderr while a rebuilt database replays the kept log."""

    def __init__(self, *, enabled: bool, total: int) -> None:
        self._bar: Progress | None = None
        self._done = 0
        if enabled:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            self._bar = Progress(TextColumn("[bold]replaying the log"), BarColumn(), MofNCompleteColumn(),
                                 TimeElapsedColumn(), console=err_console, transient=True)
            self._bar.start()
            self._task = self._bar.add_task("replay", total=total)

    def __call__(self, n: int) -> None:
        self._done += n
        if self._bar is not None:
            self._bar.update(self._task, completed=self._done)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None

