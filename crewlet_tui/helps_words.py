""""Does knowledge help?" in the words a person reads (core/bank/helps.py): the one place the CLI (`crewlet knowledge
helps`) and the app (the Diaries screen's panel) turn the report into rows, so both say the same — the sample size
first, each rate with its interval, the cost per run, and "too few to tell" where it is."""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from core.bank.helps import Arm, Helps

TREATMENT_HEAD, HOLDOUT_HEAD = "given knowledge", "holdout (none)"
MEASURES = ("finished runs", "checks passed", "review passes", "PRs merged (of opened)", "cost per run")


def helps_title(report: Helps) -> str:
    return f"Does knowledge help? (KNOWLEDGE_HOLDOUT_RATE = {report.holdout_rate:g})"


def helps_rows(report: Helps) -> list[tuple[str, str, str]]:
    """(measure, the treatment arm's cell, the holdout arm's cell), the sample size first."""
    cells = [[_n(a), a.checks.words(), a.review.words(), a.merged.words(), _cost(a)]
             for a in (report.arm("treatment"), report.arm("holdout"))]
    return [(m, t, h) for m, t, h in zip(MEASURES, *cells)]


def helps_notes(report: Helps) -> list[str]:
    """What a rate's cell says, the verdict, and what a holdout rate of 0 means."""
    out = ["Each rate: how many of how many, the share, and its 95% interval in brackets.",
           report.verdict[0].upper() + report.verdict[1:] + "."]
    if report.holdout_rate == 0:
        out.append("KNOWLEDGE_HOLDOUT_RATE is 0: every run is given knowledge, and nothing is measured")
    return out


def helps_lines(report: Helps) -> list[str]:
    """The two arms side by side as aligned lines (the CLI's table)."""
    rows = helps_rows(report)
    width = max(len(r[0]) for r in rows)
    col = max(len(TREATMENT_HEAD), *(len(r[1]) for r in rows))
    out = [helps_title(report), f"{'':{width}}  {TREATMENT_HEAD:{col}}  {HOLDOUT_HEAD}"]
    out += [f"{name:{width}}  {a:{col}}  {b}" for name, a, b in rows]
    return out + helps_notes(report)


def _n(arm: Arm) -> str:
    return f"{arm.finished}" + (f" ({arm.under_way} under way)" if arm.under_way else "") + \
        (" — too few to tell" if arm.too_few else "")


def _cost(arm: Arm) -> str:
    per = arm.cost_per_run
    return "no cost reported" if per is None else f"${per:.2f} (over {arm.costed} run{'s' if arm.costed != 1 else ''})"
