"""`crewlet upkeep run` and `crewlet gaps`: the knowledge bank's upkeep (spec 003, "Upkeep"; core/bank/upkeep.py,
core/bank/gaps.py). `upkeep run` does now what the upkeep duty does: proposes the review findings given in
KNOWLEDGE_CONVENTION_MIN_RUNS runs of one module as conventions, archives the conventions proposed that way whose
harmful outcomes exceed their helpful ones by KNOWLEDGE_CONVENTION_HARM_MARGIN, and files the issues of the
questions asked KNOWLEDGE_GAP_ISSUE_MIN_COUNT times (the duty waits for KNOWLEDGE_GAP_ISSUES_CRON; this does not,
unless the cron is off). `gaps` lists the questions the bank could not answer.

Exit codes: 0 done; 1 refused or failed (one line on stderr; with `--json` the error as JSON on stdout); 2 usage.
"""
from __future__ import annotations

import typer

from .cli_common import JSON_OPT, console, emit_json, handle_errors, open_node
from .sanitize import markup_safe

app = typer.Typer()            # this module's group `upkeep` and command `gaps` (cli_root adds them to `crewlet`)
upkeep_app = typer.Typer(help="The knowledge bank's upkeep: conventions from review, knowledge gaps' issues.",
                         no_args_is_help=True)
app.add_typer(upkeep_app, name="upkeep")


@upkeep_app.command("run")
@handle_errors
def upkeep_run(as_json: bool = JSON_OPT) -> None:
    """Run upkeep now: propose conventions from review findings, archive the harmful ones, file gap issues.

    The gaps' issues are filed now whatever KNOWLEDGE_GAP_ISSUES_CRON says, unless it is off."""
    from core.bank.upkeep import upkeep

    with open_node() as node:
        node.refresh_config()
        report = upkeep(node, gaps=not node.company.bank.gap_issues_cron.off)
    if as_json:
        emit_json(report.to_json())
        return
    console.print(markup_safe(report.summary()))
    for p in report.proposed:
        console.print(markup_safe(f"  proposed {p['entry_id']} in {p['module']} ({len(p['runs'])} runs): {p['body']}"))
    for u in report.unplaced:
        console.print(markup_safe(f"  not proposed: no page is linked to {u['module']} (`crewlet page link PAGE "
                                  f"--module {u['module']}`): {u['body']}"))
    for a in report.archived:
        issue = a["issue"]["ref"] if a["issue"] else "no issue filed"
        console.print(markup_safe(f"  archived {a['entry_id']} ({a['harmful']} harmful, {a['helpful']} helpful), "
                                  f"owners told: {issue}"))
    if report.gaps is not None:
        for f in report.gaps.filed:
            console.print(markup_safe(f"  gap issue {f['ref']}: {f['question']}"))
        for q in report.gaps.unowned:
            console.print(markup_safe(f"  gap not filed, it names no module a page is linked to: {q}"))
    for line in [*report.refused, *(report.gaps.failed if report.gaps is not None else [])]:
        console.print(markup_safe(f"  [not done] {line}"))


@app.command("gaps")
@handle_errors
def gaps(as_json: bool = JSON_OPT) -> None:
    """The questions the knowledge bank could not answer: how often asked, the issue filed, answered or not.

    A question is answered once an accepted entry cites its issue (its URL or reference, or its GAPS page)."""
    from core.bank.gaps import Gaps

    with open_node() as node:
        found = Gaps(node).list()
    if as_json:
        emit_json({"gaps": [g.to_json() for g in found]})
        return
    if not found:
        console.print("no knowledge gaps: every question asked found something")
        return
    for g in found:
        issue = g.issue["ref"] if g.issue else "no issue yet"
        state = f"answered by {', '.join(g.answered_by)}" if g.answered else "open"
        console.print(markup_safe(f"{g.count}× {g.question} — {issue} — {state}"))
