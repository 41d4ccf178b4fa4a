"""A generated page's sections under its body (spec 003 "Generated pages"): its question and state, then each
section with the entries it cites, their trust tier, and which are no longer in use or out of the page's scope."""
from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.widgets import Static

from ..sanitize import clean_line


def generated_text(view: dict[str, Any]) -> Text:
    out = Text()
    out.append("Generated page", style="bold")
    state = ("rebuilt from the entries in its scope; read-only here (h takes it over by hand)"
             if view["state"] == "generated" else "taken over: authored, no longer rebuilt")
    out.append(f"  {state}\n", style="dim")
    out.append("Question: ", style="dim")
    out.append(clean_line(view["question"]) + "\n")
    if view["state"] == "generated" and not view.get("built_question_no"):
        out.append("not built yet: the page-refresh duty builds it at its next pass\n", style="yellow")
    elif view.get("pending_question"):
        out.append("its question changed: a build for it is owed\n", style="yellow")
    for i, section in enumerate(view["sections"], 1):
        out.append(f"§{i} ", style="bold")
        for c in section["entries"]:
            alive = c["in_use"] and c["in_scope"]
            out.append(f" {clean_line(c['id'])} ", style="" if alive else "strike dim")
            out.append(f"({c['tier'] or c['status']}", style="dim")
            if not alive:
                out.append(", no longer in use" if not c["in_use"] else ", out of scope", style="red")
            out.append(")", style="dim")
        out.append("\n")
    return out


class GeneratedSections(Static):
    """Shown only on a generated (or taken over) page."""

    def show(self, view: dict[str, Any] | None) -> None:
        self.display = view is not None
        self.update(generated_text(view) if view is not None else "")
