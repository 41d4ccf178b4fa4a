"""`crewlet triage status|run|show`: triage of new entries (spec 003, "Triage and escalation", "Audits and
agreement") from a shell.

- `status` answers "Can triage decide alone?": per decision type its kappa against people's verdicts over the
  window, how many verdicts, whether it acts or escalates (back-off), and since when.
- `run` triages every entry that waits for it now (core.bank.triage.Triage.run, what the fleet duty "triage"
  does on its interval), with a progress bar, and says what it decided in one line.
- `show ENTRY_ID` is the why: triage's latest decision about one entry, with what it read to decide (the
  neighbours, the rules that fired, each model judgment, each citation).

The words for one decision (`decision_line`, `print_decision`) are shared with `crewlet review` and
`crewlet entry show`. Exit codes: 0 done, 1 refused or failed (one line on stderr), 2 usage.
"""
from __future__ import annotations

import sys
import threading
from typing import TYPE_CHECKING, Any

import typer

from .cli_common import JSON_OPT, actor, console, emit_json, fail, handle_errors
from .cli_entries import ID_ARG, age, entry_bank, entry_json, now_ms, print_entry
from .fmt import plural
from .sanitize import markup_safe

if TYPE_CHECKING:
    from core.bank.review import DecisionView, TriageStatus, TypeAgreement

app = typer.Typer()          # `crewlet triage …` (cli_root adds it to `crewlet`)
triage_app = typer.Typer(help="Triage of new entries: whether it may decide alone (status), run it now (run), and "
                              "why it decided what it did about an entry (show).", no_args_is_help=True)
app.add_typer(triage_app, name="triage")

# what each mode of KNOWLEDGE_AUTO_TRIAGE does, as the spec's table says it
MODE_WORDS = {"off": "no triage: every entry waits for a person",
              "shadow": "triage decides and records each decision, and changes nothing",
              "on": "triage accepts, folds in and refuses as it decides; escalations wait for a person"}


# -- one decision, in words ----------------------------------------------------------------------------------

def decided(view: DecisionView) -> str:
    """What triage decided, as a verb phrase: `accept`, `fold into E…`, `refuse (several claims)`, `escalate`."""
    if view.decision == "corroborate":
        return f"fold into {view.fold_into}" if view.fold_into else "fold in"
    if view.decision == "refuse":
        return f"refuse ({(view.refusal or 'policy').replace('_', ' ')})"
    if view.decision == "escalate":
        return "escalate to a person"
    return view.decision


def outcome(view: DecisionView) -> str:
    """What came of it: done (mode on, nothing held), recorded only (shadow), held for a person, or waiting."""
    if view.acted:
        return "done" + (", audited" if view.audited else "")
    if view.mode == "shadow":
        return "recorded only (shadow: nothing changed)"
    if view.held:
        return f"held for a person ({', '.join(view.held)})"
    return "waits for a person"


def decision_line(view: DecisionView, now: int) -> str:
    """Triage's decision about an entry in one line (markup-safe): its mode, what, what came of it, its age."""
    return markup_safe(f"{view.mode}: {decided(view)} — {outcome(view)}, {age(view.at, now)} "
                       f"(decision {view.id})")


def scalar_pairs(item: dict[str, Any], skip: tuple[str, ...] = ()) -> str:
    """An input's plain fields as `key value` pairs, in its own order (a nested one as compact JSON)."""
    import json

    parts = []
    for key, value in item.items():
        if key in skip or value is None or value == "" or value == [] or value == {}:
            continue
        said = value if isinstance(value, (str, int, float, bool)) else json.dumps(value, ensure_ascii=False)
        parts.append(f"{key} {said}")
    return " · ".join(parts)


def input_lines(inputs: dict[str, Any]) -> list[str]:
    """What triage read to decide, one line an item under each heading (markup-safe). Each kind of input is
    said by its own fields: a neighbour's id and relation, a rule's name and verdict, a judgment's answers and
    reason, a citation's result."""
    out = []
    for heading in ("neighbours", "rules", "judgments", "citations"):
        items = inputs.get(heading) or []
        if not items:
            continue
        out.append(f"[bold]{heading}[/]")
        for i, item in enumerate(items, 1):
            if isinstance(item, dict):
                reason = item.get("reason")
                line = scalar_pairs(item, skip=("reason",))
                out.append(f"  {i}. {markup_safe(line)}")
                if reason:
                    out.append(f"     [dim]{markup_safe(str(reason))}[/]")
            else:
                out.append(f"  {i}. {markup_safe(str(item))}")
    for heading, value in inputs.items():     # anything more the engine recorded is shown, never dropped
        if heading in ("neighbours", "rules", "judgments", "citations") or value in (None, [], {}, ""):
            continue
        out.append(f"[bold]{markup_safe(heading)}[/] {markup_safe(str(value))}")
    return out


def print_decision(view: DecisionView | None, now: int, *, indent: str = "  ", inputs: bool = False,
                   waiting: bool = True) -> None:
    """A `triage` section: the decision line, its reasons, and (with `inputs`) what it read. No decision: a line
    saying so where the entry `waiting` for one (proposed), else nothing (triage never sees a person's entry)."""
    if view is None:
        if waiting:
            console.print(f"{indent}[dim]triage: no decision yet (`crewlet triage run` triages what waits)[/]")
        return
    console.print(f"{indent}[bold]triage[/] {decision_line(view, now)}", soft_wrap=True)
    if view.reasons:
        console.print(f"{indent}  reasons: {markup_safe(', '.join(view.reasons))}", soft_wrap=True)
    if inputs:
        for line in input_lines(view.inputs or {}):
            console.print(f"{indent}  {line}", soft_wrap=True)


# -- crewlet triage status ---------------------------------------------------------------------------------

@triage_app.command("status")
@handle_errors
def triage_status(as_json: bool = JSON_OPT) -> None:
    """Can triage decide alone? Per decision type: kappa against people's verdicts, how many, its state, since.

    A type whose kappa falls below KNOWLEDGE_KAPPA_FLOOR over at least KNOWLEDGE_KAPPA_MIN_SAMPLES verdicts of the last KNOWLEDGE_KAPPA_WINDOW_DAYS days stops acting (its entries escalate with LOW_AGREEMENT) until it is back at the floor over as many. Escalation is measured and never backs off."""
    from core.bank.review import Review

    with entry_bank() as bank:
        status = Review(bank).status()
    if as_json:
        emit_json(status.to_json())
        return
    print_status(status, now_ms())


def kappa_said(t: TypeAgreement) -> str:
    return "—" if t.kappa is None else f"{t.kappa:.2f}"


def state_said(t: TypeAgreement) -> str:
    if t.decision_type == "escalate":
        return "measured (never backs off)"
    return "acts" if t.acts else f"{t.state}: escalates with LOW_AGREEMENT"


def print_status(status: TriageStatus, now: int) -> None:
    from rich.table import Table

    console.print(f"[bold]Can triage decide alone?[/] mode {status.mode}: {MODE_WORDS.get(status.mode, '')}",
                  soft_wrap=True)
    table = Table("decision", "kappa", "verdicts", "state", "since")
    for t in status.types:
        table.add_row(t.decision_type, kappa_said(t), f"{t.verdicts:,}", state_said(t),
                      age(t.since, now) if t.since else "—")
    console.print(table)
    console.print(f"a type stops acting below kappa {status.floor:g} over at least "
                  f"{plural(status.min_samples, 'verdict')} of the last {plural(status.window_days, 'day')}, and acts "
                  "again at the floor or above over as many; with fewer verdicts its state stays", soft_wrap=True)
    console.print(f"{plural(status.waiting, 'entry waits', 'entries wait')} for triage "
                  "(`crewlet triage run`); "
                  f"{plural(status.open_audits, 'audit')} open (`crewlet review`)", soft_wrap=True)


# -- crewlet triage run ------------------------------------------------------------------------------------

@triage_app.command("run")
@handle_errors
def triage_run(as_json: bool = JSON_OPT) -> None:
    r"""Triage every entry that waits for it now: each proposed entry with no decision at its version.

    In shadow mode (the default) each decision is recorded and nothing changes; with KNOWLEDGE_AUTO_TRIAGE=on triage accepts, folds in and refuses (escalations wait for a person). The chat model of \[providers.llm] gives the two judgments; without one, what needs it escalates with NO_LLM.

    The triage duty of `crewlet worker` does the same on its interval."""
    from core.bank.triage import Triage

    from .progress_bars import ProgressBars

    stop = threading.Event()
    with entry_bank() as bank:
        bars = ProgressBars(console, enabled=not as_json and sys.stdout.isatty())
        try:
            report = Triage(bank).run(progress=lambda done, total: bars("triage", done, total, "triaging entries"),
                                      stop=stop)
        except KeyboardInterrupt:
            stop.set()
            bars.close()
            fail("triage stopped: the decisions it recorded are kept, and the next run carries on from there",
                 code=130)
        finally:
            bars.close()
    data = report.to_json()
    if as_json:
        emit_json(data)
        return
    console.print(markup_safe(run_summary(data)), soft_wrap=True)


def run_summary(data: dict[str, Any]) -> str:
    """A run's one line: how many it triaged in which mode, by decision, and the model calls it cost."""
    mode = data.get("mode", "")
    if mode == "off":
        return "triage is off (KNOWLEDGE_AUTO_TRIAGE=off): nothing triaged, every entry waits for a person"
    triaged = int(data.get("triaged", 0))
    if not triaged:
        return f"nothing waits for triage ({mode})"
    counts = data.get("decisions") or {}
    by_type = ", ".join(f"{n} {kind}" for kind, n in counts.items() if n)
    acted = int(data.get("acted", 0))
    did = (f"{acted} acted on" if mode == "on" else "nothing changed (shadow)")
    calls = int(data.get("calls", 0))
    return (f"triaged {plural(triaged, 'entry', 'entries')} ({mode}): {by_type}; {did}; "
            f"{plural(calls, 'model call')}")


# -- crewlet triage show -----------------------------------------------------------------------------------

@triage_app.command("show")
@handle_errors
def triage_show(entry_id: str = ID_ARG, as_json: bool = JSON_OPT) -> None:
    """Why triage decided what it did about one entry: its latest decision with what it read.

    The neighbours it compared, the rules that fired, what each of the two model judgments answered, each citation's check; then the mode it ran in and whether it acted."""
    from core.bank.review import latest_decision

    with entry_bank() as bank:
        entry = bank.show(entry_id, actor=actor())
        view = latest_decision(bank.conn, entry.id)
    now = now_ms()
    if as_json:
        emit_json({"entry": entry_json(entry, now), "decision": view.to_json() if view is not None else None})
        return
    print_entry(entry, now)
    if view is None:
        console.print(f"  [dim]triage has not decided about {markup_safe(entry.id)} yet: `crewlet triage run` "
                      "triages every entry that waits for it[/]", soft_wrap=True)
        return
    print_decision(view, now, inputs=True)


__all__ = ["app", "decision_line", "print_decision", "triage_app"]
