"""How long the app's outline takes to show a big space's first window, next to the listing alone.

    python bench/app_bench.py [--pages 10000] [--runs 5] [--size 100x32]

Builds a throwaway home whose ENG space holds --pages pages at its top level (page.create records
through Node.submit in batches of 1,000), then measures:

* listing — `KnowledgeBase.list_pages("ENG")` run by itself: the same query the outline makes for its
  first window of 500 (with the level's total and each page's child count);
* outline — in the app (Pilot, headless, fixed size): from `app.open_outline("ENG")` to the tree's
  first window painted (its first render once the 500 rows and the "more…" row are in), which includes
  composing the screen, the thread worker, the message back, building the rows, removing the "loading…"
  placeholder, the layout and the paint. The headless driver writes nothing to a terminal, so a real
  terminal's own output time is not in the figure.

The bench waits for that paint without busy-waiting: a loop of `asyncio.sleep(0)` keeps the UI thread
running and holding the GIL, which starves the outline's thread worker (the listing's SQLite calls
give the GIL up and then queue for it) and inflates the figure several times over.

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
from crewlet_tui.widgets.page_tree import PageTree  # noqa: E402

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
    # "Shown" is the first paint of the outline's tree once its first window is in: the compositor calls
    # render_lines on the tree to put its rows on screen. A hook on the class (this process only) stamps
    # that moment and wakes the bench, so nothing polls while the app works.
    painted: dict[str, float] = {}
    done = asyncio.Event()
    render_lines = PageTree.render_lines

    def stamped_render_lines(tree: PageTree, crop):  # type: ignore[no-untyped-def]
        strips = render_lines(tree, crop)
        if tree.id == "outline-tree" and tree.first_window_shown and "at" not in painted:
            painted["at"] = time.perf_counter()
            done.set()
        return strips

    PageTree.render_lines = stamped_render_lines  # type: ignore[method-assign]
    app = make_app(home, cursor_blink=False, start_indexer=False, allow_external=False)
    times = []
    try:
        async with app.run_test(size=size) as pilot:
            deadline = time.monotonic() + 30
            while type(app.screen).__name__ != "SpacesScreen":
                await pilot.pause(0.01)
                if time.monotonic() > deadline:
                    raise SystemExit("the app did not open")
            for _ in range(runs + 1):
                painted.clear()
                done.clear()
                t0 = time.perf_counter()
                app.open_outline(SPACE)
                try:
                    await asyncio.wait_for(done.wait(), 60)
                except asyncio.TimeoutError:
                    raise SystemExit("the outline did not show its first window") from None
                times.append(painted["at"] - t0)
                tree = app.screen.tree
                rows = tree.level_nodes()
                assert len(rows) == 501 and rows[-1].data.kind == "more", len(rows)
                await app.pop_screen()
                await pilot.pause(0.05)
    finally:
        PageTree.render_lines = render_lines  # type: ignore[method-assign]
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
        print(f"app outline, open → first window painted:       median {om * 1000:8.1f} ms "
              f"(runs: {', '.join(f'{t * 1000:.1f}' for t in outline)})")
        print(f"ratio app / listing: {om / lm:.1f}x")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
