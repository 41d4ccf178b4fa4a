"""Search as you type, or on Enter? What each does to a key press on a big home, measured in the real app.

    .venv/bin/python bench/search_typing.py --home /work/cache/wdd            # copied first, never written
    .venv/bin/python bench/search_typing.py --home DIR --rounds 3 --queries 12

Copies --home (a fully imported, indexed and embedded home: windows-driver-docs is ~14,000 pages) and
alternates app sessions on the copy — enter, live, enter, live… — each the real app (`make_app`,
`run_test()` headless at 120x36, its background worker off: the home has nothing left to do), its
searcher warmed by one search first. In each session a person types --queries queries into the search
box, letter by letter (60–160 ms between letters, 200–450 ms between words — or, at a --think share of the
word breaks, 0.7–1.5 s), then:

* enter — presses Enter (the search runs on Enter only, as the app shipped before);
* live  — waits (the screen searches LIVE_DELAY_S after the last key, a newer search cancelling the one
  before: crewlet_tui/screens/search.py);

then reads the results for 0.8–1.5 s and clears the box (ctrl+u). Measured:

* key → paint: from handing a key to the app's driver to the first screen update showing it in the box
  (PaintWatch, as bench/app_embed.py measures typing), every letter, space, Enter and ctrl+u;
* results: from the query's last letter (live) or Enter (enter) to the update that shows its results;
* searches run per query (live runs more than one where the hand paused mid-query).

Headless, nothing is written to a terminal, so a terminal's own drawing is not in the figures. The machine
is shared: the load average is printed, and the two variants alternate so they share it.
Benchmarks print; they never assert a time.
"""
from __future__ import annotations

import argparse
import asyncio
import os
import random
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
BENCH = Path(__file__).resolve().parent
for p in (ROOT, BENCH):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

from textual import events  # noqa: E402
from textual.widgets import Input  # noqa: E402

from _common import machine_load, percentile  # noqa: E402
from core.paths import Home  # noqa: E402
from crewlet_tui.app import CrewletApp, make_app  # noqa: E402
from crewlet_tui.screens import search as search_screen  # noqa: E402

SIZE = (120, 36)
THINK = 0.0      # the share of word breaks with a pause of 0.7–1.5 s (--think)
QUERIES = ["irp cancellation", "power management callbacks", "kmdf queue", "usb descriptor",
           "interrupt service routine", "device installation inf", "wdf request completion", "pnp manager",
           "driver verifier", "dma adapter", "bluetooth pairing", "print spooler filter", "storage miniport",
           "network adapter offload", "display driver model", "hid over i2c"]


class PaintWatch:
    """Wraps the app's `_display` (every compositor update goes there, headless or not) and wakes the bench
    at the first update produced once `check()` holds."""

    def __init__(self, app: CrewletApp) -> None:
        self.check: Callable[[], bool] | None = None
        self.event = asyncio.Event()
        self.at = 0.0
        display = app._display

        def watched(screen: Any, renderable: Any) -> None:
            if renderable is not None and self.check is not None and self.check():
                self.at = time.perf_counter()
                self.check = None
                self.event.set()
            display(screen, renderable)

        app._display = watched  # type: ignore[method-assign]

    def expect(self, check: Callable[[], bool]) -> None:
        self.event.clear()
        self.check = check

    async def wait(self, what: str, timeout: float = 60) -> float:
        try:
            await asyncio.wait_for(self.event.wait(), timeout)
        except asyncio.TimeoutError:
            raise SystemExit(f"bench: {what} was not painted within {timeout:.0f} s") from None
        return self.at


async def press(app: CrewletApp, watch: PaintWatch, key: str, char: str | None, check: Callable[[], bool]) -> float:
    """Seconds from handing the key to the driver to the first paint where `check` holds."""
    watch.expect(check)
    event = events.Key(key, char)
    event.set_sender(app)
    started = time.perf_counter()
    app._driver.send_message(event)  # type: ignore[union-attr]
    return await watch.wait(f"the key {key!r}") - started


async def wait_for(predicate: Callable[[], bool], what: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise SystemExit(f"bench: {what} did not happen within {timeout:.0f} s")
        await asyncio.sleep(0.02)


async def session(home: Home, live: bool, queries: list[str], seed: int) -> dict[str, Any]:
    rng = random.Random(seed)
    search_screen.SearchScreen.live = live
    app = make_app(home, cursor_blink=False, allow_external=False, start_indexer=False)
    out: dict[str, Any] = {"keys": [], "results": [], "searches": []}
    async with app.run_test(size=SIZE) as pilot:
        watch = PaintWatch(app)
        await wait_for(lambda: type(app.screen).__name__ == "SpacesScreen", "the app opening")
        app.open_search("")
        await wait_for(lambda: isinstance(app.screen.focused, Input), "the search box")
        screen = app.screen
        box = screen.focused
        assert isinstance(box, Input)
        searched: list[str] = []
        real_search = screen.run_search

        def counting(text: str) -> None:
            searched.append(text)
            real_search(text)

        screen.run_search = counting  # type: ignore[method-assign]
        # warm up: the searcher, the model, the index's first read (not counted)
        screen.run_search("warm up the searcher")
        await wait_for(lambda: screen.last is not None and screen.last_text == "warm up the searcher", "warm-up", 300)
        await pilot.pause(0.3)
        for query in queries:
            searched.clear()
            typed = ""
            for i, ch in enumerate(query):
                typed += ch
                key = "space" if ch == " " else ch
                out["keys"].append(await press(app, watch, key, ch, lambda v=typed: box.value == v))
                last_key_at = watch.at           # the query's last letter painted: the wait for results starts
                if i < len(query) - 1:
                    if ch == " ":   # between words; now and then a longer pause, to think of the next one
                        pause = rng.uniform(0.7, 1.5) if rng.random() < THINK else rng.uniform(0.2, 0.45)
                    else:
                        pause = rng.uniform(0.06, 0.16)
                    await asyncio.sleep(pause)

            def answered(q: str = query) -> bool:
                return screen.last is not None and screen.last_text == q and "searching for" not in str(
                    screen.query_one("#search-outcome").render())

            if live:
                watch.expect(answered)
                started = last_key_at
                out["results"].append(await watch.wait(f"the results for {query!r}") - started)
            else:
                out["keys"].append(await press(app, watch, "enter", None, lambda: bool(searched)))
                started = time.perf_counter()
                watch.expect(answered)
                out["results"].append(await watch.wait(f"the results for {query!r}") - started)
            out["searches"].append(len(searched))
            await asyncio.sleep(rng.uniform(0.8, 1.5))
            out["keys"].append(await press(app, watch, "ctrl+u", None, lambda: box.value == ""))
            await asyncio.sleep(rng.uniform(0.2, 0.4))
    return out


def line(name: str, values: list[float]) -> str:
    p50, p95, p99 = (percentile(values, q) for q in (50, 95, 99))
    return (f"  {name:6} p50 {p50 * 1000:6.1f}  p95 {p95 * 1000:6.1f}  p99 {p99 * 1000:6.1f}  max "
            f"{max(values) * 1000:7.1f} ms   over 50 ms: {sum(v > 0.05 for v in values)} of {len(values)}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--home", default="/work/cache/wdd", help="a home to copy (never written)")
    ap.add_argument("--rounds", type=int, default=2, help="rounds of the two sessions, alternated")
    ap.add_argument("--queries", type=int, default=8, help="queries typed a session")
    ap.add_argument("--delay", type=float, default=None, help="the live variant's wait after the last key, in "
                                                              "seconds (default: the app's LIVE_DELAY_S)")
    ap.add_argument("--think", type=float, default=0.0, help="the share of word breaks where the typist pauses "
                                                             "0.7–1.5 s to think (default 0)")
    args = ap.parse_args()
    global THINK
    THINK = args.think
    if args.delay is not None:
        search_screen.LIVE_DELAY_S = args.delay
    source = Path(args.home)
    if not (source / "company.toml").is_file():
        sys.exit(f"bench: {source} is not a crewlet home")
    tmp = Path(tempfile.mkdtemp(prefix="crewlet-bench-typing-"))
    try:
        print(machine_load() + " at start", flush=True)
        copy = tmp / "home"
        started = time.perf_counter()
        shutil.copytree(source, copy, symlinks=True)
        home = Home(copy)
        import sqlite3

        with sqlite3.connect(f"file:{copy / 'crewlet.db'}?mode=ro", uri=True) as conn:
            pages = conn.execute("SELECT count(*) FROM pages WHERE trashed_at IS NULL").fetchone()[0]
            vecs = conn.execute("SELECT count(*) FROM vectors").fetchone()[0]
        print(f"copied {source} in {time.perf_counter() - started:.1f} s: {pages:,} pages, {vecs:,} vectors; "
              f"live delay {search_screen.LIVE_DELAY_S * 1000:.0f} ms", flush=True)
        results: dict[str, dict[str, list[float]]] = {v: {"keys": [], "results": [], "searches": []}
                                                      for v in ("enter", "live")}
        shipped = search_screen.SearchScreen.live
        try:
            for rnd in range(args.rounds):
                queries = random.Random(rnd).sample(QUERIES, min(args.queries, len(QUERIES)))
                for variant in ("enter", "live"):
                    out = asyncio.run(session(home, variant == "live", queries, seed=rnd))
                    for k in results[variant]:
                        results[variant][k] += out[k]
                    print(f"  round {rnd + 1} {variant:5}: {len(out['keys'])} keys, key p95 "
                          f"{percentile(out['keys'], 95) * 1000:.1f} ms, max {max(out['keys']) * 1000:.1f} ms; "
                          f"results p50 {percentile(out['results'], 50) * 1000:.0f} ms; "
                          f"{sum(out['searches'])} searches for {len(queries)} queries; load "
                          f"{os.getloadavg()[0]:.2f}", flush=True)
        finally:
            search_screen.SearchScreen.live = shipped
        print(f"\n{pages:,} pages; {args.rounds} sessions of each variant, {args.queries} queries a session")
        print("key press to the screen update showing it:")
        for variant in ("enter", "live"):
            print(line(variant, results[variant]["keys"]))
        print("the query's last letter (live) or Enter (enter) to its results painted:")
        for variant in ("enter", "live"):
            print(line(variant, results[variant]["results"]))
        for variant in ("enter", "live"):
            s = results[variant]["searches"]
            print(f"  {variant}: {sum(s)} searches for {len(s)} queries")
        print(machine_load() + " at end")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
