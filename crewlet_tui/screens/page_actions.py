"""Rename, move and trash a page: ask, then make the call in a thread worker. Shared by the outline
(the highlighted page) and the page screen (the page shown); each screen passes its own handlers for the
answer (`on_done`, and `on_gone` for the words said when the answer lands after the screen was left) and
`what`, the call in a person's words."""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from core.pages.model import Page

from .modals import ConfirmModal, InputModal, MoveModal

if TYPE_CHECKING:
    from .base import CrewletScreen

Done = Callable[[Page], object]
GoneWords = Callable[[Page], str | None]


def ask_rename(screen: CrewletScreen, page: Page, *, what: str, on_done: Done,
               on_gone: GoneWords | None = None) -> None:
    def renamed(title: str | None) -> None:
        if title and title != page.title:
            screen.call_in_background(screen.kb.rename_page, page.id, title, actor=screen.session.handle,
                                      what=what, on_done=on_done, on_gone=on_gone, writes=True)

    screen.app.push_screen(InputModal("Rename", f"New title for “{page.title}” (its address moves with it)",
                                      value=page.title, ok="Rename"), renamed)


def ask_move(screen: CrewletScreen, page: Page, *, what: str, on_done: Done,
               on_gone: GoneWords | None = None) -> None:
    def moved(answer: dict[str, Any] | None) -> None:
        if answer is not None:
            parent = answer["parent"]
            screen.call_in_background(screen.kb.move_page, page.id, parent.id if parent else None,
                                      actor=screen.session.handle, what=what, on_done=on_done, on_gone=on_gone,
                                      writes=True)

    screen.app.push_screen(MoveModal(screen.kb, page, screen.session.handle), moved)


def ask_trash(screen: CrewletScreen, page: Page, *, what: str, on_done: Done,
               on_gone: GoneWords | None = None) -> None:
    def confirmed(yes: bool | None) -> None:
        if yes:
            screen.call_in_background(screen.kb.trash_page, page.id, actor=screen.session.handle, what=what,
                                      on_done=on_done, on_gone=on_gone, writes=True)

    screen.app.push_screen(ConfirmModal("Move to the trash?", f"“{page.title}” goes to the trash; it can be "
                                        "restored for 30 days.", yes="Trash it"), confirmed)
