"""`crewlet` with no subcommand (and `crewlet open`): run the terminal app on a home.

On a machine with no home yet the app opens on a welcome screen that offers to create one with the
bundled example knowledge base, so there is nothing to answer on the console first.
"""
from __future__ import annotations

import gc
from typing import Any

from core.paths import Home

from .app import make_app


def run_app(home: Home, actor: str | None = None, *, start_page: str | None = None,
            start_search: str | None = None, opening: Any = None) -> None:
    """`gc.disable()`d by the caller (crewlet's own launch) means: paused until the first screen is
    painted (the app turns it back on then)."""
    gc_paused = not gc.isenabled()
    app = make_app(home, actor, start_page=start_page, start_search=start_search, opening=opening,
                   gc_paused=gc_paused)
    try:
        app.run()
    finally:
        if gc_paused:
            gc.enable()
    if app.return_code:
        raise SystemExit(app.return_code)
