"""`crewlet log check` and `crewlet log repair`: the log against itself and against the database.

`check` reads every frame, stepping past damage to the next valid frame, and names each damaged place
(byte offset, the seqs that stood there, how many records a repair would lose there: none for a duplicated
frame, one for a flipped bit unless a database gives it back); it exits 1 when anything is damaged, so a
script can watch a home with it. `repair` writes the log anew keeping every intact record, gives back what a
database that applied a lost record still holds, tombstones the rest, and keeps the damaged file whole beside
the log. A database that applied a record the repaired log lost is kept as it is (it reads; writes are refused),
with what that costs named — the record, the later changes it would refuse, the pages with their revisions
and comments —; a second repair rebuilds it from the log. It asks first; `--yes` answers for a script.
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

    from core.paths import Home

    from core.repair import LogReport
# the repair machinery is imported when a command runs (start-up: every command imports this module)

app = typer.Typer()             # this module's commands (cli_root adds them to `crewlet`)
log_app = typer.Typer(help="The ordered log: check it against the database, and repair damage.",
                      no_args_is_help=True)
app.add_typer(log_app, name="log")

LOST_LISTED = 20  # lost changes printed before "… and N more" (--json lists them all)


def _n(n: int, word: str) -> str:
    return f"{n:,} {word}{'' if n == 1 else 's'}"


def _summary(report: LogReport) -> str:
    h = report.health
    if h.damage is not None:
        cost = report.records_lost
        return (f"{report.spec.name} log damaged past record {h.damage.good_through if h.damage.good_through is not None else '?'} "
                f"at byte offset {h.damage.offset:,} ({len(h.spots)} damaged place{'' if len(h.spots) == 1 else 's'}; "
                f"a repair loses {_n(cost, 'record')}): {h.damage}")
    if report.held:
        c = report.held[0]
        return f"{report.spec.name} log: this database holds record {c.seq} ({c.type} {c.what}) that a repair lost"
    assert h.applied_problem is not None
    return f"{report.spec.name} log and the database disagree: {h.applied_problem}"


def _render(report: LogReport) -> None:
    h = report.health
    name = f"[bold]{markup_safe(report.spec.name)} log[/] {markup_safe(str(report.spec.path))}"
    applied = (f"applied through seq {h.applied.seq:,} (byte offset {h.applied.end:,})" if not h.applied.nothing
               else "has applied nothing yet")
    if report.ok:
        seqs = f" (seq 1–{h.last_seq:,})" if h.records else ""
        console.print(f"{name}: [green]sound[/] — {_n(h.records, 'record')}{seqs}, {h.size:,} bytes; "
                      f"the database {applied}", soft_wrap=True)
        if h.torn_tail:
            console.print(f"  an interrupted append of {h.torn_tail:,} bytes follows, past everything applied: "
                          "the next write cuts it off (not damage)", soft_wrap=True)
        return
    console.print(f"{name}: [red]damaged[/]", soft_wrap=True)
    rows: list[tuple[str, str]] = [
        ("intact", f"{_n(h.records, 'record')} of seq 1–{h.last_seq:,}, kept as they are ({h.size:,} bytes in all)")]
    details: list[tuple[int, str]] = []   # (after row index, line)
    for i, spot in enumerate(h.spots, 1):
        lost, given = report.spot_cost(spot)
        cost = f"a repair loses {_n(lost, 'record')}" + (f", gives back {given}" if given else "")
        rows.append((f"damage {i}" if len(h.spots) > 1 else "damage", f"{spot.describe()} — {cost}"))
        for seq in spot.seqs:
            rw = report.rewrites.get(seq)
            if rw is not None:
                details.append((len(rows) - 1, rw.line()))
    if h.applied_problem is None and h.applied.seq in set(h.lost_seqs):
        rewrite = report.rewrites.get(h.applied.seq)
        disagree = (" — its last record is damaged in the log"
                    + ("; the repair gives it back" if rewrite is not None and not rewrite.lost else ""))
    elif h.applied_problem is None:
        disagree = " — it agrees with the log"
    else:
        disagree = f" — {h.applied_problem.reason}"
    rows.append(("database", applied + disagree))
    for c in report.held:
        rows.append(("held", f"this database holds {c.line()}, which an earlier repair lost from the log"))
    for other in report.others:
        rows.append(("other node", other))
    total = report.records_lost
    if report.needs_rebuild:
        changes = report.lost + report.held
        rows.append(("a repair", (f"writes the log anew keeping every intact record (losing {_n(total, 'record')}), " if
                                  report.needs_cut else "")
                     + f"rebuilds the database from it and loses {_n(len(changes), 'applied change')}"
                     + (":" if changes else "")))
    elif report.keeps_lost:
        cascade = (f", and {_n(len(report.cascade), 'later change')} it applied after them, which the repaired log "
                   "refuses" if report.cascade else "")
        rows.append(("a repair", f"writes the log anew keeping every intact record, losing {_n(total, 'record')}; "
                                 f"this database is kept as it is — it holds {_n(len(report.lost), 'applied change')} "
                                 f"the repaired log loses{cascade}:"))
    else:
        rows.append(("a repair", f"writes the log anew keeping every intact record, losing {_n(total, 'record')}; "
                                 "the database keeps everything it holds"))
    width = max(len(k) for k, _ in rows)
    for n, (key, value) in enumerate(rows):
        console.print(f"  {key:<{width}}  {markup_safe(value)}", soft_wrap=True)
        for after, line in details:
            if after == n:
                console.print(f"  {'':<{width}}    {markup_safe(line)}", soft_wrap=True)
    changes = report.lost + report.held + report.cascade
    for change in changes[:LOST_LISTED]:
        console.print(f"    {markup_safe(change.line())}", soft_wrap=True)
    if len(changes) > LOST_LISTED:
        console.print(f"    … and {len(changes) - LOST_LISTED:,} more (--json lists them all)")
    for page in report.pages_lost[:LOST_LISTED]:
        console.print(f"    lost with them: {markup_safe(page)}", soft_wrap=True)
    if report.keeps_lost:
        console.print("    it reads as it is and refuses writes until a second `crewlet log repair` rebuilds it from the "
                      "log, losing them: copy out what you need first", soft_wrap=True)


@log_app.command("check")
@handle_errors
def log_check(as_json: bool = JSON_OPT) -> None:
    """Read every frame of the log and set it against what the database applied.

    Names each damaged place (its byte offset and seqs) and how many records a repair would lose there. Exit 0 when sound, 1 when damaged."""
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
    """Write a damaged log anew keeping every intact record; give back lost ones a database still holds.

    The damaged file is kept whole beside the log. A database that applied a record the repaired log lost is kept as it is, holding it, with what that costs said; run the repair again to rebuild it from the log (the old file is kept beside it). Which other nodes hold such records is said first. Stop the app and any `crewlet worker` on this home first."""
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
    others = [o for r in bad for o in r.others]
    if not yes:
        theirs = (f" — and {len(others)} other node{'' if len(others) == 1 else 's'} hold records it loses "
                  f"({others[0].split(' applied')[0]}{', …' if len(others) > 1 else ''})" if others else "")
        if as_json or not sys.stdin.isatty():
            fail(f"a repair changes the home{theirs}: run it in a terminal to be asked, or pass --yes", as_json=as_json,
                 payload={"error": "confirm", "message": "pass --yes to repair without asking",
                          "other_nodes": others, "logs": [r.to_json() for r in bad]})
        question = "Repair as described?" if not others else (
            "Repair as described? Other nodes hold records it loses (named above); they are told at their next open.")
        if not typer.confirm(question, default=False):
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
            console.print(f"{markup_safe(name)} log: written anew keeping every intact record; the damaged file "
                          f"({moved:,} bytes) is kept as {markup_safe(path)}", soft_wrap=True)
        for rw in result.rewrites:
            console.print(f"  {markup_safe(rw.line())}", soft_wrap=True)
        console.print(f"records lost: {result.records_lost:,}")
        if result.kept:
            console.print(f"this database is kept as it is: it holds {_n(len(result.kept), 'change')} the repaired log "
                          f"lost" + (f" (and {_n(len(result.refused_after), 'later change')} it would refuse)"
                                     if result.refused_after else "")
                          + " — read or copy what you need (writes are refused), then `crewlet log repair` rebuilds it "
                          "from the log, losing them", soft_wrap=True)
        if result.rebuilt:
            console.print(f"database rebuilt from the repaired log ({result.applied:,} records replayed); the old one "
                          f"is kept as {markup_safe(result.database_kept_as or '')}", soft_wrap=True)
            console.print("the search index is built again by the next `crewlet worker` pass (or search)")
        for report in after:
            _render(report)
    if still:
        err_console.print(f"[bold red]crewlet:[/] {markup_safe(_summary(still[0]))}", soft_wrap=True)
        raise typer.Exit(1)


def _on_jetstream(home: Home) -> bool:
    from core import config as config_mod

    cfg = home.config_file
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

