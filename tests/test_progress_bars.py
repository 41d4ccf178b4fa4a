"""The CLI's progress bars show items a second beside the count and the time left (`crewlet worker --once`
says pages/s while it embeds)."""
from __future__ import annotations

import io
import re

from rich.console import Console

from crewlet_tui.progress_bars import ProgressBars


def test_a_bar_shows_its_rate_once_progress_was_reported():
    out = io.StringIO()
    bars = ProgressBars(Console(file=out, force_terminal=True, width=160), enabled=True)
    bars("embedding", 0, 400, "embedding pages")
    progress = bars._progress
    assert progress is not None
    task = progress.tasks[0]
    rate = next(c for c in progress.columns if type(c).__name__ == "RateColumn")
    assert str(rate.render(task)) == "–/s"                   # nothing measured yet: no number pretends to be one
    bars("embedding", 32, 400, "embedding pages")
    bars("embedding", 64, 400, "embedding pages")
    assert re.fullmatch(r"\d+(\.\d)?/s", str(rate.render(task))), str(rate.render(task))
    bars.close()
    assert "/s" in out.getvalue()


def test_disabled_bars_draw_nothing():
    out = io.StringIO()
    bars = ProgressBars(Console(file=out, force_terminal=True, width=160), enabled=False)
    bars("embedding", 5, 10, "embedding pages")
    bars.close()
    assert out.getvalue() == ""
