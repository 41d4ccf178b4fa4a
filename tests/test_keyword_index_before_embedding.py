"""The keyword index never waits for embeddings: each duty's pass is reported as it ends, so the keyword
index's first build reaches the app (whose search waits on that report) while the embedding duty after
it is still loading its model. The model is held at a gate (tests/gated_model.py), not slowed by sleeps."""
from __future__ import annotations

import threading

from gated_model import gated

from core.duties import EMBEDDING, KEYWORD_INDEX
from core.duties.roster import run_duties
from core.duties.runner import Duty, DutyPass, DutyReport, DutyRunner, PassContext
from core.pages.service import KnowledgeBase

HANG_GUARD_S = 300   # only so a broken build fails instead of hanging: nothing here is a timing


class Quick(Duty):
    name = "quick"
    interval_s = 60.0

    def run_pass(self, ctx: PassContext) -> DutyPass:
        return DutyPass(summary="done", worked=True)


class Held(Duty):
    """A pass that ends only when the test lets it (a model load on a busy machine)."""

    name = "held"
    interval_s = 60.0

    def __init__(self) -> None:
        self.entered, self.release = threading.Event(), threading.Event()

    def run_pass(self, ctx: PassContext) -> DutyPass:
        self.entered.set()
        assert self.release.wait(HANG_GUARD_S)
        return DutyPass(summary="released")


def _heard_before_release(node, run) -> None:
    held = Held()
    runner = DutyRunner(node, [Quick(), held])
    heard = threading.Event()
    stop = threading.Event()

    def on_report(report: DutyReport) -> None:
        if report.duty == "quick":
            heard.set()

    wake = threading.Event()
    thread = threading.Thread(target=run, args=(runner, stop, wake, on_report))
    thread.start()
    try:
        assert held.entered.wait(HANG_GUARD_S)
        assert heard.wait(HANG_GUARD_S), "the quick duty's report waited for the held duty's pass"
    finally:
        held.release.set()
        stop.set()
        wake.set()   # run_forever sleeps until its next due pass unless woken
        thread.join(HANG_GUARD_S)
        runner.close()


def test_run_forever_reports_each_pass_as_it_ends(node):
    _heard_before_release(node, lambda runner, stop, wake, on_report: runner.run_forever(stop=stop, wake=wake,
                                                                                 on_report=on_report))


def test_run_until_idle_reports_each_pass_as_it_ends(node):
    _heard_before_release(node, lambda runner, stop, wake, on_report: runner.run_until_idle(stop=stop,
                                                                                    on_report=on_report))


def test_the_first_keyword_build_is_reported_while_the_model_still_loads(node):
    KnowledgeBase(node).create_page("ENG", "Deploy Runbook", "deploy carefully\n", actor="alex")
    built = threading.Event()
    stop = threading.Event()
    embedding_reported = []

    def on_report(report: DutyReport) -> None:
        if report.duty == KEYWORD_INDEX and report.result and report.result.status.get("first_build_done"):
            built.set()
        if report.duty == EMBEDDING:
            embedding_reported.append(report)

    wake = threading.Event()
    with gated() as (opened, waiting):
        thread = threading.Thread(target=run_duties, kwargs=dict(node=node, label="test", stop=stop, wake=wake,
                                                                 on_report=on_report, embed_threads=1))
        thread.start()
        try:
            assert waiting.wait(HANG_GUARD_S), "the embedding duty never asked for the model"
            assert built.wait(HANG_GUARD_S), "the keyword index's first build was not reported while the model loaded"
            assert not embedding_reported                  # the embedding pass is still at the gate
        finally:
            opened.set()
            stop.set()
            wake.set()
            thread.join(HANG_GUARD_S)
    assert not thread.is_alive()


def test_a_write_is_indexed_while_the_model_still_loads_in_the_apps_mode(node):
    """The app's way (one thread runs every duty, a write wakes it): a page written while the model loads is
    in the keyword index at the next wake, not after the load."""
    kb = KnowledgeBase(node)
    kb.create_page("ENG", "Deploy Runbook", "deploy carefully\n", actor="alex")
    built, indexed_again = threading.Event(), threading.Event()
    stop, wake = threading.Event(), threading.Event()
    embedding_worked = []
    canary_at: list[int] = []                                # the seq the canary's write applied at

    def on_report(report: DutyReport) -> None:
        status = report.result.status if report.result else {}
        if report.duty == KEYWORD_INDEX and status.get("first_build_done"):
            built.set()
            if canary_at and int(status.get("indexed_seq", 0)) >= canary_at[0]:
                indexed_again.set()
        if report.duty == EMBEDDING and report.result and report.result.counts.get("embedded"):
            embedding_worked.append(report)

    with gated() as (opened, waiting):
        thread = threading.Thread(target=run_duties, kwargs=dict(node=node, label="test", stop=stop, wake=wake,
                                                                 on_report=on_report, embed_threads=1,
                                                                 embed_pass_budget_s=15.0))
        thread.start()
        try:
            assert built.wait(HANG_GUARD_S) and waiting.wait(HANG_GUARD_S)
            kb.create_page("ENG", "Canary", "canary deploys first\n", actor="alex")
            canary_at.append(node.applied_seq())
            wake.set()                                        # what the app does after a write
            assert indexed_again.wait(HANG_GUARD_S), "the write waited for the model to load"
            assert not embedding_worked and not opened.is_set()
        finally:
            opened.set()
            stop.set()
            wake.set()
            thread.join(HANG_GUARD_S)
    assert not thread.is_alive()
