"""Does knowledge help? (spec 003, "The holdout"; issue 37): the two arms of the finished agent runs side by side.

For each arm — treatment (given knowledge) and holdout (given none) — the sample size first (finished runs), then
each rate with its own denominator and its 95% Wilson interval (core/stats.py):

- checks passed, of the finished runs;
- review passes, of the finished runs;
- pull requests merged, of the runs that opened one (merged or closed: a run whose PR is `none` opened none);
- cost per run: the mean USD of the runs that reported a cost (how many did is said beside it), no interval.

**Too few runs to tell.** An arm with fewer than `MIN_RUNS` (30) finished runs is said to be too few to tell:
at 30 runs a rate near one half has a 95% interval about ±17 points wide, already wider than the gain the spec's
example reports (83% → 90% merged); below that, a percentage is noise. The figures are still shown, with their
intervals, so nobody waits to see them; the verdict words say not to read anything into them. A rate of 0
(KNOWLEDGE_HOLDOUT_RATE = 0) makes no holdout run: the holdout arm stays empty and there is nothing to compare.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..pages.run_model import ARMS, CLOSED, MERGED, PASSED
from ..stats import wilson_interval
from .runs import Run

MIN_RUNS = 30
TOO_FEW = "too few runs to tell"


@dataclass(frozen=True)
class Rate:
    """`successes` of `trials`, with its 95% Wilson interval (None with no trials)."""

    successes: int
    trials: int

    @property
    def share(self) -> float | None:
        return self.successes / self.trials if self.trials else None

    @property
    def interval(self) -> tuple[float, float] | None:
        return wilson_interval(self.successes, self.trials)

    def to_json(self) -> dict[str, Any]:
        ci = self.interval
        return {"successes": self.successes, "trials": self.trials, "rate": self.share,
                "ci95": list(ci) if ci is not None else None}

    def words(self) -> str:
        """'3 of 4: 75% (30–95%)' — the share and its 95% interval — or '0 of 0'. Short enough that two arms and
        the measure fit 80 columns; the listing says once what the interval is."""
        if not self.trials:
            return "0 of 0"
        low, high = self.interval or (0.0, 0.0)
        return f"{self.successes} of {self.trials}: {_pct(self.share or 0.0)} ({_pct(low, sign=False)}–{_pct(high)})"


def _pct(x: float, *, sign: bool = True) -> str:
    return f"{round(x * 100)}%" if sign else f"{round(x * 100)}"


@dataclass(frozen=True)
class Arm:
    name: str
    finished: int
    under_way: int
    checks: Rate
    review: Rate
    merged: Rate
    costed: int
    cost_total: float

    @property
    def cost_per_run(self) -> float | None:
        return self.cost_total / self.costed if self.costed else None

    @property
    def too_few(self) -> bool:
        return self.finished < MIN_RUNS

    def to_json(self) -> dict[str, Any]:
        return {"arm": self.name, "finished_runs": self.finished, "under_way": self.under_way,
                "too_few_to_tell": self.too_few, "checks_passed": self.checks.to_json(),
                "review_passed": self.review.to_json(), "prs_merged": self.merged.to_json(),
                "cost_per_run": self.cost_per_run, "runs_with_cost": self.costed}


@dataclass(frozen=True)
class Helps:
    arms: tuple[Arm, ...]
    holdout_rate: float
    min_runs: int = MIN_RUNS

    def arm(self, name: str) -> Arm:
        return next(a for a in self.arms if a.name == name)

    @property
    def verdict(self) -> str:
        """One sentence: whether the arms can be told apart yet."""
        few = [a.name for a in self.arms if a.too_few]
        if few:
            which = "both arms have" if len(few) > 1 else f"the {few[0]} arm has"
            return f"{TOO_FEW}: {which} fewer than {self.min_runs} finished runs"
        return "both arms have enough runs to compare: where the intervals do not overlap, the difference is real"

    def to_json(self) -> dict[str, Any]:
        return {"holdout_rate": self.holdout_rate, "min_runs": self.min_runs, "verdict": self.verdict,
                "arms": {a.name: a.to_json() for a in self.arms}}


def arm_of(name: str, runs: Sequence[Run], under_way: int) -> Arm:
    mine = [r for r in runs if r.arm == name]
    opened = [r for r in mine if r.pr in (MERGED, CLOSED)]
    costed = [r.cost for r in mine if r.cost is not None]
    return Arm(name=name, finished=len(mine), under_way=under_way,
               checks=Rate(sum(1 for r in mine if r.checks == PASSED), len(mine)),
               review=Rate(sum(1 for r in mine if r.review == PASSED), len(mine)),
               merged=Rate(sum(1 for r in opened if r.pr == MERGED), len(opened)),
               costed=len(costed), cost_total=float(sum(costed)))


def helps(finished: Sequence[Run], under_way: dict[str, int], holdout_rate: float) -> Helps:
    """The report over `finished` runs (`under_way`: runs begun and not finished, per arm)."""
    return Helps(tuple(arm_of(name, finished, under_way.get(name, 0)) for name in ARMS), holdout_rate)
