"""supersede_entry: a correction of an entry that is wrong (spec 003, "Entries"): a new entry under the same page
that replaces the old one once a person accepts it — the old one stays in use until then."""
from __future__ import annotations

from typing import Any

from pydantic import Field

from ..session import Session
from .add_entry import CITATIONS_HELP, KIND_HELP, SCOPE_HELP, written_reply
from .base import Args, Reply, Tool


class SupersedeEntryArgs(Args):
    entry_id: str = Field(description="The id of the entry that is wrong, as load_context, get_page or add_entry "
                                      "gave it.")
    body: str = Field(description="The corrected fact, one fact as add_entry takes it (a list, several claims or a "
                                  "secret is refused).")
    kind: str | None = Field(default=None, description="Left out: the old entry's kind. " + KIND_HELP)
    scope: str | None = Field(default=None, description="Left out: the old entry's scope. " + SCOPE_HELP)
    citations: list[dict[str, Any]] | None = Field(default=None, description=(
        "What the correction rests on (the old entry's citations do not carry over). " + CITATIONS_HELP))


def run(session: Session, args: SupersedeEntryArgs) -> Reply:
    entry = session.bank.supersede(args.entry_id, args.body, kind=args.kind, scope=args.scope,
                                   citations=args.citations, actor=session.handle)
    return written_reply(entry, supersedes=args.entry_id)


TOOL = Tool(
    name="supersede_entry",
    title="Correct an entry of the knowledge bank",
    description=(
        "Write a correction of an entry that you found wrong: a new entry under the same page that replaces it. "
        "An agent's correction waits for a person; the old entry stays in use until a person accepts the "
        "correction, then it is SUPERSEDED (kept for the record). Returns the new entry with its status, tier and "
        "citation checks. Refused as add_entry refuses, and for an entry that is no longer in the bank. Use it when "
        "load_context, get_page or add_entry showed you an entry the code contradicts; cite the code that shows "
        "the correction."),
    hint="correct an entry you found wrong (it is replaced once a person accepts your correction)",
    args=SupersedeEntryArgs, run=run, on_remote=False)
