"""`crewlet page consolidate` and `crewlet review proposal`: consolidation (spec 003, "Consolidation";
docs/consolidation.md) from a shell.

`crewlet page consolidate REF --body-file F --entries ID,ID` stores a proposal — the page's new body, the STANDING
entries of the page it folds in, the page's revision now — and the page does not change. A person decides it with
`crewlet review proposal ID accept|decline`, and can undo an accepted one with `… revert`, and that revert with
`… undo-revert`. The store refuses each decision to an agent (`--as` naming one), in one line, writing nothing;
an accept is refused in one line when the page changed since the proposal or an entry it folds is no longer
STANDING.

Exit codes: 0 done; 1 refused or failed (one line on stderr; with `--json` the error as JSON on stdout); 2 usage.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import typer

from .cli_common import JSON_OPT, actor, console, emit_json, handle_errors, read_body
from .cli_entries import entry_bank
from .cli_pages import page_app
from .cli_review import review_app
from .fmt import plural
from .sanitize import markup_safe

if TYPE_CHECKING:
    from core.bank.consolidation import Proposal

app = typer.Typer()          # its commands join the `page` and `review` groups (cli_root lists the module)

DECISIONS = ("accept", "decline", "revert", "undo-revert")
PROPOSAL_ARG = typer.Argument(..., metavar="PROPOSAL_ID", help="The proposal's id (`crewlet review` lists the open "
                                                                "ones).")
DECISION_ARG = typer.Argument(..., metavar="DECISION",
                              help="accept saves the new body and folds the entries in; decline closes it; revert "
                                   "undoes an accepted one; undo-revert brings it back.")


def entry_ids(raw: str) -> list[str]:
    """--entries ID,ID as a list; none named is a usage error."""
    ids = [i.strip() for i in raw.split(",") if i.strip()]
    if not ids:
        raise typer.BadParameter("name the entries the new body folds in: --entries ID,ID (`crewlet entries REF` "
                                 "lists a page's)", param_hint="--entries")
    return ids


def proposal_line(p: Proposal) -> str:
    stale = " [yellow](the page changed since: accepting it is refused)[/]" if p.stale else ""
    return (f"[bold]{markup_safe(p.id)}[/] {markup_safe(p.page)}: folds {plural(len(p.entries), 'entry', 'entries')} "
            f"into its body · by {markup_safe(p.proposed_by)} against revision {p.base_revision} · {p.state}{stale}")


def print_proposal(p: Proposal, verb: str) -> None:
    console.print(f"{verb} {proposal_line(p)}", soft_wrap=True)
    if p.folded:
        console.print(f"  [dim]consolidated (served as evidence for the page): {markup_safe(', '.join(p.folded))}[/]",
                      soft_wrap=True)
    if p.state == "OPEN":
        console.print(f"  [dim]a person decides: crewlet review proposal {markup_safe(p.id)} accept|decline[/]",
                      soft_wrap=True)


@page_app.command("consolidate")
@handle_errors
def page_consolidate(
    ref: str = typer.Argument(..., metavar="REF", help="Page id or CONTAINER/Title."),
    body_file: str = typer.Option(..., "--body-file", metavar="FILE", help="The page's new body, which says what the "
                                                                           "entries say: a file, or - for stdin."),
    entries: str = typer.Option(..., "--entries", metavar="ID,ID", help="The page's STANDING entries it folds in."),
    message: str | None = typer.Option(None, "--message", "-m", metavar="TEXT", help="Your note for the reviewer."),
    as_json: bool = JSON_OPT,
) -> None:
    """Propose folding a page's STANDING entries into its body.

    The page does not change: a person accepts or declines the proposal in the review queue (`crewlet review`)."""
    ids = entry_ids(entries)
    body = read_body(body_file)
    from core.bank.consolidation import Consolidation

    with entry_bank() as bank:
        p = Consolidation(bank).propose(ref, body, ids, actor=actor(), message=message)
    if as_json:
        emit_json(p.to_json())
        return
    print_proposal(p, "proposed")


@review_app.command("proposal")
@handle_errors
def review_proposal(proposal_id: str = PROPOSAL_ARG, decision: str = DECISION_ARG, as_json: bool = JSON_OPT) -> None:
    """Decide a consolidation proposal (a person's decision, refused to an agent).

    accept saves the new body and folds the entries in; decline closes it.

    revert undoes an accepted one; undo-revert brings it back."""
    said = decision.strip().lower()
    if said not in DECISIONS:
        raise typer.BadParameter(f"{decision!r}: decide {', '.join(DECISIONS)}",
                                 param_hint="accept|decline|revert|undo-revert")
    from core.bank.consolidation import Consolidation

    with entry_bank() as bank:
        p = Consolidation(bank).decide(proposal_id, said, actor=actor())
    if as_json:
        emit_json(p.to_json())
        return
    verb = {"accept": "accepted", "decline": "declined", "revert": "reverted", "undo-revert": "restored"}[said]
    print_proposal(p, verb)


__all__ = ["app", "proposal_line"]
