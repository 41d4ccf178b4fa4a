"""The one-line bar at the top of every screen: the app, where you are, and the home it reads.

(Textual's Header queries its own children from watchers on the app's and screen's titles, which
races with a screen that is dismissed at once; a plain Static has no children to miss.)
"""
from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from ..sanitize import clean_line


class TitleBar(Static):
    def on_mount(self) -> None:
        self.watch(self.screen, "sub_title", self._show)

    def _show(self, _value: object = None) -> None:
        where = self.screen.sub_title or ""
        text = Text("◆ crewlet", style="bold")
        if where:
            text.append(f"  ·  {clean_line(where)}")
        self.update(text)
