"""`crewlet entry recheck`: the recheck duty (core/duties/entry_recheck.py) run now on every configured repository,
through the one runner — its lease (a worker running it elsewhere is said, not raced), its cursor — with a
progress bar and a summary of what the pass found (docs/entries.md, "The recheck duty")."""
from __future__ import annotations

import sys
import threading
from typing import TYPE_CHECKING, Any

import typer

from .cli_common import JSON_OPT, console, emit_json, fail, handle_errors, open_node, refuse_elsewhere
from .cli_entries import entry_app
from .fmt import plural
from .sanitize import markup_safe as escape

if TYPE_CHECKING:
    from core.duties.runner import DutyReport

app = typer.Typer()        # this module's own commands: none at the top; `recheck` joins the `entry` group
LABEL = "crewlet entry recheck"     # who holds the duty's lease, as another process says it

# the summary's rows, label first (a count beside a label needs no plural): (count key, label)
ROWS = (("held", "held where they were"), ("reanchored", "re-anchored (lines shifted)"),
        ("followed", "followed a renamed file"), ("moved", "moved elsewhere in the file"),
        ("changed", "changed (lines rewritten)"), ("gone", "gone (file deleted)"),
        ("disputed", "entries disputed by the model"), ("needs_person", "waiting for a person"),
        ("not_read", "not read (repository unreadable)"))


@entry_app.command("recheck")
@handle_errors
def recheck_cmd(as_json: bool = JSON_OPT) -> None:
    r"""Recheck every entry's code citations against its repository's branch head now.

    Shifted lines are re-anchored, a renamed file followed, lines moved elsewhere in the file found again; rewritten lines are judged by the chat model of \[providers.llm] (contradicted: the entry is DISPUTED), else a person is asked: `crewlet entries --needs-person` lists them.

    The recheck duty of `crewlet worker` does the same on each repository's poll_interval."""
    from core.duties.entry_recheck import EntryRecheckDuty
    from core.duties.runner import DutyRunner

    from .progress_bars import ProgressBars

    with open_node() as node:
        refuse_elsewhere(node, "entries")
        duty = EntryRecheckDuty(node, force=True)
        runner = DutyRunner(node, [duty], label=LABEL)
        bars = ProgressBars(console, enabled=not as_json and sys.stdout.isatty())
        counts: dict[str, int] = {}
        said: list[str] = []
        disputed: list[str] = []
        stop = threading.Event()

        def progress(_duty: str, done: int, total: int, _label: str) -> None:
            bars("recheck", done, total, "rechecking citations")

        try:
            while True:
                report = runner.run_one(duty, stop=stop, progress=progress)
                if not report.ran or report.error or report.result is None:
                    break
                for key, n in report.result.counts.items():
                    counts[key] = counts.get(key, 0) + n
                said += [line for line in report.result.status.get("said", []) if line not in said]
                disputed += report.result.status.get("disputed", [])
                if not report.more:      # the model's judgments past one pass's budget: another pass at once
                    break
        except KeyboardInterrupt:
            bars.close()
            fail("recheck stopped: what it wrote is kept, and the next recheck carries on from there", code=130)
        finally:
            bars.close()
            runner.close()
        _say(report, counts, said, disputed, as_json)


def _say(report: DutyReport, counts: dict[str, int], said: list[str], disputed: list[str], as_json: bool) -> None:
    if not report.ran:
        fail(f"the recheck runs elsewhere just now ({report.skipped}): wait for it, or see `crewlet worker --status`",
             as_json=as_json, payload={"error": "busy", "message": report.skipped})
    if report.error or report.result is None:
        fail(f"the recheck failed: {report.error}", as_json=as_json,
             payload={"error": "failed", "message": report.error})
    assert report.result is not None
    status: dict[str, Any] = report.result.status
    heads = status.get("heads") or {}
    if as_json:
        from core.bank.recheck import COUNTS

        emit_json({"counts": {k: counts.get(k, 0) for k in COUNTS}, "heads": heads, "said": said,
                   "disputed": disputed, "model": status.get("model"), "summary": report.result.summary})
    else:
        _table(report, counts, said, heads, status.get("model"))
    if counts.get("not_read"):
        fail(f"{plural(counts['not_read'], 'citation')} not read: " + (said[0] if said else "a repository could not be read")
             + " — they are read again by the next recheck")


def _table(report: DutyReport, counts: dict[str, int], said: list[str], heads: dict[str, str],
           model: str | None) -> None:
    assert report.result is not None
    if not heads and not counts:         # nothing to read: no repository configured
        console.print(escape(report.result.summary), soft_wrap=True)
        return
    for name, head in sorted(heads.items()):
        console.print(escape(f"{name}: checked at {head[:7]}"), soft_wrap=True)
    label = max(len(words) for _, words in ROWS)
    width = max(len(f"{counts.get(k, 0):,}") for k, _ in ROWS)
    for key, words in ROWS:
        console.print(escape(f"  {words + ':':<{label + 1}} {counts.get(key, 0):>{width},}"), soft_wrap=True)
    if counts.get("judged_held"):
        console.print(escape(f"  (of the changed, {counts['judged_held']:,} judged still holding by {model})"),
                      soft_wrap=True)
    if not counts.get("records"):
        console.print("nothing new since the last recheck: nothing written")
    else:
        console.print(escape(f"{plural(counts['records'], 'check')} written"), soft_wrap=True)
    for line in said:
        console.print(f"[yellow]{escape(line)}[/]", soft_wrap=True)
    if counts.get("needs_person") or counts.get("disputed"):
        console.print("`crewlet entries --needs-person` lists what waits for a person")
