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

import json
import sys
import threading
from typing import TYPE_CHECKING, Any

import typer

from core.pages.triage_model import AGREE, CORROBORATE, DISAGREE, ESCALATE, ESCALATING, OFF, ON, REFUSE, SHADOW

from .cli_common import JSON_OPT, actor, console, emit_json, fail, handle_errors, open_node, refuse_elsewhere
from .cli_entries import ID_ARG, age, entry_bank, entry_json, now_ms, print_entry, said_for_a_shell
from .fmt import plural
from .sanitize import markup_safe

if TYPE_CHECKING:
    from core.bank.review import DecisionView, TriageStatus, TypeAgreement

app = typer.Typer()          # `crewlet triage …` (cli_root adds it to `crewlet`)
triage_app = typer.Typer(help="Triage of new entries: whether it may decide alone (status), run it now (run), and "
                              "why it decided what it did about an entry (show).", no_args_is_help=True)
app.add_typer(triage_app, name="triage")

LABEL = "crewlet triage run"     # who holds the triage duty's lease, as another process says it

# what each mode of KNOWLEDGE_AUTO_TRIAGE does, as the spec's table says it
MODE_WORDS = {OFF: "no triage: every entry waits for a person",
              SHADOW: "triage decides and records each decision, and changes nothing",
              ON: "triage accepts, folds in and refuses as it decides; escalations wait for a person"}


# -- one decision, in words ----------------------------------------------------------------------------------

def decided(view: DecisionView) -> str:
    """What triage decided, as a verb phrase: `accept`, `fold into E…`, `refuse (several claims)`, `escalate`."""
    if view.decision == CORROBORATE:
        return f"fold into {view.fold_into}" if view.fold_into else "fold in"
    if view.decision == REFUSE:
        return f"refuse ({(view.refusal or 'policy').replace('_', ' ')})"
    if view.decision == ESCALATE:
        return "escalate to a person"
    return view.decision


def outcome(view: DecisionView) -> str:
    """What came of it: done (mode on, nothing held) and, when audited, the audit's state; recorded only
    (shadow); held for a person (UNKNOWN_SOURCE, LOW_AGREEMENT); or waiting for a person (an escalation)."""
    if view.acted:
        if not view.audited:
            return "done"
        return {None: "done, audit open", AGREE: "done, kept by a person's audit",
                DISAGREE: "undone by a person's audit"}.get(view.answer, "done, audited")
    if view.mode == SHADOW:
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
    parts: list[str] = []
    for key, value in item.items():
        if key in skip or value is None or value == "" or value == [] or value == {}:
            continue
        said = value if isinstance(value, (str, int, float, bool)) else json.dumps(value, ensure_ascii=False)
        parts.append(f"{key} {said}")
    return " · ".join(parts)


def yes(value: object) -> str:
    return "yes" if value else "no"


def neighbour_said(n: dict[str, Any]) -> str:
    """`ID: duplicate (both judgments) · similarity 0.91 · STANDING · verified · ENG/Caching — "body"`."""
    head = f"{n.get('id', '?')}: {n.get('relation') or 'undecided'}" + (f" ({n['by']})" if n.get("by") else "")
    similarity = n.get("similarity")
    marks = [f"similarity {similarity:.2f}" if isinstance(similarity, (int, float)) else "", str(n.get("status") or ""),
             "verified" if n.get("verified") else "", "on a LOCKED page" if n.get("locked") else "",
             str(n.get("page") or "")]
    body = f' — "{n["body"]}"' if n.get("body") else ""
    return " · ".join([head, *(m for m in marks if m)]) + body


def rule_said(r: dict[str, Any]) -> str:
    relation = r.get("relation") or "cannot tell: the judgments decide"
    return f"{r.get('neighbour', '?')}: rule {r.get('rule', '?')} → {relation}"


def judgment_said(j: dict[str, Any]) -> str:
    n = j.get("n", "?")
    if j.get("failed"):
        return f"judgment {n}: failed — {j['failed']}"
    if j.get("asked") is False:
        return f"judgment {n}: not asked — {j.get('why', '')}"
    relations = ", ".join(f"{k} {v}" for k, v in (j.get("relations") or {}).items())
    return (f"judgment {n}: one claim {yes(j.get('one_claim'))}, accept {yes(j.get('accept'))}"
            + (f"; relations {relations}" if relations else "") + (f" ({j['model']})" if j.get("model") else ""))


def citation_said(c: dict[str, Any]) -> str:
    if "cites" not in c and "result" not in c:
        return scalar_pairs(c)
    message = f": {c['message']}" if c.get("message") else ""
    return f"[{c.get('index', '?')}] {c.get('cites', '')} — {c.get('result', '?')}{message}"


# what triage read, under a heading each, said by its own fields (anything else is listed plainly)
LISTED_INPUTS: dict[str, Any] = {"neighbours": neighbour_said, "rules": rule_said, "judgments": judgment_said,
                                 "citations": citation_said}
UNSAID_INPUTS = ("entry", "model")     # the entry is shown above the decision; the model in each judgment


def other_input(heading: str, value: Any) -> str | None:
    """One line for an input that is not a list of items: the policy checks, the exact repeat, the scope."""
    if heading == "policy" and isinstance(value, dict):
        found = [k.replace("_", " ") for k, v in value.items() if v]
        return f"policy: {', '.join(found)}" if found else None
    if heading == "compared":
        return str(value)
    if heading == "repeat":
        return f"exact repeat of {value}"
    if heading == "scope" and isinstance(value, dict):
        if not value.get("counted", True):
            return f"scope {value.get('scope') or '(none)'}: {value.get('note', 'not counted')}"
        modules = value.get("modules") or []
        note = f" — {value['note']}" if value.get("note") else ""
        return (f"scope {value.get('scope') or '(none)'}: reaches {plural(len(modules), 'module')} "
                f"(at most {value.get('max', '?')}){note}")
    if heading == "outranked":
        return f"also found, outranked by the decision: {', '.join(map(str, value))}"
    if heading == "backed_off":
        return f"backed off (LOW_AGREEMENT): {', '.join(map(str, value))}"
    if isinstance(value, dict):
        return f"{heading}: {scalar_pairs(value)}"
    if isinstance(value, list):
        return f"{heading}: {', '.join(map(str, value))}"
    return f"{heading}: {value}"


def input_lines(inputs: dict[str, Any]) -> list[str]:
    """What triage read to decide, one line an item under each heading (markup-safe): the neighbours, the rules
    that fired, each judgment (its reason under it), each citation; then the rest of what it recorded."""
    out = []
    for heading, said in LISTED_INPUTS.items():
        items = inputs.get(heading) or []
        if not items:
            continue
        out.append(f"[bold]{heading}[/]")
        for item in items:
            if not isinstance(item, dict):
                out.append(f"  {markup_safe(str(item))}")
                continue
            out.append(f"  {markup_safe(said(item))}")
            if heading == "judgments" and item.get("reason"):
                out.append(f"    [dim]{markup_safe(str(item['reason']))}[/]")
    for heading, value in inputs.items():     # anything more the engine recorded is shown, never dropped
        if heading in LISTED_INPUTS or heading in UNSAID_INPUTS or value in (None, [], {}, ""):
            continue
        line = other_input(heading, value)
        if line:
            out.append(markup_safe(line))
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


def acts_said(t: TypeAgreement, mode: str) -> str:
    """Whether triage decides this type alone now, and if not, why: the mode, back-off, or never (escalation
    always waits for a person: it is measured, and never backs off)."""
    if t.decision_type == ESCALATE:
        return "never backs off"
    if t.acts:
        return "yes"
    if t.state == ESCALATING:
        return "no (LOW_AGREEMENT)"
    return f"no ({mode})" if mode != ON else "no"


def print_status(status: TriageStatus, now: int) -> None:
    from rich.table import Table

    console.print(f"[bold]Can triage decide alone?[/] mode {status.mode}: {MODE_WORDS.get(status.mode, '')}",
                  soft_wrap=True)
    table = Table("decision", "kappa", "verdicts", "its own", "state", "since", "acts alone")
    for t in status.types:
        table.add_row(t.decision_type, kappa_said(t), f"{t.verdicts:,}", f"{t.decided:,}", t.state,
                      age(t.since, now) if t.since else "—", acts_said(t, status.mode))
    console.print(table)
    console.print("verdicts: people's decisions and audit answers in the window, every one weighed for each type "
                  "(that type against the rest); its own: those on triage's decisions of that type", soft_wrap=True)
    console.print(f"a type stops acting below kappa {status.floor:g} over at least "
                  f"{plural(status.min_samples, 'verdict')} of the last {plural(status.window_days, 'day')}, and acts "
                  "again at the floor or above over as many; with fewer verdicts its state stays", soft_wrap=True)
    console.print(f"{plural(status.waiting, 'proposed entry waits', 'proposed entries wait')} for a person, "
                  f"{plural(status.open_audits, 'audit')} open: `crewlet review` lists them", soft_wrap=True)


# -- crewlet triage run ------------------------------------------------------------------------------------

@triage_app.command("run")
@handle_errors
def triage_run(as_json: bool = JSON_OPT) -> None:
    r"""Triage every entry that waits for it now: each proposed entry with no decision at its version.

    In shadow mode (the default) each decision is recorded and nothing changes; with KNOWLEDGE_AUTO_TRIAGE=on triage accepts, folds in and refuses (escalations wait for a person). The chat model of \[providers.llm] gives the two judgments; without one, what needs it escalates with NO_LLM.

    The triage duty of `crewlet worker` does the same on its interval."""
    from core.bank.entries import EntryBank
    from core.bank.triage import Triage
    from core.duties import TRIAGE
    from core.duties.runner import DutyRunner
    from core.duties.triage import TriageDuty

    from .progress_bars import ProgressBars

    stop = threading.Event()
    with open_node() as node, EntryBank(node) as bank, said_for_a_shell():
        refuse_elsewhere(node, "entries")
        # the triage duty's lease, as `crewlet worker` takes it: a worker triaging now is said, not raced (two
        # passes would ask the model twice about one entry and record two decisions at one version)
        runner = DutyRunner(node, [TriageDuty(node)], label=LABEL)
        lease = runner.leases[TRIAGE]
        bars = ProgressBars(console, enabled=not as_json and sys.stdout.isatty())

        def progress(done: int, total: int, _label: str) -> None:
            if lease.acquire() is not None:        # renewed as it goes; taken over meanwhile: stop here
                stop.set()
            bars("triage", done, total, "triaging entries")

        try:
            held = lease.acquire()
            if held is not None:
                fail(f"triage runs elsewhere just now ({held.describe()}): wait for it, or see "
                     "`crewlet worker --status`", as_json=as_json, payload={"error": "busy", "message": held.describe()})
            report = Triage(bank).run(progress=progress, stop=stop)
        except KeyboardInterrupt:
            stop.set()
            bars.close()
            fail("triage stopped: the decisions it recorded are kept, and the next run carries on from there",
                 code=130)
        finally:
            bars.close()
            runner.close()
    data = report.to_json() | {"triaged": len(report.decided), "acted": sum(1 for d in report.decided if d.acted),
                               "audited": sum(1 for d in report.decided if d.audited)}
    if as_json:
        emit_json(data)
    else:
        console.print(markup_safe(run_summary(report.said, data)), soft_wrap=True)
    if report.errors:
        fail(f"{plural(len(report.errors), 'entry', 'entries')} could not be triaged — {report.errors[0]} — the "
             "next run tries again")


def run_summary(said: str, data: dict[str, Any]) -> str:
    """A run's one line: the engine's own (how many, in which mode, by decision, model calls), then what it did."""
    if data["mode"] == OFF or not data["triaged"]:
        return said
    if data["mode"] != ON:
        return f"{said}; nothing changed (shadow: `crewlet review` lists what triage would do)"
    audits = f", {plural(data['audited'], 'audit')} opened" if data["audited"] else ""
    return f"{said}; {data['acted']} acted on{audits} (`crewlet review` lists what waits)"


# -- crewlet triage show -----------------------------------------------------------------------------------

@triage_app.command("show")
@handle_errors
def triage_show(entry_id: str = ID_ARG, as_json: bool = JSON_OPT) -> None:
    """Why triage decided what it did about one entry: its latest decision with what it read.

    The neighbours it compared, the rules that fired, what each of the two model judgments answered, each citation's check; then the mode it ran in and whether it acted."""
    from core.bank.review import Review

    with entry_bank() as bank:
        entry = bank.show(entry_id, actor=actor())
        view = Review(bank).latest(entry.id, actor=actor())
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


__all__ = ["app", "decided", "decision_line", "print_decision", "triage_app"]
