"""`crewlet entries REF` and `crewlet entry …`: a page's entries and one entry, as people read and decide them
(issue 35, "People"; docs/entries.md). Thin over core.bank.entries.EntryBank."""
from __future__ import annotations

import typer

app = typer.Typer()             # this module's top-level commands and groups (cli_root adds them to `crewlet`)
entry_app = typer.Typer(help="One entry of the knowledge bank: show, add, accept, verify, dispute, archive, "
                             "supersede, recheck.", no_args_is_help=True)
app.add_typer(entry_app, name="entry")
