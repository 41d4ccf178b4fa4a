"""Pick a page's entry policy (spec 003, "Pages"): OPEN, CURATED (the default) or LOCKED, each with what it lets
agents do. Answers the policy picked (upper case, as core names it), or None when cancelled. Setting it is a
person's: the page screen makes the write, and the engine refuses an agent in one line."""
from __future__ import annotations

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from core.pages.entry_model import CURATED, LOCKED, OPEN

from ..sanitize import clean_line
from .base import footer

# what each policy lets agents do, in spec 003's words
POLICY_WORDS = {
    OPEN: "agents add entries freely (scratch work)",
    CURATED: "agents add, checked for repeats and a budget (the default)",
    LOCKED: "agents add nothing: people maintain it by hand",
}


class PolicyModal(ModalScreen[str | None]):
    CSS_PATH = "dialogs.tcss"
    BINDINGS = [Binding("escape", "cancel", "Cancel"),
                Binding("ctrl+c", "app.help_quit", "Quit", show=False)]   # as every dialog: ctrl+c quits from here

    def __init__(self, page_ref: str, current: str) -> None:
        super().__init__(id="entry-policy")
        self.page_ref, self.current = page_ref, current

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Static(Text(f"Entry policy of {clean_line(self.page_ref)}", style="bold"), classes="dialog-title")
            yield Static(Text("What agents may add under this page. enter picks · escape cancels", style="dim"),
                         classes="dialog-body")
            options = []
            for policy in (OPEN, CURATED, LOCKED):
                label = Text()
                label.append(policy, style="bold")
                if policy == self.current:
                    label.append("  (now)", style="cyan")
                label.append(f"\n  {POLICY_WORDS[policy]}", style="dim")
                options.append(Option(label, id=policy))
            yield OptionList(*options, id="policy-choices")
        yield footer()

    def on_mount(self) -> None:
        choices = self.query_one(OptionList)
        choices.highlighted = choices.get_option_index(self.current) if self.current in POLICY_WORDS else 0
        choices.focus()

    @on(OptionList.OptionSelected)
    def _picked(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        self.dismiss(event.option.id)

    def action_cancel(self) -> None:
        self.dismiss(None)
