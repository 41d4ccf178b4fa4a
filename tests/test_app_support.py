"""Helpers the app tests share (this module holds no tests of its own).

Real homes on disk: `init_home(Home(tmp/'h'), example_config())`, pages made through KnowledgeBase,
the app made by the same `make_app` the CLI uses, driven by Pilot at a fixed size with no cursor blink.
"""
from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from core import config as config_mod  # noqa: E402
from core.log import Record  # noqa: E402
from core.node import Node, init_home  # noqa: E402
from core.pages.service import KnowledgeBase, new_id  # noqa: E402
from core.paths import Home  # noqa: E402
from crewlet_tui.app import CrewletApp, make_app  # noqa: E402

SIZE = (100, 32)
CLOCK = lambda: 1_900_000_000.0  # noqa: E731 - a fixed "now" for "5m ago"


def new_home(tmp_path: Path, name: str = "h", config: dict[str, Any] | None = None) -> Home:
    home = Home(tmp_path / name)
    init_home(home, config if config is not None else config_mod.example_config())
    return home


@contextmanager
def open_kb(home: Home) -> Iterator[KnowledgeBase]:
    node = Node.open(home)
    try:
        yield KnowledgeBase(node)
    finally:
        node.close()


def bulk_pages(kb: KnowledgeBase, container: str, n: int, *, parent_id: str | None = None, prefix: str = "Page",
               actor: str = "alex", batch: int = 1000) -> None:
    """n pages at one level, as page.create records submitted in batches (fast)."""
    for start in range(0, n, batch):
        records = [Record.new("page.create", actor, {"page_id": new_id(), "container": container,
                                                    "title": f"{prefix} {i:05d}", "body": f"body {i}",
                                                    "parent_id": parent_id})
                   for i in range(start, min(n, start + batch))]
        kb.node.submit(records, sync=False)


def app_for(home: Home, actor: str | None = None, **options: Any) -> CrewletApp:
    options.setdefault("clock", CLOCK)
    options.setdefault("cursor_blink", False)
    options.setdefault("start_indexer", False)
    options.setdefault("allow_external", False)
    return make_app(home, actor, **options)


async def wait_until(pilot: Any, predicate: Callable[[], Any], timeout: float = 10.0, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        await pilot.pause(0.01)
        try:
            if predicate():
                return
        except Exception:  # noqa: BLE001 - a widget not mounted yet
            pass
    raise AssertionError(f"timed out waiting for {what or predicate}")


def screen_name(app: CrewletApp) -> str:
    return type(app.screen).__name__


async def wait_screen(pilot: Any, name: str, timeout: float = 10.0) -> None:
    """Until the top screen is `name` and mounted: a pushed screen is on top before its widgets are
    composed, and a busy machine shows the gap."""
    await wait_until(pilot, lambda: screen_name(pilot.app) == name and pilot.app.screen.is_mounted, timeout,
                     f"screen {name}")


def rendered_text(app: CrewletApp) -> str:
    """What the terminal would show, as text (the SVG screenshot's characters, unescaped)."""
    import html
    import re

    svg = app.export_screenshot()
    texts = re.findall(r"<text[^>]*>(.*?)</text>", svg, flags=re.S)
    return html.unescape("".join(texts)).replace("\xa0", " ")


async def wait_rendered(pilot: Any, *texts: str, timeout: float = 10.0) -> str:
    """The screen's text once every one of `texts` shows in it (a widget paints on a later refresh than
    the change that fills it, and a footer after its screen's bindings settle)."""
    await wait_until(pilot, lambda: all(t in rendered_text(pilot.app) for t in texts), timeout,
                     f"{texts} on the screen")
    return rendered_text(pilot.app)


def build_index(home: Home) -> None:
    from core.search.indexer import Indexer

    with Indexer(home) as indexer:
        indexer.run_pass(wait=True)


async def open_editor(pilot: Any, app: Any, ref: str) -> Any:
    """Open REF's page, then its editor; returns the EditScreen."""
    await wait_screen(pilot, "SpacesScreen")
    app.open_page(ref)
    await wait_screen(pilot, "PageScreen")
    await wait_until(pilot, lambda: app.screen.view is not None)
    await pilot.press("e")
    await wait_screen(pilot, "EditScreen")
    await wait_until(pilot, lambda: app.screen.editor is not None)
    return app.screen
