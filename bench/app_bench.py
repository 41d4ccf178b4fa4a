"""How long the app's outline takes to show a big space's first window, next to the listing alone.

    python bench/app_bench.py [--pages 10000] [--runs 5] [--size 100x32]

Builds a throwaway home whose ENG space holds --pages pages at its top level (page.create records
through Node.submit in batches of 1,000), then measures:

* listing — `KnowledgeBase.list_pages("ENG")` run by itself: the same query the outline makes for its
  first window of 500 (with the level's total and each page's child count);
* outline — in the app (Pilot, headless, fixed size): from opening the space's outline to the tree's
  first level populated (500 rows and the "more…" row), which includes the thread worker, the message
  back, building the rows and the "loading…" placeholder's removal.

Prints the median of --runs of each (the first run of each is a warm-up and not counted) and the ratio.
Benchmarks print; they never assert a time.
"""
from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from core import config as config_mod  # noqa: E402
from core.log import Record  # noqa: E402
from core.node import Node, init_home  # noqa: E402
from core.pages.service import KnowledgeBase, new_id  # noqa: E402
from core.paths import Home  # noqa: E402
from crewlet_tui.app import make_app  # noqa: E402

BATCH = 1000
SPACE = "ENG"


def build(root: Path, pages: int) -> tuple[Home, float]:
    home = Home(root / "home")
    init_home(home, config_mod.example_config())
    started = time.perf_counter()
    with Node.open(home) as node:
        for start in range(0, pages, BATCH):
            records = [Record.new("page.create", "alex", {"page_id": new_id(), "container": SPACE,
                                                         "title": f"Page {i:06d}", "body": f"page {i}\n",
                                                         "parent_id": None})
                       for i in range(start, min(pages, start + BATCH))]
            outcomes = node.submit(records)
            refused = [o for o in outcomes if o.status == "refused"]
            if refused:
                raise SystemExit(f"a create was refused: {refused[0].reason}")
    return home, time.perf_counter() - started


def time_listing(home: Home, runs: int) -> list[float]:
    with Node.open(home) as node:
        kb = KnowledgeBase(node)
        times = []
        for _ in range(runs + 1):
            t0 = time.perf_counter()
            window = kb.list_pages(SPACE)
            times.append(time.perf_counter() - t0)
            assert len(window.pages) == min(500, window.total) and window.total > 0
        return times[1:]


async def time_outline(home: Home, runs: int, size: tuple[int, int]) -> list[float]:
    app = make_app(home, cursor_blink=False, start_indexer=False, allow_external=False)
    times = []
    async with app.run_test(size=size) as pilot:
        deadline = time.monotonic() + 30
        while type(app.screen).__name__ != "SpacesScreen":
            await pilot.pause(0.01)
            if time.monotonic() > deadline:
                raise SystemExit("the app did not open")
        for _ in range(runs + 1):
            t0 = time.perf_counter()
            app.open_outline(SPACE)
            while True:
                await asyncio.sleep(0)
                screen = app.screen
                try:
                    tree = screen.tree if type(screen).__name__ == "OutlineScreen" else None
                    if tree is not None and tree.first_window_shown:
                        break
                except Exception:  # noqa: BLE001 - not composed yet
                    pass
                if time.perf_counter() - t0 > 60:
                    raise SystemExit("the outline did not show its first window")
            times.append(time.perf_counter() - t0)
            rows = tree.level_nodes()
            assert len(rows) == 501 and rows[-1].data.kind == "more", len(rows)
            await app.pop_screen()
            await pilot.pause(0.05)
    return times[1:]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--size", default="100x32")
    args = parser.parse_args()
    size = tuple(int(x) for x in args.size.lower().split("x"))
    tmp = Path(tempfile.mkdtemp(prefix="crewlet-app-bench-"))
    try:
        home, built = build(tmp, args.pages)
        print(f"{args.pages:,} pages at the top of {SPACE}: built in {built:.1f} s")
        listing = time_listing(home, args.runs)
        outline = asyncio.run(time_outline(home, args.runs, size))  # type: ignore[arg-type]
        lm, om = statistics.median(listing), statistics.median(outline)
        print(f"list_pages({SPACE!r}) alone, first window of 500: median {lm * 1000:8.1f} ms "
              f"(runs: {', '.join(f'{t * 1000:.1f}' for t in listing)})")
        print(f"app outline, open → first window shown:         median {om * 1000:8.1f} ms "
              f"(runs: {', '.join(f'{t * 1000:.1f}' for t in outline)})")
        print(f"ratio app / listing: {om / lm:.1f}x")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
