"""The command palette (ctrl+p): search the knowledge base for what you type, ask it, or go to a screen."""
from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING

from rich.text import Text
from textual.command import DiscoveryHit, Hit, Hits, Provider

from .sanitize import clean_line
from .screens import registry

if TYPE_CHECKING:
    from .app import CrewletApp


class CrewletCommands(Provider):
    @property
    def crewlet(self) -> CrewletApp:
        return self.app  # type: ignore[return-value]

    def _screens(self) -> list[tuple[str, str, object]]:
        """The registry's screens that open with no argument (screens/registry.py)."""
        app = self.crewlet
        return [(item.palette_name, item.about, partial(app.show, item.name)) for item in registry.SCREENS if item.palette]

    async def discover(self) -> Hits:
        if self.crewlet.session is None:
            return
        for name, help_text, action in self._screens():
            yield DiscoveryHit(name, action, help=help_text)  # type: ignore[arg-type]

    async def search(self, query: str) -> Hits:
        if self.crewlet.session is None:
            return
        text = query.strip()
        if text:
            shown = clean_line(text)
            yield Hit(1.0, Text.assemble("Search pages for ", (f"“{shown}”", "bold")),
                      partial(self.crewlet.open_search, text), text=f"Search pages for {shown}",
                      help="reads this node's copy: keyword and meaning, fused")
            yield Hit(0.95, Text.assemble("Ask ", (f"“{shown}”", "bold")),
                      partial(self.crewlet.open_ask, text), text=f"Ask {shown}",
                      help="an answer written from the pages you may read, every claim cited")
        matcher = self.matcher(query)
        for name, help_text, action in self._screens():
            score = matcher.match(name)
            if score > 0:
                yield Hit(score * 0.9, matcher.highlight(name), action, text=name, help=help_text)  # type: ignore[arg-type]
