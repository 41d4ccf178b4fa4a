"""`crewlet mcp`: serve this home to an agent runtime (or a person's assistant) over MCP on stdio.

stdout is the protocol's alone: nothing here prints to it, logging goes to stderr, and a refusal to
start (no home, an unknown actor) is one line on stderr and exit 1, before a byte of protocol.
"""
from __future__ import annotations

from typing import Optional

import typer

from .cli_common import STATE, handle_errors, open_node

LOG_FORMAT = "crewlet mcp: %(levelname)s %(name)s: %(message)s"


def register(app: typer.Typer) -> None:
    @app.command()
    @handle_errors
    def mcp(
        as_: Optional[str] = typer.Option(None, "--as", help="Act as this configured actor (an agent's handle, or "
                                                             "yours); default: the global --as, else the operator."),
        home: Optional[str] = typer.Option(None, "--home", help="The crewlet home to serve (default: the global "
                                                                "--home, $CREWLET_HOME, else the user data directory)."),
        verbose: bool = typer.Option(False, "--verbose", "-v", help="Log every refusal and catch-up to stderr."),
    ) -> None:
        """Serve the knowledge base to an MCP client over stdio (the knowledge app's six tools, pages as resources)."""
        import logging
        import sys

        if home:
            STATE.home_arg = home
        if as_:
            STATE.actor = as_
        logging.basicConfig(stream=sys.stderr, level=logging.INFO if verbose else logging.WARNING, format=LOG_FORMAT)
        with open_node() as node:
            from core.mcp.server import serve
            from core.mcp.session import Session

            session = Session(node, STATE.actor)   # an unknown actor is refused here, before any protocol
            try:
                serve(session)
            finally:
                session.close()
