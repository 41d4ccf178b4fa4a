"""Editing a page's Markdown (or writing a new page's first text).

A save states the revision it edited: `base_revision` is the revision loaded when editing began. When
somebody saved in between, the engine refuses the save (StaleRevision) and the conflict screen shows
both texts and their diff; the person's text stays in the editor, and once they have merged, the
editor is rebased onto the new revision and saved again. Nothing typed is lost: leaving with unsaved
text asks first, and the engine also keeps a refused text under the home's rescued/ directory.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.widgets import Static, TextArea

from core.errors import StaleRevision
from core.pages.model import Page

from ..fmt import plural
from ..sanitize import body_for_editing, clean_line, count_controls
from ..widgets.page_view import is_large, large_note
from ..widgets.quick_text_area import QuickTextArea
from .base import CrewletScreen, error_text
from .conflict import Conflict, ConflictScreen
from .modals import ConfirmModal, InputModal

if TYPE_CHECKING:
    from core.pages.service import KnowledgeBase


def markdown_language() -> str | None:
    """"markdown" when tree-sitter and its Markdown grammar are installed (textual[syntax]); else
    None, and the editor is plain text."""
    try:
        from textual._tree_sitter import TREE_SITTER, get_language
    except Exception:  # pragma: no cover - a Textual without the module
        return None
    try:
        return "markdown" if TREE_SITTER and get_language("markdown") is not None else None
    except Exception:  # pragma: no cover
        return None


# The longest line the editor opens. Textual's TextArea lays a line out whole (and wraps it): a 5 MB line took
# 25 s to open and seconds a key; a 50,000-character one opens in well under a second on a loaded machine.
LINE_EDITED = 20_000


def too_long_to_edit(body: str) -> str | None:
    """Why the editor will not open `body` (a line too long to edit promptly), or None."""
    if len(body) <= LINE_EDITED:
        return None
    longest = max(map(len, body.split("\n")))
    if longest <= LINE_EDITED:
        return None
    return (f"this page has a line of {longest:,} characters, more than the editor opens promptly "
            f"({LINE_EDITED:,}): save a new text with `crewlet page save REF --body-file FILE`, or split the line")


# the lines `i` on the conflict screen puts around their text (git's merge markers): a text still holding
# one was not merged yet, and saving it asks first
MARKER = re.compile(r"^(<{7}|>{7})(?: |$)", re.M)


def merge_marker_line(text: str) -> int | None:
    """The 1-based line of the first merge marker left in `text`, or None."""
    found = MARKER.search(text)
    return text.count("\n", 0, found.start()) + 1 if found else None


@dataclass
class NewPage:
    container: str
    title: str
    parent: Page | None = None


@dataclass
class SaveAnswer:
    page: Page | None = None
    conflict: Conflict | None = None


def save_or_conflict(kb: KnowledgeBase, page_id: str, body: str, base_revision: int, actor: str | None,
                     message: str | None) -> SaveAnswer:
    try:
        return SaveAnswer(page=kb.save_page(page_id, body, base_revision=base_revision, actor=actor, message=message))
    except StaleRevision as exc:
        current = kb.resolve(page_id, actor=actor)
        return SaveAnswer(conflict=Conflict(your_body=exc.your_body, base_revision=exc.base_revision,
                                            current=current, rescued_to=exc.rescued_to))


@dataclass(frozen=True)
class FoldIn:
    """Editing to consolidate (spec 003, "Consolidation"): the page's standing entries `entry_ids`, folded into the
    body the editor opens with (`text`); a person's save proposes and accepts in one step, an agent's proposes."""

    entry_ids: list[str]
    text: str


def fold_in_one_step(bank: Any, page_id: str, body: str, entry_ids: list[str], base_revision: int,
                     actor: str | None, message: str | None) -> tuple[Page, str]:
    """The consolidation from the page: (the page after it, the proposal's state: ACCEPTED, or OPEN for an agent)."""
    from core.bank.consolidation import Consolidation

    prop = Consolidation(bank).consolidate_now(page_id, body, entry_ids, actor=actor, message=message,
                                               base_revision=base_revision)
    return bank.kb.get_page(page_id, actor=actor, record_read=False), prop.state


class EditScreen(CrewletScreen):
    CSS_PATH = "edit.tcss"
    BINDINGS = [
        Binding("ctrl+s", "save", "Save", priority=True),
        Binding("escape", "back", "Back", priority=True),
        Binding("ctrl+t", "their_changes", "Their changes", priority=True),
        # ctrl+c copies the selection, as in any editor; with nothing selected it says how to quit, not nothing
        Binding("ctrl+c", "copy_or_say", "Copy", show=False, priority=True),
        Binding("f1", "app.show('help')", "Help"),
    ]

    def __init__(self, page: Page | None = None, *, new: NewPage | None = None, fold: FoldIn | None = None) -> None:
        super().__init__(classes="edit-screen")
        assert (page is None) != (new is None)
        self.page = page
        self.new = new
        self.fold = fold if page is not None else None
        self.base_revision = page.revision if page else 0
        self.saved_text = body_for_editing(page.body) if page else ""
        self.controls_on_load = count_controls(page.body) if page else 0
        self.conflict: Conflict | None = None
        self.saving = False
        self.plain = is_large(self.saved_text)
        self.sub_title = "edit"

    @property
    def title_line(self) -> str:
        if self.new is not None:
            where = f" under “{self.new.parent.title}”" if self.new.parent else ""
            return f"New page {self.new.container}/{self.new.title}{where}"
        assert self.page is not None
        if self.fold is not None:
            return f"Consolidating {self.page.container}/{self.page.title}"
        return f"Editing {self.page.container}/{self.page.title}"

    def compose(self) -> ComposeResult:
        yield from self.compose_header()
        with Vertical(classes="main"):
            yield Static(id="edit-title", classes="screen-title")
            yield Static(id="edit-notice", classes="notice")
            # a large page is edited as plain text in a TextArea whose cost per key does not grow with the page
            # (widgets/quick_text_area.py; tree-sitter would parse the whole text again at each key)
            kind, language = (QuickTextArea, None) if self.plain else (TextArea, markdown_language())
            # a large text is loaded once the editor is mounted: given here, TextArea would lay it out three
            # times over (its constructor, then its language watcher at mount)
            opening = self.fold.text if self.fold is not None else self.saved_text
            editor = kind.code_editor("" if self.plain else opening, language=language, soft_wrap=True,
                                      theme="css", id="editor", show_line_numbers=True)
            editor.cursor_blink = self.crewlet.cursor_blink
            yield editor
        yield from self.compose_footer()

    def on_mount(self) -> None:
        if self.plain:
            self.editor.load_text(self.fold.text if self.fold is not None else self.saved_text)
        self._show_title()
        notices = []
        if self.controls_on_load:
            notices.append(f"This page holds {plural(self.controls_on_load, 'control character')}: they are shown as "
                           "visible symbols (␛ …) and a save keeps them as those symbols.")
        if self.plain:
            notices.append(large_note(self.saved_text, "edited"))
        if self.new is not None:
            notices.append("Write the page, then ctrl+s. A page saved with nothing written is a folder.")
        if self.fold is not None:
            notices.append(f"Folding {plural(len(self.fold.entry_ids), 'standing entry', 'standing entries')} into "
                           "the body (appended below): write them into the page, then ctrl+s. A person's save "
                           "accepts at once; the entries then serve as evidence for the page.")
        self._notice(" ".join(notices))
        self.editor.focus()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "their_changes":
            return self.conflict is not None  # shown only once a save was refused
        return True

    @property
    def editor(self) -> TextArea:
        return self.query_one("#editor", TextArea)

    @property
    def dirty(self) -> bool:
        return self.editor.text != self.saved_text

    def _show_title(self) -> None:
        title = Text(clean_line(self.title_line), style="bold")
        if self.page is not None:
            title.append(f"  — editing from revision {self.base_revision}", style="dim")
        self.query_one("#edit-title", Static).update(title)

    def _notice(self, text: str, style: str = "yellow") -> None:
        notice = self.query_one("#edit-notice", Static)
        notice.update(Text(clean_line(text), style=style))
        notice.display = bool(text)

    # -- saving ------------------------------------------------------------------------------------
    def action_save(self) -> None:
        if self.saving:
            return
        if self.page is not None and not self.dirty and self.conflict is None:
            self.notify("nothing changed since the last save")
            return

        def with_note(note: str | None) -> None:
            if note is None:
                return
            self._save(note.strip() or None)

        def ask_note(yes: bool | None = True) -> None:
            if not yes:
                self.editor.focus()
                return
            self.app.push_screen(InputModal("Save", "A note for the history (optional — enter to save without one)",
                                            placeholder="what changed and why", ok="Save", allow_empty=True,
                                            id="save-note"), with_note)

        line = merge_marker_line(self.editor.text)
        if line is None:
            ask_note()
            return
        self.app.push_screen(ConfirmModal("Save with merge markers?", f"Line {line:,} still holds a merge marker "
                                          "(<<<<<<< or >>>>>>>): their text is not merged yet. Save it as it is, "
                                          "markers and all?", yes="Save with them", no="Keep merging",
                                          id="save-markers"), ask_note)

    def _save(self, message: str | None) -> None:
        self.saving = True
        text = self.editor.text
        if self.new is not None:
            parent = self.new.parent.id if self.new.parent else None
            self.call_in_background(self.kb.create_page, self.new.container, self.new.title, text,
                                    actor=self.session.handle, parent=parent, message=message, what="created",
                                    on_done=self._created, on_fail=self._create_failed,
                                    on_gone=self._created_words, writes=True)
        elif self.fold is not None:
            assert self.page is not None
            self.call_in_background(fold_in_one_step, self.session.bank, self.page.id, text, self.fold.entry_ids,
                                    self.base_revision, self.session.handle, message, what="consolidated",
                                    on_done=self._folded, on_fail=self._save_failed, on_gone=self._folded_words,
                                    writes=True)
        else:
            assert self.page is not None
            self.call_in_background(save_or_conflict, self.kb, self.page.id, text, self.base_revision,
                                    self.session.handle, message, what="saved", on_done=self._saved,
                                    on_fail=self._save_failed, on_gone=self._saved_words, writes=True)

    def _folded(self, done: tuple[Page, str]) -> None:
        self.saving = False
        self.saved_text = self.editor.text
        self.fold = None            # done: leaving asks nothing
        self.notify(self._folded_words(done), markup=False)
        self.finish(done[0])

    def _folded_words(self, done: tuple[Page, str]) -> str:
        page, state = done
        if state == "ACCEPTED":
            return f"consolidated into revision {page.revision} of {page.ref}"
        return f"proposed: a person accepts the consolidation of {page.ref} in the review queue"

    def _created(self, page: Page) -> None:
        self.saving = False
        self.saved_text = self.editor.text
        self.new = None  # the page exists now: leaving asks nothing
        self.notify(f"created {clean_line(page.ref)} (revision {page.revision})", markup=False)
        # covered (help on top)? the editor gives way to the page once it is shown again
        self.when_shown(lambda: self.crewlet.replace_with_page(self, page.id))

    def _created_words(self, page: Page) -> str:
        return f"created {page.ref} (revision {page.revision})"

    def _saved_words(self, answer: SaveAnswer) -> str:
        if answer.page is not None:
            return f"saved revision {answer.page.revision} of {answer.page.ref}"
        c = answer.conflict
        assert c is not None
        kept = f" — your text is kept in {c.rescued_to}" if c.rescued_to else ""
        return (f"not saved: {c.current.ref} is at revision {c.current.revision} by {c.current.saved_by} "
                f"(you began from {c.base_revision}){kept}")

    def late_words(self, message: Any) -> tuple[str, str] | None:
        from .base import CallFailed

        if isinstance(message, CallFailed):
            return f"not {message.call.what}: {error_text(message.error)}", "error"
        return super().late_words(message)

    def _create_failed(self, error: BaseException) -> None:
        self.saving = False
        self.notify(error_text(error), title="not created — your text is still here", severity="error",
                    markup=False, timeout=10)

    def _saved(self, answer: SaveAnswer) -> None:
        self.saving = False
        if answer.conflict is not None:
            self.conflict = answer.conflict
            self.refresh_bindings()
            self._notice(f"Not saved: revision {answer.conflict.current.revision} was saved by "
                         f"{answer.conflict.current.saved_by} after you began (from revision "
                         f"{answer.conflict.base_revision}). Your text is kept.", "bold red")
            conflict = answer.conflict
            self.when_shown(lambda: self.app.push_screen(ConflictScreen(conflict), self._after_conflict))
            return
        page = answer.page
        assert page is not None
        self.page = page
        self.base_revision = page.revision
        self.saved_text = self.editor.text
        self.conflict = None
        self.refresh_bindings()
        self.notify(f"saved revision {page.revision}", markup=False)
        self.finish(page)   # where it stands: covered by help, it gives way once help closes

    def _save_failed(self, error: BaseException) -> None:
        self.saving = False
        self.notify(error_text(error), title="not saved — your text is still here", severity="error",
                    markup=False, timeout=10)

    def _after_conflict(self, choice: str | None) -> None:
        conflict = self.conflict
        if conflict is None or not choice:
            self.editor.focus()
            return
        if choice in ("rebase", "append"):
            if choice == "append":
                theirs = body_for_editing(conflict.current.body)
                self.editor.text = (self.editor.text.rstrip("\n") + "\n\n"
                                    f"<<<<<<< revision {conflict.current.revision} by {conflict.current.saved_by} "
                                    "(merge, then remove these markers)\n" + theirs.rstrip("\n") + "\n>>>>>>>\n")
            self.base_revision = conflict.current.revision
            self.page = conflict.current
            self._show_title()
            self._notice(f"Rebased onto revision {conflict.current.revision}: your text is in the editor — make sure "
                         "their changes are in it too (ctrl+t shows them), then save.", "cyan")
        self.editor.focus()

    def action_their_changes(self) -> None:
        if self.conflict is None:
            return
        live = Conflict(your_body=self.editor.text, base_revision=self.conflict.base_revision,
                        current=self.conflict.current, rescued_to=self.conflict.rescued_to)
        self.app.push_screen(ConflictScreen(live, rebased=self.base_revision == self.conflict.current.revision),
                             self._after_conflict)

    def action_copy_or_say(self) -> None:
        editor = self.editor
        if editor.selection.start != editor.selection.end:
            editor.action_copy()
        else:
            self.notify("ctrl+c copies a selection here; ctrl+q quits (it asks first about unsaved text)",
                        markup=False)

    # -- leaving ---------------------------------------------------------------------------------
    def action_back(self) -> None:
        if not self.dirty and not (self.new is not None and self.editor.text):
            self.finish(None)
            return

        def leave(yes: bool | None) -> None:
            if yes:
                self.finish(None)

        self.app.push_screen(ConfirmModal("Leave without saving?", "The text in the editor is not saved. "
                                          "Leave and lose it?", yes="Leave, losing it", no="Keep editing",
                                          danger=True, id="leave-unsaved"), leave)

    @property
    def has_unsaved_text(self) -> bool:
        return self.dirty or (self.new is not None and bool(self.editor.text))
