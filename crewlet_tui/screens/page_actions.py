"""Rename, move and trash a page: ask, then make the call in a thread worker. Shared by the outline
(the highlighted page) and the page screen (the page shown); `tag` names the `got_<tag>` handler."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from core.pages.model import Page

from .modals import ConfirmModal, InputModal, MoveModal

if TYPE_CHECKING:
    from .base import CrewletScreen


def ask_rename(screen: "CrewletScreen", page: Page, tag: str) -> None:
    def renamed(title: str | None) -> None:
        if title and title != page.title:
            screen.call_in_background(tag, screen.kb.rename_page, page.id, title, actor=screen.session.handle,
                                      writes=True)

    screen.app.push_screen(InputModal("Rename", f"New title for “{page.title}” (its address moves with it)",
                                      value=page.title, ok="Rename"), renamed)


def ask_move(screen: "CrewletScreen", page: Page, tag: str) -> None:
    def moved(answer: dict[str, Any] | None) -> None:
        if answer is not None:
            parent = answer["parent"]
            screen.call_in_background(tag, screen.kb.move_page, page.id, parent.id if parent else None,
                                      actor=screen.session.handle, writes=True)

    screen.app.push_screen(MoveModal(screen.kb, page, screen.session.handle), moved)


def ask_trash(screen: "CrewletScreen", page: Page, tag: str) -> None:
    def confirmed(yes: bool | None) -> None:
        if yes:
            screen.call_in_background(tag, screen.kb.trash_page, page.id, actor=screen.session.handle, writes=True)

    screen.app.push_screen(ConfirmModal("Move to the trash?", f"“{page.title}” goes to the trash; it can be "
                                        "restored for 30 days.", yes="Trash it"), confirmed)
