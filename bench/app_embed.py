"""Does the app still paint a key press promptly while its background worker fills the vectors?

    .venv/bin/python bench/app_embed.py                       # 2,000 windows-driver-docs pages, 2 rounds
    .venv/bin/python bench/app_embed.py --pages 3000 --rounds 3 --presses 120

Builds a home as bench/embed.py does (a sample of windows-driver-docs imported with --into WDD), builds
its keyword index, and makes a second copy whose vectors are all filled (by the embedding duty, timed:
that is a first fill). Then alternates app sessions — busy, busy at normal priority, idle, busy… —
each the real app (`make_app`, `run_test()` headless at 120x40, its background worker on, as `crewlet`
runs it):

* busy — a fresh copy of the home without vectors: the app's worker runs a first fill (the embedding
  duty, one onnxruntime thread, the worker thread at nice +10 as the app ships) through the whole
  session; measuring starts once its first request is done, and the session checks the fill was
  still running when it ended;
* busy, normal priority — the same with the worker thread left at the interface's priority
  (`DUTIES_NICE = 0`): what the app did before, for the ratio;
* idle — a fresh copy of the home with every vector in place: the worker's duties have nothing to do
  (but embed the few pages the session writes).

In each session, two kinds of key press, each followed by a random 30–120 ms pause:
* outline — down/up in space WDD's outline tree (a cursor move);
* typing — a letter, then backspace, in the search box (the search runs only on Enter).
The latency is from handing the key to the app's driver to the first screen update the compositor
produces with the key's effect in it (the tree's cursor on the new row, the box holding the new
text). Headless, nothing is written to a terminal, so a terminal's own drawing is not in the figure.
Then three writes: a page created through the session's KnowledgeBase and `app.poke_indexer()`, as the
editor does, timed until the keyword index covers it (index/state.json).
Prints p50/p95/p99/max by kind and variant, the ratios to idle, and the write-to-searchable times.
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

from embed import DEFAULT_CORPUS, SPACE, build_home, copy_home  # noqa: E402
from textual import events  # noqa: E402
from textual.widgets import Input  # noqa: E402

from _common import machine_load, percentile  # noqa: E402
from core.duties.roster import ApplyDuty  # noqa: E402
from core.duties.embedding import EmbeddingDuty  # noqa: E402
from core.node import Node  # noqa: E402
from core.paths import Home  # noqa: E402
from core.duties.keyword_index import KeywordIndexDuty  # noqa: E402
from core.search.indexer import read_state  # noqa: E402
from core.duties.runner import DutyRunner  # noqa: E402
import crewlet_tui.app as app_module  # noqa: E402
from crewlet_tui.app import CrewletApp, make_app  # noqa: E402
from crewlet_tui.widgets.page_tree import PageTree  # noqa: E402

SIZE = (120, 40)
VARIANTS = ("busy", "busy-normal", "idle")
WRITES = 3


def run_duties(home: Home, duties: Callable[[Node], list[Any]]) -> float:
    with Node.open(home) as node:
        runner = DutyRunner(node, duties(node), label="bench")
        started = time.perf_counter()
        try:
            reports = runner.run_until_idle()
        finally:
            runner.close()
        errors = [r.line() for r in reports if r.error]
        if errors:
            sys.exit(f"bench: {errors[0]}")
        return time.perf_counter() - started


class PaintWatch:
    """Wraps the app's `_display` (where every compositor update goes, headless or not) and wakes the
    bench at the first update produced once `check()` holds."""

    def __init__(self, app: CrewletApp) -> None:
        self.check: Callable[[], bool] | None = None
        self.event = asyncio.Event()
        self.at = 0.0
        self.paints = 0
        display = app._display

        def watched(screen: Any, renderable: Any) -> None:
            if renderable is not None:
                self.paints += 1
                if self.check is not None and self.check():
                    self.at = time.perf_counter()
                    self.check = None
                    self.event.set()
            display(screen, renderable)

        app._display = watched  # type: ignore[method-assign]

    def expect(self, check: Callable[[], bool]) -> None:
        self.event.clear()
        self.check = check


async def press(app: CrewletApp, watch: PaintWatch, key: str, char: str | None,
                check: Callable[[], bool]) -> float:
    watch.expect(check)
    event = events.Key(key, char)
    event.set_sender(app)
    started = time.perf_counter()
    app._driver.send_message(event)  # type: ignore[union-attr]
    try:
        await asyncio.wait_for(watch.event.wait(), 30)
    except asyncio.TimeoutError:
        raise SystemExit(f"bench: the key {key!r} was not painted within 30 s") from None
    return watch.at - started


async def wait_for(predicate: Callable[[], bool], what: str, timeout: float = 600) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise SystemExit(f"bench: {what} did not happen within {timeout:.0f} s")
        await asyncio.sleep(0.05)


async def searchable_after_write(app: CrewletApp, home: Home, n: int) -> float:
    """A page created as the editor creates one, then the worker poked: seconds until it is indexed."""
    session = app.session
    assert session is not None
    started = time.perf_counter()
    await asyncio.to_thread(session.kb.create_page, SPACE, f"Bench write {n} {time.time_ns()}", "a new page",
                            actor="alex")
    seq = session.node.applied_seq()
    app.poke_indexer()

    def indexed() -> bool:
        state = read_state(home.index_dir)
        return state is not None and state.indexed_seq >= seq

    await wait_for(indexed, "the written page in the keyword index", 600)
    return time.perf_counter() - started


async def session(home: Home, busy: bool, presses: int, seed: int) -> dict[str, Any]:
    rng = random.Random(seed)
    app = make_app(home, cursor_blink=False, allow_external=False)

    out: dict[str, Any] = {"outline": [], "typing": []}
    async with app.run_test(size=SIZE) as pilot:
        watch = PaintWatch(app)
        await wait_for(lambda: type(app.screen).__name__ == "SpacesScreen", "the app opening")
        if busy:  # the fill is under way: the model is loaded and its first request answered
            await wait_for(lambda: app.meaning_state.phase == "embedding" and app.meaning_state.done > 0,
                           "the first embedding request")
        else:     # the worker's first passes are over and found nothing to do
            await wait_for(lambda: app.meaning_state.phase == "current", "the embedding duty's first pass")
        out["covered_at_start"] = (app.meaning_state.covered, app.meaning_state.total)
        progressed_before = app.meaning_state.done
        paints_before = watch.paints
        started = time.perf_counter()

        app.open_outline(SPACE)
        await wait_for(lambda: bool(app.screen.query("#outline-tree")), "the outline screen", 60)
        tree = app.screen.query_one("#outline-tree", PageTree)
        await wait_for(lambda: tree.first_window_shown, "the outline's first window", 60)
        tree.focus()
        await pilot.pause(0.2)
        for i in range(presses):
            line = tree.cursor_line
            key, target = ("down", line + 1) if i % 2 == 0 else ("up", line - 1)
            out["outline"].append(await press(app, watch, key, None, lambda t=target: tree.cursor_line == t))
            await asyncio.sleep(rng.uniform(0.03, 0.12))

        app.open_search("")
        await wait_for(lambda: isinstance(app.screen.focused, Input), "the search box", 60)
        box = app.screen.focused
        assert isinstance(box, Input)
        await pilot.pause(0.2)
        for i in range(presses):
            if i % 2 == 0:
                letter = rng.choice("abcdefghijklmnopqrstuvwxyz")
                out["typing"].append(await press(app, watch, letter, letter, lambda v=letter: box.value == v))
            else:
                out["typing"].append(await press(app, watch, "backspace", None, lambda: box.value == ""))
            await asyncio.sleep(rng.uniform(0.03, 0.12))

        state = app.meaning_state
        out["seconds"] = time.perf_counter() - started
        out["paints"] = watch.paints - paints_before
        out["embedded"] = state.done - progressed_before
        out["still_filling"] = state.phase == "embedding" and state.done < state.goal

        out["writes"], out["writes_during_fill"] = [], []
        for n in range(WRITES):
            out["writes"].append(await searchable_after_write(app, home, n))
            state = app.meaning_state
            out["writes_during_fill"].append(state.phase == "embedding" and state.done < state.goal)
            await asyncio.sleep(rng.uniform(0.5, 1.5))
    return out


def line(name: str, values: list[float], idle: list[float]) -> str:
    p50, p95, p99 = (percentile(values, q) for q in (50, 95, 99))
    i50, i95 = percentile(idle, 50), percentile(idle, 95)
    return (f"  {name:12} p50 {p50 * 1000:6.1f}  p95 {p95 * 1000:6.1f}  p99 {p99 * 1000:6.1f}  max "
            f"{max(values) * 1000:6.1f} ms   x idle: p50 {p50 / i50:.2f}  p95 {p95 / i95:.2f}   "
            f"over 50 ms: {sum(v > 0.05 for v in values)} of {len(values)}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", default=str(DEFAULT_CORPUS))
    ap.add_argument("--pages", type=int, default=2000, help="Markdown files to import")
    ap.add_argument("--rounds", type=int, default=2, help="rounds of the three sessions, alternated")
    ap.add_argument("--presses", type=int, default=100, help="key presses of each kind a session")
    ap.add_argument("--keep", default="", help="build the homes here and keep them (default: a temporary directory)")
    args = ap.parse_args()
    tmp = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="crewlet-bench-app-embed-"))
    tmp.mkdir(parents=True, exist_ok=True)
    shipped_nice = getattr(app_module, "DUTIES_NICE", 0)   # 0: an app from before the worker was niced
    try:
        print(machine_load() + " at start", flush=True)
        if (tmp / "base").is_dir() and (tmp / "filled").is_dir():   # --keep from an earlier run: reuse
            base, filled = Home(tmp / "base"), Home(tmp / "filled")
            with Node.open(base) as node:
                pages = node.conn.execute("SELECT count(*) FROM pages WHERE trashed_at IS NULL").fetchone()[0]
            print(f"reusing {tmp}: {pages:,} pages", flush=True)
        else:
            base, built = build_home(tmp, Path(args.corpus), args.pages)
            pages = built["pages"]
            keyword_s = run_duties(base, lambda node: [ApplyDuty(node), KeywordIndexDuty(node.home)])
            print(f"imported {built['files']:,} files as {pages:,} pages in {built['import_s']:.1f} s; "
                  f"keyword index built in {keyword_s:.1f} s", flush=True)
            filled = copy_home(base, tmp / "filled")
            fill_s = run_duties(filled, lambda node: [EmbeddingDuty(node)])
            print(f"first fill of the idle copy (embedding duty, default threads): {fill_s:.1f} s = "
                  f"{pages / fill_s:.2f} pages/s; {machine_load()}", flush=True)

        results = {v: {"outline": [], "typing": [], "writes": []} for v in VARIANTS}
        for rnd in range(args.rounds):
            for variant in VARIANTS:
                busy = variant != "idle"
                app_module.DUTIES_NICE = 0 if variant == "busy-normal" else shipped_nice
                home = copy_home(base if busy else filled, tmp / f"{variant}-{rnd}")
                try:
                    out = asyncio.run(session(home, busy, args.presses, seed=rnd))
                finally:
                    app_module.DUTIES_NICE = shipped_nice
                shutil.rmtree(home.root, ignore_errors=True)
                if busy and not out["still_filling"]:
                    sys.exit("bench: the fill ended before the key presses did — import more pages (--pages)")
                covered, total = out["covered_at_start"]
                if not busy and covered != total:
                    sys.exit("bench: the idle copy was not fully embedded")
                for what in ("outline", "typing"):
                    results[variant][what] += out[what]
                # a write is counted where it belongs: searchable while the fill still ran, or not
                for seconds, during in zip(out["writes"], out["writes_during_fill"]):
                    if during or not busy:
                        results[variant]["writes"].append(seconds)
                print(f"  round {rnd + 1} {variant:11}: {2 * args.presses} presses in {out['seconds']:.1f} s, "
                      f"{out['paints']} screen updates, {out['embedded']} pages embedded meanwhile; outline p95 "
                      f"{percentile(out['outline'], 95) * 1000:.1f} ms, typing p95 "
                      f"{percentile(out['typing'], 95) * 1000:.1f} ms; write searchable in "
                      f"{', '.join(f'{w:.2f}' + ('' if d or not busy else ' (after the fill)') for w, d in zip(out['writes'], out['writes_during_fill']))} s; "
                      f"load {os.getloadavg()[0]:.2f}", flush=True)
        print(f"\n{pages:,} pages; {args.rounds} sessions of each, {args.presses} presses of each kind a session")
        for what in ("outline", "typing"):
            print(f"{what}: key press to the screen update showing it")
            for variant in VARIANTS:
                print(line(variant, results[variant][what], results["idle"][what]))
        print("a page written in the app, to keyword-searchable:")
        for variant in VARIANTS:
            w = results[variant]["writes"]
            print(f"  {variant:12} median {percentile(w, 50):.2f} s, max {max(w):.2f} s" if w else
                  f"  {variant:12} no write became searchable before the fill ended")
        print(machine_load() + " at end")
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
