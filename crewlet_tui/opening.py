"""Opening a home while the app loads: the app's first screen needs the home open and its spaces
listed, and both can be under way while Textual itself is imported and started.

`crewlet` (the app's own command line) starts an Opening first thing; when the app mounts it takes the
session (and the spaces screen its first rows) from it, or waits for it in a worker if it is not done
yet. A failure is the app's to tell, exactly as when the app opens the home itself.
"""
from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from core.paths import Home

    from .session import Session


class Opening:
    """Session.open(home, actor) and the first spaces listing, in a thread started at once."""

    def __init__(self, home: Home, actor: str | None = None) -> None:
        self.home, self.actor = home, actor
        self.session: Session | None = None
        self.spaces: list[dict[str, Any]] | None = None   # None: the spaces screen lists them itself
        self.error: Exception | None = None
        self._done = threading.Event()
        threading.Thread(target=self._open, name="crewlet-open-home", daemon=True).start()

    def _open(self) -> None:
        try:
            from .session import Session

            self.session = Session.open(self.home, self.actor)
            try:
                self.spaces = self.session.kb.spaces(actor=self.session.handle)
            except Exception:  # noqa: BLE001 - the spaces screen asks again, and shows why it cannot
                self.spaces = None
        except Exception as exc:  # noqa: BLE001 - the app tells it, as when it opens the home itself
            self.error = exc
        finally:
            self._done.set()

    def wait(self, timeout: float | None = None) -> bool:
        """Whether the opening finished (within `timeout` seconds; None: however long it takes)."""
        return self._done.wait(timeout)
