"""The `crewlet` command's typer application: the global options and every command module's commands.

`crewlet_tui.cli` is the entry point; it imports this module for every command line except the app's
own (`crewlet` alone, with at most --home and --as), which it runs without typer.

One style for every command: a command module declares a module-level `app = typer.Typer()` and its
commands as module functions decorated `@app.command()` (a group of them is a module-level sub-Typer,
`app.add_typer(page_app, name="page")`); it is listed in COMMAND_MODULES below, whose order is the order
`crewlet --help` lists them in (commands first, then groups). Helpers more than one module uses live, public,
in cli_common.py.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import typer
from typer.core import TyperGroup

if TYPE_CHECKING:
    # typer 0.28 runs its own copy of click (typer._click): its groups take that copy's Context
    from typer import _click as click

from . import (cli_agents, cli_app, cli_ask, cli_consolidate, cli_entries, cli_entry_recheck, cli_import, cli_log,
               cli_mcp, cli_pages, cli_remote, cli_review, cli_runs, cli_search, cli_settings, cli_sync, cli_triage,
               cli_upkeep, cli_worker)
from . import cli_generated
from .cli_common import STATE, handle_errors, say_warnings_safely

COMMAND_MODULES = (cli_pages, cli_entries, cli_entry_recheck, cli_review, cli_triage, cli_import, cli_search, cli_worker,
                   cli_app, cli_log, cli_sync, cli_remote, cli_mcp, cli_agents, cli_ask, cli_settings, cli_runs,
                   cli_upkeep, cli_consolidate, cli_generated)



class CommandsThenGroups(TyperGroup):
    """`crewlet --help` lists the commands first, then the groups (page, index, log, …), each in
    COMMAND_MODULES order — as it did before every module's commands and groups were added as one."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        names = super().list_commands(ctx)
        return sorted(names, key=lambda name: isinstance(self.commands[name], TyperGroup))   # stable: order kept


app = typer.Typer(
    name="crewlet",
    cls=CommandsThenGroups,
    help="A local-first knowledge base: pages in spaces, on an ordered log, applied into SQLite.\n\n"
         "Run `crewlet` alone to open the terminal app.",
    no_args_is_help=False,
    invoke_without_command=True,
    context_settings={"help_option_names": ["-h", "--help"]},
    pretty_exceptions_enable=False,
)


@app.callback()
def main_callback(
    ctx: typer.Context,
    home: str | None = typer.Option(None, "--home", envvar="CREWLET_HOME", metavar="DIR",
                                       help="The crewlet home (default: $CREWLET_HOME, else the user data directory)."),
    as_: str | None = typer.Option(None, "--as", envvar="CREWLET_AS", metavar="HANDLE",
                                      help="Act as this configured actor (default: the configured operator)."),
) -> None:
    STATE.home_arg = home
    STATE.actor = as_
    source = ctx.get_parameter_source("as_")     # typer's own click may not be the installed one: by name
    STATE.actor_from_env = as_ is not None and getattr(source, "name", "") == "ENVIRONMENT"
    say_warnings_safely()
    if ctx.invoked_subcommand is None:
        _open_app()


@handle_errors
def _open_app() -> None:
    from .launch import run_app

    run_app(STATE.home, actor=STATE.actor)


for _module in COMMAND_MODULES:
    app.add_typer(_module.app)     # no name: the module's commands and groups join `crewlet` itself
