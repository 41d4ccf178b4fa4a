"""A page whose body is one 5 MB line, in the app: how long a key takes on its page screen, against a small
page in the same run (the peer), and what the editor does with it.

    python bench/long_line.py [--size 5000000] [--keys 20] [--rounds 3]

Each round opens the big page and the small one (alternating, so load drifts hit both), presses `j` and `k`
`--keys` times on each and times every key from the press to the screen settled (Pilot), then presses `e` on
the big page and times until the editor is up or the app has said why it will not open it. Prints medians,
p90s, their ratio, and the load. Never asserts a time (tests/test_app_long_line.py checks the behaviour).
"""
from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
for p in (ROOT, ROOT / "tests"):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

from bench._common import machine_load, percentile  # noqa: E402
from test_app_support import SIZE, app_for, new_home, open_kb, wait_screen, wait_until  # noqa: E402


async def keys_on(app, pilot, page_id: str, n: int) -> list[float]:
    app.open_page(page_id)
    await wait_screen(pilot, "PageScreen", timeout=300)
    await wait_until(pilot, lambda: app.screen.view is not None, timeout=300)
    await pilot.pause()
    times = []
    for i in range(n):
        t = time.perf_counter()
        await pilot.press("j" if i % 2 == 0 else "k")
        await pilot.pause()
        times.append(time.perf_counter() - t)
    return times


async def round_(size: int, n: int) -> tuple[list[float], list[float], float, str]:
    from core import config as config_mod

    # a page past the default [limits] bound (1 MiB): the company raises it to the ceiling
    config = config_mod.example_config() | {"limits": {"page_body_bytes": 32 * 1024 * 1024}}
    home = new_home(Path(tempfile.mkdtemp(prefix="crewlet-longline-")), config=config)
    with open_kb(home) as kb:
        big = kb.create_page("ENG", "One Long Line", "x" * size, actor="alex")
        small = kb.create_page("ENG", "Small", "# Small\n\n" + "a sentence of text. " * 40 + "\n", actor="alex")
    app = app_for(home, "alex")
    async with app.run_test(size=SIZE) as pilot:
        await wait_screen(pilot, "SpacesScreen")
        small_keys = await keys_on(app, pilot, small.id, n)
        await pilot.press("escape")
        big_keys = await keys_on(app, pilot, big.id, n)
        t = time.perf_counter()
        await pilot.press("e")
        await wait_until(pilot, lambda: type(app.screen).__name__ == "EditScreen" or any(
            "not opened in the editor" in (n.title or "") for n in app._notifications), timeout=300)
        editor_s = time.perf_counter() - t
        what = "opened" if type(app.screen).__name__ == "EditScreen" else "said why not"
    return small_keys, big_keys, editor_s, what


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--size", type=int, default=5_000_000)
    ap.add_argument("--keys", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    small: list[float] = []
    big: list[float] = []
    editor: list[float] = []
    said = ""
    for _ in range(args.rounds):
        s, b, e, said = asyncio.run(round_(args.size, args.keys))
        small += s
        big += b
        editor.append(e)
    ms = lambda xs: f"median {1000 * statistics.median(xs):.0f} ms, p90 {1000 * percentile(xs, 90):.0f} ms"  # noqa: E731
    print(f"page screen keys, {args.rounds} rounds × {args.keys} keys; {machine_load()}")
    print(f"  small page           {ms(small)}")
    print(f"  one {args.size:,}-char line  {ms(big)}  (ratio of medians {statistics.median(big) / statistics.median(small):.2f})")
    print(f"  editor on the long line: {said} in median {1000 * statistics.median(editor):.0f} ms")


if __name__ == "__main__":
    main()
