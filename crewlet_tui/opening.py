"""Opening a home for the app's launch: the app's first screen needs the home open and its spaces
listed. `crewlet` (the app's own command line) makes an Opening first thing, before Textual is imported;
when the app mounts it takes the session (and the spaces screen its first rows) from it. A failure is
the app's to tell, exactly as when the app opens the home itself.

It opens in the caller's thread, not in a thread of its own while Textual is imported: both are
CPU-bound Python holding the GIL, and two threads handing it back and forth made the launch ~15 ms
slower than opening first (bench/startup.py).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from core.paths import Home

    from .session import Session


class Opening:
    """Session.open(home, actor) and the first spaces listing, done when it is made."""

    def __init__(self, home: Home, actor: str | None = None) -> None:
        self.home, self.actor = home, actor
        self.session: Session | None = None
        self.spaces: list[dict[str, Any]] | None = None   # None: the spaces screen lists them itself
        self.error: Exception | None = None
        try:
            from .session import Session

            self.session = Session.open(self.home, self.actor)
            try:
                self.spaces = self.session.kb.spaces(actor=self.session.handle)
            except Exception:  # noqa: BLE001 - the spaces screen asks again, and shows why it cannot
                self.spaces = None
        except Exception as exc:  # noqa: BLE001 - the app tells it, as when it opens the home itself
            self.error = exc
