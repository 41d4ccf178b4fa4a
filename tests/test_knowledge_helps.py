"""`crewlet knowledge helps` (issue 37; spec 003 "The holdout"): the two arms side by side against a hand-worked
example — the sample size first, each rate with its own denominator and its 95% Wilson interval worked out by hand
below, the cost per run — and "too few runs to tell" below 30 finished runs an arm (core/bank/helps.py)."""
from __future__ import annotations

import json

import pytest
from conftest import config_with, new_home
from typer.testing import CliRunner

from core.bank.entries import EntryBank
from core.bank.helps import MIN_RUNS
from core.bank.runs import RunBank
from core.node import Node
from core.stats import drawn
from crewlet_tui.cli import app

CLEAN_ENV = {"CREWLET_HOME": None, "CREWLET_AS": None, "CREWLET_NOW": None, "KNOWLEDGE_HOLDOUT_RATE": None,
             "COLUMNS": "200"}

# At a holdout rate of one half, these ids fall in these arms (sha256("holdout" + id), first 8 bytes / 2^64 < 0.5),
# checked again in the test with core.stats.drawn.
TREATMENT_IDS = ("r0", "r2", "r3", "r4")
HOLDOUT_IDS = ("r1", "r5")
UNDER_WAY = "r6"                                        # a treatment run that has not finished
# (id, checks, review, pr, cost)
FINISHES = [("r0", "passed", "passed", "merged", "1.00"), ("r2", "passed", "failed", "merged", "2.00"),
            ("r3", "passed", "passed", "closed", "3.00"), ("r4", "failed", "failed", "none", None),
            ("r1", "passed", "failed", "closed", "0.50"), ("r5", "failed", "failed", "none", "1.50")]

# The Wilson interval by hand, z = 1.959964 (z² = 3.841459), for 3 of 4:
#   p = 0.75;  denominator 1 + z²/n = 1 + 0.960365 = 1.960365
#   centre = (p + z²/2n) / 1.960365 = (0.75 + 0.480182) / 1.960365 = 0.627527
#   half   = z·√(p(1−p)/n + z²/4n²) / 1.960365 = 1.959964 · √(0.046875 + 0.060023) / 1.960365 = 0.326886
#   → 0.300641 … 0.954413
# and the same steps for the others:
#   2 of 4: 0.150039 … 0.849961      2 of 3: 0.207660 … 0.938508
#   1 of 2: 0.094531 … 0.905469      0 of 2: 0 … 0.657620      0 of 1: 0 … 0.793451
HAND = {(3, 4): (0.300641, 0.954413), (2, 4): (0.150039, 0.849961), (2, 3): (0.207660, 0.938508),
        (1, 2): (0.094531, 0.905469), (0, 2): (0.0, 0.657620), (0, 1): (0.0, 0.793451)}


@pytest.fixture
def cli(tmp_path):
    home = new_home(tmp_path / "home", config_with(knowledge={"holdout_rate": 0.5}))
    runner = CliRunner()

    def run(*args: str):
        res = runner.invoke(app, ["--home", str(home.root), *args], env=CLEAN_ENV)
        assert res.exit_code == 0, (res.exit_code, res.stdout, res.stderr)
        return res.stdout
    run.home = home          # type: ignore[attr-defined]
    return run


def _rate(got: dict, successes: int, trials: int) -> None:
    assert (got["successes"], got["trials"]) == (successes, trials)
    assert got["rate"] == pytest.approx(successes / trials)
    low, high = HAND[(successes, trials)]
    assert got["ci95"] == [pytest.approx(low, abs=1e-6), pytest.approx(high, abs=1e-6)]


def test_the_report_sets_both_arms_side_by_side_against_a_hand_worked_example(cli):
    for run_id in (*TREATMENT_IDS, UNDER_WAY):
        assert not drawn(run_id, 0.5, "holdout")
    for run_id in HOLDOUT_IDS:
        assert drawn(run_id, 0.5, "holdout")
    for run_id in (*TREATMENT_IDS, *HOLDOUT_IDS, UNDER_WAY):
        cli("run", "start", "--agent", "eng-bot", "--id", run_id)
    for run_id, checks, review, pr, cost in FINISHES:
        cli("run", "finish", run_id, "--checks", checks, "--review", review, "--pr", pr,
            *(["--cost", cost] if cost else []))

    report = json.loads(cli("knowledge", "helps", "--json"))
    assert (report["holdout_rate"], report["min_runs"]) == (0.5, MIN_RUNS)
    treatment, holdout = report["arms"]["treatment"], report["arms"]["holdout"]
    assert (treatment["finished_runs"], treatment["under_way"], treatment["too_few_to_tell"]) == (4, 1, True)
    _rate(treatment["checks_passed"], 3, 4)
    _rate(treatment["review_passed"], 2, 4)
    _rate(treatment["prs_merged"], 2, 3)                # r4 opened no PR: of the three opened, two merged
    assert (treatment["cost_per_run"], treatment["runs_with_cost"]) == (pytest.approx(2.0), 3)   # (1 + 2 + 3) / 3
    assert (holdout["finished_runs"], holdout["under_way"], holdout["too_few_to_tell"]) == (2, 0, True)
    _rate(holdout["checks_passed"], 1, 2)
    _rate(holdout["review_passed"], 0, 2)
    _rate(holdout["prs_merged"], 0, 1)
    assert (holdout["cost_per_run"], holdout["runs_with_cost"]) == (pytest.approx(1.0), 2)       # (0.50 + 1.50) / 2
    assert report["verdict"].startswith("too few runs to tell: both arms have fewer than 30")

    text = cli("knowledge", "helps").splitlines()
    assert text[0] == "Does knowledge help? (KNOWLEDGE_HOLDOUT_RATE = 0.5)"
    rows = {line.split("  ")[0]: line for line in text[2:7]}
    assert list(rows) == ["finished runs", "checks passed", "review passes", "PRs merged (of opened)",
                          "cost per run"]                 # the sample size first
    assert "4 (1 under way) — too few to tell" in rows["finished runs"] and rows["finished runs"].endswith(
        "2 — too few to tell")
    assert "3 of 4: 75% (30–95%)" in rows["checks passed"] and rows["checks passed"].endswith(
        "1 of 2: 50% (9–91%)")
    assert "2 of 3: 67% (21–94%)" in rows["PRs merged (of opened)"]
    assert "$2.00 (over 3 runs)" in rows["cost per run"] and rows["cost per run"].endswith("$1.00 (over 2 runs)")
    assert text[-1].startswith("Too few runs to tell")


def test_an_arm_can_be_told_from_thirty_finished_runs_and_a_rate_of_zero_measures_nothing(tmp_path):
    home = new_home(tmp_path / "home", config_with(knowledge={"holdout_rate": 0.0}))
    runner = CliRunner()
    with Node.open(home) as node, EntryBank(node) as bank:
        runs = RunBank(bank)
        for i in range(MIN_RUNS):
            runs.start("eng-bot", run_id=f"t{i}")
            runs.finish(f"t{i}", checks="passed", review="passed" if i % 3 else "failed", pr="merged")
            if i == MIN_RUNS - 2:
                out = json.loads(runner.invoke(app, ["--home", str(home.root), "knowledge", "helps", "--json"],
                                               env=CLEAN_ENV).stdout)
                assert out["arms"]["treatment"]["too_few_to_tell"] is True      # 29: still too few
    res = runner.invoke(app, ["--home", str(home.root), "knowledge", "helps", "--json"], env=CLEAN_ENV)
    out = json.loads(res.stdout)
    treatment = out["arms"]["treatment"]
    assert (treatment["finished_runs"], treatment["too_few_to_tell"]) == (30, False)
    assert (treatment["review_passed"]["successes"], treatment["cost_per_run"]) == (20, None)
    assert (out["arms"]["holdout"]["finished_runs"], out["arms"]["holdout"]["prs_merged"]["ci95"]) == (0, None)
    assert out["verdict"] == "too few runs to tell: the holdout arm has fewer than 30 finished runs"
    text = runner.invoke(app, ["--home", str(home.root), "knowledge", "helps"], env=CLEAN_ENV).stdout
    assert "no cost reported" in text and "0 of 0" in text
    assert "KNOWLEDGE_HOLDOUT_RATE is 0: every run is given knowledge, and nothing is measured" in text


async def test_the_diaries_screen_shows_does_knowledge_help_beside_the_agents(tmp_path):
    """The app's panel (the Diaries screen, where the agents are): the same rows as the CLI, the sample size first,
    and the verdict."""
    from rich.text import Text
    from test_app_support import SIZE, app_for, wait_screen, wait_until
    from textual.widgets import DataTable, Static

    home = new_home(tmp_path / "home", config_with(knowledge={"holdout_rate": 0.5}))
    with Node.open(home) as node, EntryBank(node) as bank:
        runs = RunBank(bank)
        for run_id in (*TREATMENT_IDS, *HOLDOUT_IDS):
            runs.start("eng-bot", run_id=run_id)
        for run_id, checks, review, pr, cost in FINISHES:
            runs.finish(run_id, checks=checks, review=review, pr=pr, cost=float(cost) if cost else None)
    app = app_for(home)
    async with app.run_test(size=SIZE) as pilot:
        await wait_screen(pilot, "SpacesScreen")
        await pilot.press("d")
        await wait_screen(pilot, "DiariesScreen")
        panel = app.screen.query_one("#knowledge-helps")
        table = panel.query_one(DataTable)
        await wait_until(pilot, lambda: table.row_count == 5, what="the report's rows")
        rows = [[c.plain if isinstance(c, Text) else str(c) for c in table.get_row_at(i)] for i in range(5)]
        assert [r[0] for r in rows] == ["finished runs", "checks passed", "review passes",
                                        "PRs merged (of opened)", "cost per run"]
        assert rows[0][1:] == ["4 — too few to tell", "2 — too few to tell"]
        assert rows[1][1:] == ["3 of 4: 75% (30–95%)", "1 of 2: 50% (9–91%)"]
        assert rows[4][1:] == ["$2.00 (over 3 runs)", "$1.00 (over 2 runs)"]
        assert "Too few runs to tell" in str(panel.query_one(".helps-verdict", Static).render())
        assert "KNOWLEDGE_HOLDOUT_RATE = 0.5" in str(panel.query_one(".helps-title", Static).render())
