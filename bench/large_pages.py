"""Large pages in the app, timed through Pilot against a normal page (the peer) in the same run.

    python bench/large_pages.py [--rounds 2] [--keys 8] [--shapes short,long] [--size 80x24]

Two shapes of a large page: `short` — 100,000 short lines (about 5.5 MB), `long` — 250 lines of 20,000
characters (5 MB). Each round opens the peer and each large page in turn (so load drifts hit all of them)
and times, from the key to the screen settled:

  open      the page screen, from open_page to its body shown
  pagedown  PageDown in the page's body (`--keys` presses)
  help      `?` until the help screen is up, and escape back
  edit      `e` until the editor is up (or the app has said why it will not open it)
  type      one letter typed in the editor (`--keys` presses)

Prints each measure's median and p90 per page, and the ratio of medians to the peer, with the load. Never
asserts a time (tests/test_app_large_pages.py checks the behaviour).
"""
from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
for p in (ROOT, ROOT / "tests"):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

from bench._common import machine_load, percentile  # noqa: E402
from test_app_support import app_for, new_home, open_kb, wait_screen, wait_until  # noqa: E402

LONG_WAIT_S = 600.0
# the 5 MB shapes are over the default [limits] page_body_bytes (1 MiB): the bench's company raises it, as a
# company that keeps such pages would
LIMITS = {"page_body_bytes": 8 * 1024 * 1024}


def short_lines_body(lines: int = 100_000) -> str:
    """About 5.5 MB: a heading, then numbered lines of about 55 characters (a log, a long table)."""
    return "# A long list\n\n" + "".join(f"- line {i:06d}: the quick brown fox jumps over it again\n" for i in range(lines))


def long_lines_body(lines: int = 250, width: int = 20_000) -> str:
    """5 MB in 250 paragraphs of 20,000 characters (prose pasted without line breaks)."""
    words = ("lorem ipsum dolor sit amet consectetur adipiscing elit " * (width // 50 + 1))[:width]
    return "\n".join(words for _ in range(lines)) + "\n"


def peer_body() -> str:
    return "# A normal page\n\n" + "\n\n".join(f"## Step {i}\n\n" + "a sentence of the runbook. " * 12
                                               for i in range(12)) + "\n"


async def settled(pilot) -> None:  # type: ignore[no-untyped-def]
    await pilot.pause()
    await pilot.pause()


async def measure_page(app, pilot, page_id: str, keys: int, out: dict[str, list[float]]) -> str:  # type: ignore[no-untyped-def]
    t = time.perf_counter()
    app.open_page(page_id)
    await wait_screen(pilot, "PageScreen", timeout=LONG_WAIT_S)
    screen = app.screen
    await wait_until(pilot, lambda: screen.view is not None, timeout=LONG_WAIT_S)
    await settled(pilot)
    out["open"].append(time.perf_counter() - t)

    screen.query_one("#page-main").focus()
    for _ in range(keys):
        t = time.perf_counter()
        await pilot.press("pagedown")
        await settled(pilot)
        out["pagedown"].append(time.perf_counter() - t)

    t = time.perf_counter()
    await pilot.press("question_mark")
    await wait_screen(pilot, "HelpScreen", timeout=LONG_WAIT_S)
    await settled(pilot)
    out["help"].append(time.perf_counter() - t)
    await pilot.press("escape")
    await wait_until(pilot, lambda: app.screen is screen, timeout=LONG_WAIT_S)
    await settled(pilot)

    notes = len(app._notifications)
    t = time.perf_counter()
    await pilot.press("e")
    await wait_until(pilot, lambda: type(app.screen).__name__ == "EditScreen" or len(app._notifications) > notes,
                     timeout=LONG_WAIT_S)
    await settled(pilot)
    out["edit"].append(time.perf_counter() - t)
    if type(app.screen).__name__ != "EditScreen":
        return "the editor said why not: " + list(app._notifications)[-1].message[:80]
    editing = app.screen
    what = "editor: " + ("plain" if getattr(editing, "plain", False) else "Markdown highlighting")
    for i in range(keys):
        t = time.perf_counter()
        await pilot.press("abcdefgh"[i % 8])
        await settled(pilot)
        out["type"].append(time.perf_counter() - t)
    await pilot.press("escape")
    await wait_until(pilot, lambda: app.screen.id == "leave-unsaved", timeout=LONG_WAIT_S)
    await pilot.press("y")
    await wait_until(pilot, lambda: app.screen is screen, timeout=LONG_WAIT_S)
    await pilot.press("escape")
    await wait_screen(pilot, "SpacesScreen", timeout=LONG_WAIT_S)
    return what


async def one_round(shapes: list[str], keys: int, size: tuple[int, int],
                    results: dict[str, dict[str, list[float]]], said: dict[str, str]) -> None:
    from conftest import config_with

    home = new_home(Path(tempfile.mkdtemp(prefix="crewlet-large-pages-")), config=config_with(limits=LIMITS))
    bodies = {"peer": peer_body(), "short": short_lines_body(), "long": long_lines_body()}
    ids = {}
    with open_kb(home) as kb:
        for name in ["peer", *shapes]:
            ids[name] = kb.create_page("ENG", f"Page {name}", bodies[name], actor="alex").id
    app = app_for(home, "alex")
    async with app.run_test(size=size) as pilot:
        await wait_screen(pilot, "SpacesScreen")
        for name in ["peer", *shapes]:
            said[name] = await measure_page(app, pilot, ids[name], keys, results[name])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--keys", type=int, default=8)
    ap.add_argument("--shapes", default="short,long")
    ap.add_argument("--size", default="80x24")
    args = ap.parse_args()
    shapes = [s for s in args.shapes.split(",") if s]
    cols, rows = (int(x) for x in args.size.split("x"))
    results: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    said: dict[str, str] = {}
    for _ in range(args.rounds):
        asyncio.run(one_round(shapes, args.keys, (cols, rows), results, said))
    sizes = {"peer": len(peer_body()), "short": len(short_lines_body()), "long": len(long_lines_body())}
    print(f"large pages in the app at {args.size}, {args.rounds} rounds × {args.keys} keys; {machine_load()}")
    for name in ["peer", *shapes]:
        print(f"  {name:5} ({sizes[name]:,} characters) — {said.get(name, '')}")
        for what in ("open", "pagedown", "help", "edit", "type"):
            xs = results[name].get(what)
            if not xs:
                continue
            peer = results["peer"].get(what)
            ratio = f"  ×{statistics.median(xs) / statistics.median(peer):.1f} the peer" if peer and name != "peer" else ""
            print(f"    {what:9} median {1000 * statistics.median(xs):7.0f} ms  p90 {1000 * percentile(xs, 90):7.0f} ms{ratio}")


if __name__ == "__main__":
    main()
