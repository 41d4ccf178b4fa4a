"""`crewlet` with no subcommand (and `crewlet open`): run the terminal app on a home.

On a machine with no home yet the app opens on a welcome screen that offers to create one with the
bundled example knowledge base, so there is nothing to answer on the console first.
"""
from __future__ import annotations

from typing import Any

from core.paths import Home

from .app import make_app


def run_app(home: Home, actor: str | None = None, *, start_page: str | None = None,
            start_search: str | None = None, opening: Any = None) -> None:
    app = make_app(home, actor, start_page=start_page, start_search=start_search, opening=opening)
    app.run()
    if app.return_code:
        raise SystemExit(app.return_code)
