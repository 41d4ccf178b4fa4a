"""A space's outline as a lazy tree: one level at a time, each read when its row opens.

Each level is one `KnowledgeBase.list_pages` window (at most 500 pages) read in a thread worker
while a "loading…" row stands in; a level with more pages than the window ends in a "more…" row
that reads the next window from the listing's cursor. Every row shows its page's child count, and a
page whose count is 0 is added as a leaf, so the tree never offers to open onto an empty level.
"""
from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rich.cells import cell_len
from rich.text import Text
from textual import on, work
from textual.binding import Binding
from textual.message import Message
from textual.widgets import Tree
from textual.widgets.tree import TreeNode
from textual.worker import get_current_worker

from core.pages.model import Page, Window

from ..fmt import plural
from ..error_words import error_text
from ..sanitize import clean_line

if TYPE_CHECKING:
    from core.pages.service import KnowledgeBase

LOADING = "loading…"
FOLDER_ICON = "▣ "
PAGE_ICON = "≡ "


@dataclass
class Entry:
    kind: str                     # "level" (the root: a space's top) | "page" | "more" | "loading" | "top"
    page: Page | None = None
    cursor: str | None = None     # for "more": where the next window starts
    loaded: bool = False          # for "page"/"level": its level has been read (or is being read)
    shown: int = 0                # pages of this level shown so far
    total: int = 0

    @property
    def page_id(self) -> str | None:
        return self.page.id if self.page else None


def page_label(page: Page) -> Text:
    label = Text(FOLDER_ICON if page.is_folder else PAGE_ICON)
    label.append(clean_line(page.title), style="bold" if page.is_folder else "")
    if page.child_count:
        label.append(f"  ({page.child_count:,})", style="dim")
    return label


class PageTree(Tree[Entry]):
    """The outline of one space. `pick_mode` is the move dialog's: a "top of the space" row first,
    and one page (with everything under it) left out, since a page cannot go beneath itself."""

    _batching = 0                 # > 0 inside `_one_invalidation()`
    _reopen: set[str]             # page ids to reopen as their levels arrive after a reload
    _reselect: str | None         # the page the cursor was on before a reload
    _invalidated_in_batch = False

    BINDINGS = [
        Binding("j", "cursor_down", "Down", show=False),
        Binding("k", "cursor_up", "Up", show=False),
        Binding("l,right", "open_row", "Expand", show=False),
        Binding("h,left", "close_row", "Collapse", show=False),
        Binding("g,home", "scroll_home", "First", show=False),
        Binding("G,end", "scroll_end", "Last", show=False),
    ]

    class LevelLoaded(Message):
        """A window of one level was read (posted from the worker)."""

        def __init__(self, node: TreeNode[Entry], window: Window, after: str | None) -> None:
            super().__init__()
            self.node, self.window, self.after = node, window, after

    class LevelFailed(Message):
        def __init__(self, node: TreeNode[Entry], error: Exception) -> None:
            super().__init__()
            self.node, self.error = node, error

    class PageChosen(Message):
        """Enter on a page row (or, in pick mode, on the "top" row: page None)."""

        def __init__(self, tree: PageTree, page: Page | None) -> None:
            super().__init__()
            self.tree, self.page = tree, page

        @property
        def control(self) -> PageTree:
            return self.tree

    def __init__(self, kb: KnowledgeBase, container: str, *, actor: str | None = None, pick_mode: bool = False,
                 exclude_id: str | None = None, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(Text(clean_line(container)), Entry("level"), id=id, classes=classes)
        self.kb = kb
        self.actor = actor    # who reads the outline (the knowledge base refuses one without the knowledge app)
        self.container = container
        self.pick_mode = pick_mode
        self.exclude_id = exclude_id
        self.show_root = False
        self.auto_expand = False
        self.guide_depth = 3
        self.first_window_shown = False
        self._reopen = set()
        self._reselect = None

    def process_label(self, label: Any) -> Text:
        # a page title is never markup: build the Text ourselves, never Text.from_markup
        if isinstance(label, str):
            return Text(clean_line(label))
        if isinstance(label, Text) and "\n" not in label.plain:
            # already one line (every label here is built from clean_line): Tree's own processing would
            # only copy it, and TreeNode.add processes each label twice
            return label
        return super().process_label(label)

    def get_label_width(self, node: TreeNode[Entry]) -> int:
        # Tree's own measures render_label(node).cell_len, building a styled Text for every row each
        # time the tree's lines are rebuilt; this class keeps Tree's render_label, so its width is the
        # label's plus the expander's
        width = node.label.cell_len if isinstance(node.label, Text) else cell_len(str(node.label))
        if node.allow_expand:
            width += cell_len(self.ICON_NODE_EXPANDED if node.is_expanded else self.ICON_NODE)
        return width

    # -- adding many rows at once ----------------------------------------------------------------
    def _invalidate(self) -> None:
        # Tree.add/add_leaf/remove each drop the tree's line cache and ask for a layout; inside
        # `_one_invalidation()` that happens once, when the batch ends. (Tree._invalidate is Textual's
        # own, private: were it renamed, this would only stop batching, never show stale rows.)
        if self._batching:
            self._invalidated_in_batch = True
            return
        super()._invalidate()

    @contextmanager
    def _one_invalidation(self) -> Iterator[None]:
        """Add or remove many rows with one invalidation of the tree instead of one per row. Nothing
        inside may read the tree's lines (cursor_line, last_line, …): they are stale until it ends."""
        self._batching += 1
        try:
            yield
        finally:
            self._batching -= 1
            if not self._batching and self._invalidated_in_batch:
                self._invalidated_in_batch = False
                self._invalidate()

    def on_mount(self) -> None:
        if self.pick_mode:
            self.root.add_leaf(Text(f"⤒ the top of {clean_line(self.container)}", style="italic"), Entry("top"))
        self.root.expand()
        self._start_level(self.root)

    # -- loading ---------------------------------------------------------------------------
    def _start_level(self, node: TreeNode[Entry], after: str | None = None) -> None:
        assert node.data is not None
        node.data.loaded = True
        node.add_leaf(Text(LOADING, style="dim italic"), Entry("loading"))
        parent_id = node.data.page_id if node.data.kind == "page" else None
        self._read_level(node, parent_id, after)

    @work(thread=True, group="outline-levels")
    def _read_level(self, node: TreeNode[Entry], parent_id: str | None, after: str | None) -> None:
        worker = get_current_worker()
        try:
            window = self.kb.list_pages(self.container, parent=parent_id, after=after, actor=self.actor)
        except Exception as exc:  # noqa: BLE001 - shown in the tree, never a crash
            if not worker.is_cancelled:
                self.post_message(self.LevelFailed(node, exc))
            return
        if not worker.is_cancelled:
            self.post_message(self.LevelLoaded(node, window, after))

    def _drop_placeholders(self, node: TreeNode[Entry]) -> None:
        for child in list(node.children):
            if child.data is not None and child.data.kind == "loading":
                child.remove()

    @on(LevelLoaded)
    def _level_loaded(self, event: LevelLoaded) -> None:
        event.stop()
        node, window = event.node, event.window
        if not self._still_here(node):  # the row went away meanwhile (collapsed tree reloaded)
            return
        entry = node.data
        assert entry is not None
        with self._one_invalidation():  # a window is up to 500 rows and the "more…" row
            self._drop_placeholders(node)
            for page in window.pages:
                if page.id == self.exclude_id:
                    continue
                data = Entry("page", page)
                if page.child_count > 0:
                    node.add(page_label(page), data, allow_expand=True)
                else:
                    node.add_leaf(page_label(page), data)
            entry.shown += len(window.pages)
            entry.total = window.total
            if window.next_cursor:
                more = Text(f"more… ({entry.shown:,} of {plural(window.total, 'page')} shown — enter for the "
                            f"next {min(500, window.total - entry.shown):,})", style="italic cyan")
                node.add_leaf(more, Entry("more", cursor=window.next_cursor))
        self._restore(node)
        if node is self.root and not self.first_window_shown:
            self.first_window_shown = True
            if self.cursor_line < 0 and self.last_line >= 0:
                self.cursor_line = 0
        if node is self.root and not window.pages and not self.pick_mode:
            node.add_leaf(Text("(nothing here yet — n writes a page, f makes a folder)", style="dim italic"),
                          Entry("loading"))

    def _walk(self, node: TreeNode[Entry]) -> Iterator[TreeNode[Entry]]:
        for child in node.children:
            yield child
            yield from self._walk(child)

    def _restore(self, node: TreeNode[Entry]) -> None:
        """After a reload: reopen what was open under this level, and find the cursor's page again."""
        for child in node.children:
            page_id = child.data.page_id if child.data is not None else None
            if page_id is None:
                continue
            if page_id in self._reopen and child.allow_expand:
                self._reopen.discard(page_id)
                child.expand()      # its level is read like any other (NodeExpanded → _start_level)
            if page_id == self._reselect:
                self._reselect = None
                self.call_after_refresh(self.move_cursor, child)

    def _still_here(self, node: TreeNode[Entry]) -> bool:
        """Is this row still in the tree (not removed, not from before a reload)?"""
        current = node
        while current.parent is not None:
            if not any(child is current for child in current.parent.children):
                return False
            current = current.parent
        return current is self.root

    @on(LevelFailed)
    def _level_failed(self, event: LevelFailed) -> None:
        event.stop()
        if not self._still_here(event.node):
            return
        self._drop_placeholders(event.node)
        if event.node.data is not None:
            event.node.data.loaded = False
        event.node.add_leaf(Text(f"could not read this level: {error_text(event.error)}", style="red"),
                            Entry("loading"))

    def reload(self) -> None:
        """Read the space's top again (after a create, move, rename or trash), reopening the rows that
        were open and putting the cursor back on the page it was on, as each level arrives."""
        self._reopen = {n.data.page_id for n in self._walk(self.root)
                        if n.is_expanded and n.data is not None and n.data.kind == "page" and n.data.page_id}
        self._reselect = self.highlighted_page.id if self.highlighted_page else None
        self.clear()
        self.root.data = Entry("level")
        self.first_window_shown = False
        if self.pick_mode:
            self.root.add_leaf(Text(f"⤒ the top of {clean_line(self.container)}", style="italic"), Entry("top"))
        self._start_level(self.root)

    # -- opening rows ----------------------------------------------------------------------
    @on(Tree.NodeExpanded)
    def _expanded(self, event: Tree.NodeExpanded[Entry]) -> None:
        entry = event.node.data
        if entry is not None and entry.kind == "page" and not entry.loaded:
            self._start_level(event.node)

    @on(Tree.NodeSelected)
    def _selected(self, event: Tree.NodeSelected[Entry]) -> None:
        event.stop()
        entry = event.node.data
        if entry is None:
            return
        if entry.kind == "more":
            parent = event.node.parent
            cursor = entry.cursor
            event.node.remove()
            if parent is not None:
                self._start_level(parent, after=cursor)
        elif entry.kind == "page":
            self.post_message(self.PageChosen(self, entry.page))
        elif entry.kind == "top":
            self.post_message(self.PageChosen(self, None))

    def action_open_row(self) -> None:
        node = self.cursor_node
        if node is None:
            return
        if node.allow_expand and not node.is_expanded:
            node.expand()
        elif node.is_expanded and node.children:
            self.move_cursor(node.children[0])

    def action_close_row(self) -> None:
        node = self.cursor_node
        if node is None:
            return
        if node.is_expanded:
            node.collapse()
        elif node.parent is not None and node.parent is not self.root:
            self.move_cursor(node.parent)

    @property
    def highlighted_page(self) -> Page | None:
        node = self.cursor_node
        if node is not None and node.data is not None and node.data.kind == "page":
            return node.data.page
        return None

    def level_nodes(self, node: TreeNode[Entry] | None = None) -> list[TreeNode[Entry]]:
        """The rows under a node (the top when None): for tests and the bench."""
        return list((node or self.root).children)
