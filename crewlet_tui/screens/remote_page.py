"""A page of a remote knowledge base (Confluence, Plane), read live through its page API.

There is no local copy, so nothing here edits, outlines or lists revisions: the screen says where the
page lives and as whom it was read, shows its body as Markdown (read-only), and `o` opens it in the
browser, where the backend's own history and editor are.
"""
from __future__ import annotations

from typing import Any

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.widgets import Markdown, Static

from ..links import classify
from ..sanitize import clean_line
from ..widgets.page_view import PageBody
from .base import COMMON_BINDINGS, CrewletScreen, error_text


class RemotePageScreen(CrewletScreen):
    CSS_PATH = "remote_page.tcss"
    BINDINGS = [
        Binding("o", "open_in_browser", "Open in browser"),
        Binding("r", "reload", "Reload"),
        Binding("j", "scroll('down')", "Down", show=False),
        Binding("k", "scroll('up')", "Up", show=False),
        *COMMON_BINDINGS,
    ]

    def __init__(self, ref: str) -> None:
        super().__init__(classes="remote-page-screen")
        self.ref = ref
        self.page: Any = None

    def compose(self) -> ComposeResult:
        yield from self.compose_header()
        with VerticalScroll(id="remote-main"):
            yield Static(id="remote-title", classes="page-title")
            yield Static(id="remote-trail", classes="page-trail")
            yield Static(id="remote-where", classes="notice")
            yield PageBody(id="remote-body")
        yield from self.compose_footer()

    def on_mount(self) -> None:
        self.query_one("#remote-title", Static).update(Text("loading…", style="dim"))
        self.query_one("#remote-main").focus()
        self.action_reload()

    def action_reload(self) -> None:
        self.call_in_background(self.session.searcher.get_page, self.ref, actor=self.session.handle, what="page",
                                on_done=self._page_read, on_fail=self._page_failed)

    def _page_read(self, page: Any) -> None:
        self.page = page
        self.sub_title = clean_line(page.ref)
        self.query_one("#remote-title", Static).update(Text(clean_line(page.title), style="bold"))
        self.query_one("#remote-trail", Static).update(
            Text(" › ".join(clean_line(x) for x in [page.container, *page.ancestors]), style="dim"))
        who = "your own credential" if page.source.get("credential") == "own" else "the company's credential"
        where = Text(f"Read live from {clean_line(self.session.where())} as {who} — there is no local copy, "
                     "so no revisions or outline here; ")
        where.append("o", style="bold")
        where.append(" opens it in the browser.")
        self.query_one("#remote-where", Static).update(where)
        self.query_one("#remote-body", PageBody).show(page.body)

    def _page_failed(self, error: BaseException) -> None:
        self.query_one("#remote-title", Static).update(Text(f"cannot open {clean_line(self.ref)}", style="bold red"))
        self.query_one("#remote-trail", Static).update(Text(error_text(error)))

    def action_open_in_browser(self) -> None:
        if self.page is not None and self.page.url:
            target = classify(self.page.url)
            if target.kind == "external":
                self.crewlet.open_external(target.value)
                return
        self.notify("this page has no link to open", severity="warning")

    def action_scroll(self, where: str) -> None:
        main = self.query_one("#remote-main", VerticalScroll)
        {"down": main.scroll_down, "up": main.scroll_up}[where]()

    @on(Markdown.LinkClicked)
    def _link(self, event: Markdown.LinkClicked) -> None:
        event.stop()
        target = classify(event.href)
        if target.kind == "external":
            self.crewlet.open_external(target.value)
        else:
            self.notify(f"not followed: {clean_line(event.href)} — {target.value}", severity="warning", markup=False)
