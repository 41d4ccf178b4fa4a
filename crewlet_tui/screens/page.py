"""One page: its body rendered as Markdown and, beside it, where it sits and what surrounds it —
title, address, last saved by/at, children, "Linked from" (backlinks) and comments. Under the body, the page's
entries (spec 003: widgets/entry_list.py) and its entry policy; enter on an entry opens it (screens/entry.py)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.widgets import Markdown, OptionList, Static
from textual.widgets.option_list import Option

from core.pages.model import Comment, Page, Window

from ..fmt import ago, plural, when, when_ago
from ..entry_words import refusal_words
from ..links import classify
from ..sanitize import body_for_display, clean_line, clean_text, count_controls
from ..widgets.entry_list import EntriesView, EntryList, read_entries
from ..widgets.generated_sections import GeneratedSections
from ..widgets.page_tree import FOLDER_ICON, PAGE_ICON
from ..widgets.page_view import PageBody, cut_long_lines, is_large, large_note
from ..widgets.plain_body import PlainBody
from .page_actions import ask_move, ask_rename, ask_trash
from . import registry
from .base import COMMON_BINDINGS, CrewletScreen, error_text
from .modals import InputModal, NewPageModal

if TYPE_CHECKING:
    from core.pages.service import KnowledgeBase

CHILDREN_SHOWN = 50


@dataclass
class PageView:
    """Everything the page screen shows, read in one background call."""

    page: Page
    comments: list[Comment] = field(default_factory=list)
    backlinks: list[Page] = field(default_factory=list)
    children: Window | None = None
    generated: dict[str, Any] | None = None     # a generated page's sections (core/bank/generated.py page_view)


def read_page_view(kb: KnowledgeBase, ref: str, actor: str | None, record_read: bool = True) -> PageView:
    """One read of a page (an agent's is recorded as a knowledge_read; a refresh of the same view is not)."""
    page = kb.get_page(ref, actor=actor, record_read=record_read)
    children = (kb.list_pages(page.container, parent=page.id, limit=CHILDREN_SHOWN, actor=actor)
                if page.child_count else None)
    from core.bank.generated import page_view

    return PageView(page, kb.comments(page.id, actor=actor), kb.backlinks(page.id, actor=actor), children,
                    page_view(kb.node, page.id, page.body))


class PageScreen(CrewletScreen):
    CSS_PATH = "page.tcss"
    # its side panel narrows on a narrow terminal (page.tcss). Set here, not on the app: a screen that
    # gets a breakpoint class on its first resize restyles its whole tree, and only this one uses it
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (96, "-wide")]
    # every key in the footer: on a narrow terminal it takes two rows (page.tcss)
    BINDINGS = [
        Binding("e", "edit", "Edit"),
        Binding("y", "history", "History"),
        Binding("c", "comment", "Comment"),
        Binding("n", "new_child", "New"),
        Binding("r", "rename", "Rename"),
        Binding("d", "trash", "Trash"),
        Binding("u", "restore", "Restore"),
        Binding("m", "move", "Move"),
        Binding("o", "outline", "Outline"),
        Binding("i", "entries", "Entries"),
        Binding("p", "policy", "Policy"),
        # the footer is full at 80 columns: the entries' heading and the help screen name it
        Binding("f", "fold", "Fold entries", show=False),
        Binding("h", "take_over", "Take over"),     # by hand: shown on a generated page only (check_action)
        Binding("tab", "side_panel", "Side panel"),
        registry.binding("trash", "Trash list", action="trash_list"),
        Binding("j", "scroll('down')", "Down", show=False),
        Binding("k", "scroll('up')", "Up", show=False),
        Binding("g", "scroll('home')", "Top", show=False),
        Binding("G", "scroll('end')", "Bottom", show=False),
        *COMMON_BINDINGS,
    ]

    def __init__(self, ref: str) -> None:
        super().__init__(classes="page-screen")
        self.ref = ref
        self.view: PageView | None = None
        self.entries: EntriesView | None = None

    @property
    def page(self) -> Page | None:
        return self.view.page if self.view else None

    def compose(self) -> ComposeResult:
        yield from self.compose_header()
        with Horizontal(id="page-layout"):
            with VerticalScroll(id="page-main"):
                yield Static(id="page-title", classes="page-title")
                yield Static(id="page-trail", classes="page-trail")
                yield Static(id="page-notice", classes="notice")
                yield PageBody(id="page-body")
                yield PlainBody(id="page-plain")   # a large page's body, instead (widgets/plain_body.py)
                yield GeneratedSections(id="page-generated")
                yield Static(id="page-entries-title", classes="section-title")
                yield EntryList(id="page-entries")
            with VerticalScroll(id="page-side"):
                yield Static(id="page-meta")
                yield OptionList(id="page-related")
                yield Static(id="page-comments")
        yield from self.compose_footer()

    # what changes a live page; a page in the trash allows none of it, only restoring it (u)
    WRITES = frozenset({"edit", "comment", "new_child", "rename", "move", "trash", "policy", "fold", "take_over"})

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """The footer shows what can be done here and now: a page in the trash offers u (restore), not e or d;
        a live page does not offer u; while the page loads its keys show, dimmed."""
        if action not in self.WRITES and action != "restore":
            return True
        page = self.page
        if page is None:
            return None if action in self.WRITES else False
        generated = self.view is not None and (self.view.generated or {}).get("state") == "generated"
        if action == "edit" and generated:
            return False    # a generated page is read-only: take it over first (h, or `crewlet page takeover`)
        if action == "take_over" and not generated:
            return False    # only a generated page is taken over
        return (action == "restore") == bool(page.trashed_at)

    def on_mount(self) -> None:
        self.query_one("#page-notice", Static).display = False
        self.query_one("#page-title", Static).update(Text("loading…", style="dim"))
        self.query_one("#page-entries-title", Static).update(Text("Entries: loading…", style="dim"))
        self.query_one("#page-main").focus()
        self.reload()

    def refresh_rows(self) -> None:
        self.reload()

    def reload(self) -> None:
        first = self.view is None or self.view.page.id != self.ref
        self.call_in_background(read_page_view, self.kb, self.ref, self.session.handle, first, what="view",
                                on_done=self._show_view, on_fail=self._view_failed)

    def on_screen_resume(self) -> None:
        if self.view is not None:
            self.reload()

    def _view_failed(self, error: BaseException) -> None:
        self.query_one("#page-title", Static).update(Text(f"cannot open {clean_line(self.ref)}", style="bold red"))
        self.query_one("#page-trail", Static).update(Text(error_text(error)))

    def _show_view(self, view: PageView) -> None:
        self.view = view
        page = view.page
        self.ref = page.id
        self.sub_title = clean_line(page.ref)
        self.query_one("#page-title", Static).update(Text(clean_line(page.title), style="bold"))
        trail = Text(" › ".join(clean_line(x) for x in [page.container, *[a["title"] for a in page.ancestors]]),
                     style="dim")
        self.query_one("#page-trail", Static).update(trail)
        notice = self.query_one("#page-notice", Static)
        notes = []
        if page.trashed_at:
            notes.append(f"In the trash since {when_ago(page.trashed_at, self.crewlet.clock)} "
                         f"(by {clean_line(page.trashed_by)}) — u restores it (t: the whole trash).")
        hidden = count_controls(page.body)
        if hidden:
            notes.append(f"This body holds {plural(hidden, 'control character')} (terminal escapes): "
                         "shown inert, as ␛ and friends.")
        large = not page.is_folder and is_large(page.body)
        if large:
            notes.append(large_note(page.body, "shown"))
        notice.update(Text("\n".join(notes), style="yellow"))
        notice.display = bool(notes)
        body, plain = self.query_one(PageBody), self.query_one(PlainBody)
        if large:
            if body.display:
                body.show("")
            body.display = False
            plain.show(body_for_display(cut_long_lines(page.body)))
        else:
            if plain.line_count:
                plain.show("")
            body.display = True
            if page.is_folder:
                body.show(f"*A folder: nothing written here.* It groups {plural(page.child_count, 'page')}.")
            else:
                body.show(page.body)
        self.query_one(GeneratedSections).show(view.generated)
        self._show_side(view)
        self.refresh_bindings()   # a page trashed or restored (here or elsewhere) changes what can be done
        self.load_entries()

    def _show_side(self, view: PageView) -> None:
        page, clock = view.page, self.crewlet.clock
        meta = Text()
        meta.append(f"{clean_line(page.container)}/{clean_line(page.address)}\n", style="bold")
        meta.append("id ", style="dim")
        meta.append(f"{page.id}\n")
        meta.append("revision ", style="dim")
        meta.append(f"{page.revision}\n")
        meta.append("last saved by ", style="dim")
        meta.append(f"{clean_line(page.saved_by)}\n", style="bold")
        meta.append(f"  {when(page.saved_at)}")
        rel = ago(page.saved_at, clock)
        meta.append(f" ({rel})\n" if rel else "\n", style="dim")
        meta.append("created by ", style="dim")
        meta.append(f"{clean_line(page.created_by)}, {when(page.created_at)[:10]}\n")
        if page.labels:
            meta.append("labels ", style="dim")
            meta.append(", ".join(clean_line(lab) for lab in page.labels) + "\n")
        self.query_one("#page-meta", Static).update(meta)

        related = self.query_one("#page-related", OptionList)
        related.clear_options()
        options: list[Option | None] = []
        if view.children is not None:
            options.append(Option(Text(f"Children ({view.children.total:,})", style="bold"), disabled=True))
            for child in view.children.pages:
                icon = FOLDER_ICON if child.is_folder else PAGE_ICON
                label = Text(icon + clean_line(child.title))
                if child.child_count:
                    label.append(f" ({child.child_count:,})", style="dim")
                options.append(Option(label, id=f"page:{child.id}"))
            if view.children.total > len(view.children.pages):
                options.append(Option(Text(f"… {view.children.total - len(view.children.pages):,} more "
                                           "(o: the outline)", style="dim"), disabled=True))
        options.append(Option(Text(f"Linked from ({len(view.backlinks)})", style="bold"), disabled=True))
        if view.backlinks:
            for src in view.backlinks:
                options.append(Option(Text(f"↩ {clean_line(src.container)}/{clean_line(src.title)}"),
                                      id=f"page:{src.id}"))
        else:
            options.append(Option(Text("no page links here", style="dim"), disabled=True))
        related.add_options(options)

        comments = Text()
        comments.append(f"Comments ({len(view.comments)})\n", style="bold")
        for c in view.comments:
            comments.append(clean_line(c.author), style="bold")
            comments.append(f"  {when_ago(c.created_at, clock)}{' (edited)' if c.edited_at else ''}\n", style="dim")
            comments.append(clean_text(c.body) + "\n\n")
        if not view.comments:
            comments.append("none yet — c adds one\n", style="dim")
        self.query_one("#page-comments", Static).update(comments)

    # -- entries (spec 003) ----------------------------------------------------------------------
    def load_entries(self) -> None:
        """Read the page's entries and policy again (after the page: its id is known then)."""
        page = self.page
        if page is not None:
            self.call_in_background(read_entries, self.session.bank, page.id, self.session.handle, what="entries",
                                    on_done=self._show_entries, on_fail=self._entries_failed)

    def _show_entries(self, view: EntriesView) -> None:
        if self.page is None or view.page_id != self.page.id:
            return      # an answer for a page this screen no longer shows
        self.entries = view
        title = Text()
        title.append("Entries", style="bold")
        counts = [f"{len(view.in_use):,} in use"]
        if view.waiting:
            counts.append(f"{len(view.waiting):,} waiting")
        if view.out_of_use:
            counts.append(f"{len(view.out_of_use):,} out of use")
        title.append(f"  {', '.join(counts)}", style="dim")
        title.append("  ·  policy ", style="dim")
        title.append(view.policy, style="bold")
        title.append("  (i: the list · p: the policy · f: fold into the body)", style="dim")
        self.query_one("#page-entries-title", Static).update(title)
        self.query_one(EntryList).show(view)

    def _entries_failed(self, error: BaseException) -> None:
        self.query_one("#page-entries-title", Static).update(
            Text(f"Entries: not read — {error_text(error)}", style="red"))

    @on(EntryList.EntryChosen)
    def _entry_chosen(self, event: EntryList.EntryChosen) -> None:
        event.stop()
        self.crewlet.open_entry(event.entry_id)

    def action_entries(self) -> None:
        """To the list of entries, under the body: its first entry highlighted (enter opens it)."""
        entries = self.query_one(EntryList)
        if entries.highlighted is None:
            first = next((i for i in range(entries.option_count)
                          if not entries.get_option_at_index(i).disabled), None)
            if first is not None:
                entries.highlighted = first
        entries.focus()
        self.query_one("#page-main", VerticalScroll).scroll_to_widget(self.query_one("#page-entries-title"),
                                                                      animate=False, top=True)

    def action_side_panel(self) -> None:
        """tab: the next pane, as before the entries came — the body, the side panel, its list — past the list of
        entries, which i reaches (shift+tab goes through it)."""
        self.focus_next()
        if isinstance(self.focused, EntryList):
            self.focus_next()

    def action_policy(self) -> None:
        """Set the page's entry policy (a person's: the engine refuses an agent in one line)."""
        page, entries = self.page, self.entries
        if page is None:
            return
        from .policy import PolicyModal

        def picked(policy: str | None) -> None:
            if policy:   # the one in force again too: a no-op for a person, and an agent hears the refusal
                self.call_in_background(self.session.bank.set_policy, page.id, policy, actor=self.session.handle,
                                        what="entry policy set", on_done=self._policy_set,
                                        on_fail=self._policy_refused, on_gone=self._policy_set_words, writes=True)

        self.app.push_screen(PolicyModal(page.ref, entries.policy if entries else ""), picked)

    def _policy_set(self, policy: str) -> None:
        self.notify(f"entry policy: {policy}", markup=False)
        self.load_entries()

    def _policy_refused(self, error: BaseException) -> None:
        self.notify(refusal_words(error, self.session.handle), severity="error", markup=False, timeout=8)

    def _policy_set_words(self, policy: str) -> str:
        return f"{self.page.ref if self.page else 'the page'}: entry policy {policy}"

    # -- following links -----------------------------------------------------------------------
    @on(OptionList.OptionSelected, "#page-related")
    def _related(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        option_id = event.option.id or ""
        if option_id.startswith("page:"):
            self.crewlet.open_page(option_id[5:])

    @on(Markdown.LinkClicked)
    def _link(self, event: Markdown.LinkClicked) -> None:
        event.stop()
        self.follow_link(event.href)

    def follow_link(self, href: str) -> None:
        target = classify(href)
        if target.kind == "page":
            self.crewlet.open_page(target.value)
        elif target.kind == "external":
            self.crewlet.open_external(target.value)
        else:
            self.notify(f"not followed: {clean_line(href)} — {target.value}", severity="warning", markup=False)

    # -- actions ---------------------------------------------------------------------------------
    def action_scroll(self, where: str) -> None:
        main = self.query_one("#page-main", VerticalScroll)
        {"down": main.scroll_down, "up": main.scroll_up, "home": main.scroll_home, "end": main.scroll_end}[where]()

    def action_trash_list(self) -> None:
        self.crewlet.show("trash")

    def action_edit(self) -> None:
        if self.page is not None:
            if self.page.trashed_at:
                self.notify("this page is in the trash — restore it before editing", severity="warning")
                return
            self.crewlet.open_editor(self.page)

    def action_take_over(self) -> None:
        """Take a generated page over: authored from now on, never rebuilt (a person's; the engine refuses an
        agent in one line). Asked first: its builds stop for good."""
        page = self.page
        if page is None:
            return
        from core.bank.generated import take_over

        from .modals import ConfirmModal

        def confirmed(yes: bool | None) -> None:
            if yes:
                self.call_in_background(take_over, self.kb, page.id, actor=self.session.handle, what="taken over",
                                        on_done=self._taken_over, on_fail=self._policy_refused,
                                        on_gone=self._taken_over_words, writes=True)

        self.app.push_screen(ConfirmModal(f"Take over {page.title}?", "It becomes an authored page: you edit it, and "
                                          "it is never rebuilt from its entries again.", yes="Take it over",
                                          no="Cancel", id="take-over"), confirmed)

    def _taken_over(self, _result: dict[str, Any]) -> None:
        self.notify(self._taken_over_words(_result), markup=False)
        self.reload()

    def _taken_over_words(self, _result: dict[str, Any]) -> str:
        return f"{self.page.ref if self.page else 'the page'} is an authored page now: e edits it"

    def action_fold(self) -> None:
        """Consolidate: the editor opens on the body with the page's standing entries appended, to be written into
        it; a person's save proposes and accepts in one step (spec 003, "Consolidation")."""
        page, entries = self.page, self.entries
        if page is None or entries is None or entries.page_id != page.id:
            return
        if page.trashed_at:
            self.notify("this page is in the trash — restore it before consolidating", severity="warning")
            return
        standing = [e for e in entries.in_use if e.status == "STANDING"]
        if not standing:
            self.notify("no standing entries to fold into the body", severity="warning")
            return
        from .edit import EditScreen, FoldIn, too_long_to_edit

        text = page.body.rstrip("\n") + "\n\n" + "".join(f"- {' '.join(e.body.split())}\n" for e in standing)
        why = too_long_to_edit(text)
        if why:
            self.notify(why, title="not opened in the editor", severity="warning", markup=False, timeout=12)
            return
        self.app.push_screen(EditScreen(page, fold=FoldIn([e.id for e in standing], text)))

    def action_history(self) -> None:
        if self.page is not None:
            self.crewlet.open_history(self.page)

    def action_outline(self) -> None:
        if self.page is not None:
            self.crewlet.open_outline(self.page.container)

    def action_comment(self) -> None:
        page = self.page
        if page is None:
            return

        def add(text: str | None) -> None:
            if text and text.strip():
                self.call_in_background(self.kb.add_comment, page.id, text, actor=self.session.handle,
                                        what="commented", on_done=self._commented, on_gone=self._commented_words,
                                        writes=True)

        self.app.push_screen(InputModal("Comment", f"on “{page.title}”, as {self.session.handle}", ok="Add"), add)

    def _commented(self, _comment: Comment) -> None:
        self.notify("comment added")
        self.reload()

    # what an answer says when it lands after the page screen was left (the app notifies it)
    def _commented_words(self, comment: Comment) -> str:
        return f"comment added on {self.page.ref}" if self.page is not None else "comment added"

    def _changed_words(self, page: Page) -> str:
        return f"{page.ref}: done"

    def _trashed_words(self, page: Page) -> str:
        return f"{page.ref} is in the trash"

    def _folder_created_words(self, page: Page) -> str:
        return f"created folder {page.ref}"

    def action_new_child(self) -> None:
        page = self.page
        if page is None:
            return

        def created(answer: dict[str, Any] | None) -> None:
            if not answer:
                return
            parent = answer["parent"]
            if answer["folder"]:
                self.call_in_background(self.kb.create_page, page.container, answer["title"], "",
                                        actor=self.session.handle, parent=parent.id if parent else None,
                                        what="created", on_done=self._folder_created,
                                        on_gone=self._folder_created_words, writes=True)
            else:
                self.crewlet.open_new_page(page.container, answer["title"], parent)

        self.app.push_screen(NewPageModal(page.container, page), created)

    def _folder_created(self, page: Page) -> None:
        self.notify(f"created folder {clean_line(page.title)}", markup=False)
        self.reload()

    def action_rename(self) -> None:
        page = self.page
        if page is not None:
            ask_rename(self, page, what="changed", on_done=self._changed, on_gone=self._changed_words)

    def action_move(self) -> None:
        page = self.page
        if page is not None:
            ask_move(self, page, what="changed", on_done=self._changed, on_gone=self._changed_words)

    def _changed(self, page: Page) -> None:
        self.notify(f"{clean_line(page.ref)}: done", markup=False)
        for warning in getattr(page, "warnings", []) or []:
            self.notify(clean_line(str(warning.get("message") or warning)), severity="warning", markup=False)
        self.reload()

    def action_trash(self) -> None:
        page = self.page
        if page is not None:
            ask_trash(self, page, what="trashed", on_done=self._trashed, on_gone=self._trashed_words)

    def _trashed(self, page: Page) -> None:
        self.notify(f"{clean_line(page.ref)} is in the trash (u restores it)", markup=False)
        self.reload()

    def action_restore(self) -> None:
        page = self.page
        if page is not None and page.trashed_at:
            self.call_in_background(self.kb.restore_page, page.id, actor=self.session.handle, what="restored",
                                    on_done=self._restored, writes=True)

    def _restored(self, page: Page) -> None:
        self.notify(f"restored {clean_line(page.ref)}", markup=False)
        self.reload()
