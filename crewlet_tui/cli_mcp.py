"""`crewlet mcp`: serve this home to an agent runtime (or a person's assistant) over MCP on stdio.

stdout is the protocol's alone: nothing here prints to it, logging goes to stderr, and a refusal to
start (no home, an unknown actor) is one line on stderr and exit 1, before a byte of protocol.
"""
from __future__ import annotations

import logging

import typer

from .cli_common import STATE, err_console, handle_errors, open_node
from .sanitize import markup_safe

app = typer.Typer()             # this module's top-level commands (cli_root adds them to `crewlet`)


class _Verbose(logging.Handler):
    """--verbose: the server's refusals and catch-ups (below WARNING) on stderr, one sanitised line each;
    warnings and errors are said by the handler every command has (cli_common.say_warnings_safely)."""

    def emit(self, record: logging.LogRecord) -> None:
        if record.levelno >= logging.WARNING:
            return
        try:
            text = self.format(record)
        except Exception:  # noqa: BLE001 - a record that does not format says nothing rather than crash
            return
        err_console.print(f"[dim]crewlet mcp:[/] {markup_safe(text)}", soft_wrap=True)


@app.command()
@handle_errors
def mcp(
    as_: str | None = typer.Option(None, "--as", metavar="HANDLE", help="Act as this configured actor (an agent's handle, or "
                                                         "yours); default: the global --as, else the operator."),
    home: str | None = typer.Option(None, "--home", metavar="DIR", help="The crewlet home to serve (default: the global "
                                                            "--home, $CREWLET_HOME, else the user data directory)."),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Log every refusal and catch-up to stderr."),
    run: str | None = typer.Option(None, "--run", envvar="CREWLET_RUN", metavar="ID",
                                   help="The agent run this session serves (started here when new): its "
                                        "load_context and recall_knowledge are recorded against it; a holdout run "
                                        "is given no knowledge."),
) -> None:
    """Serve the knowledge base to an MCP client over stdio (the knowledge app's tools, an agent's own memory).

    The knowledge app's tools and pages as resources; a person also gets answer_knowledge, an agent its own diary and onboarding."""
    import os
    import sys

    if home:
        STATE.home_arg = home
    if as_:
        STATE.actor = as_
    if verbose:
        crewlet_log = logging.getLogger("crewlet")
        crewlet_log.setLevel(logging.INFO)
        crewlet_log.addHandler(_Verbose(level=logging.INFO))
    with open_node() as node:
        from core.mcp.server import serve
        from core.mcp.session import Session

        from core.duties.roster import serve_query_vectors

        session = Session(node, STATE.actor, run=run)   # an unknown actor or run refused here, before any protocol
        daemon = serve_query_vectors(node)   # a long-lived process: a `crewlet search` beside it asks it
        try:
            serve(session)
        finally:
            if daemon is not None:
                daemon.close()
            session.close()
    # the client closed standard input and everything is closed: leave now rather than wait for a query
    # embedding still running in the background (the model's first load), which a client would
    # otherwise see as a server that does not exit and end with SIGTERM
    sys.stderr.flush()
    os._exit(0)
