"""Agent runs' words (spec 003, "What agents get", "The holdout"; issue 37): what a run's arm and its outcomes may
be, which outcome is helpful or harmful, and whether an outcome falls under an entry's scope. The writer
(core/bank/runs.py) and the applier (core/pages/run_handlers.py) read the same words, so every node decides alike.

A run is an agent's piece of work with an id. Its **arm** is drawn once, at its start, from a hash of its id
(`core.stats.drawn(run_id, KNOWLEDGE_HOLDOUT_RATE, HOLDOUT_SALT)`): the holdout arm gets no knowledge and records
no use; the treatment arm gets its modules' conventions and most relevant entries. Its **outcomes** come when it
finishes: its checks, its review and its pull request. Each is helpful or harmful (a pull request that was
neither merged nor closed — `none` — is no outcome) for every entry served to the run whose scope the outcome
falls under: an entry with no scope serves every area, so every outcome falls under it; a scoped one only when
one of the run's modules reaches it (the same repository, one folder holding the other). A run with no modules
named is work nowhere in particular: only the unscoped entries it was given take its outcomes.
"""
from __future__ import annotations

from collections.abc import Sequence

from ..repos.modules import scope_matches, stored_scope

HOLDOUT_SALT = "holdout"              # core.stats.drawn's salt: the draw can be worked out again anywhere
TREATMENT, HOLDOUT = "treatment", "holdout"
ARMS = (TREATMENT, HOLDOUT)

PASSED, FAILED = "passed", "failed"
MERGED, CLOSED, NO_PR = "merged", "closed", "none"
CHECKS_VALUES = (PASSED, FAILED)
REVIEW_VALUES = (PASSED, FAILED)
PR_VALUES = (MERGED, CLOSED, NO_PR)
HELPFUL, HARMFUL = "helpful", "harmful"
OUTCOMES = ("checks", "review", "pr")          # in the order a run's finish names them
MAX_FINDINGS = 50                               # review findings one finish carries
MAX_FINDING_CHARS = 2_000
HOLDOUT_WORDS = "holdout run: no knowledge, by design"


def effects(checks: str, review: str, pr: str) -> list[tuple[str, str]]:
    """Each outcome of a finished run with its effect, (outcome, helpful | harmful); a pull request of `none` is no
    outcome."""
    out = [("checks", HELPFUL if checks == PASSED else HARMFUL), ("review", HELPFUL if review == PASSED else HARMFUL)]
    if pr != NO_PR:
        out.append(("pr", HELPFUL if pr == MERGED else HARMFUL))
    return out


def falls_under(entry_scope: str | None, modules: Sequence[str]) -> bool:
    """Whether a run's outcomes fall under an entry's scope: always for an entry with no scope; for a scoped one,
    when one of the run's modules reaches it. A scope stored in a form that no longer reads reaches nothing."""
    if entry_scope is None:
        return True
    scope = stored_scope(entry_scope)
    if scope is None:
        return False
    return any(scope_matches(scope, m) for m in (stored_scope(t) for t in modules) if m is not None)
