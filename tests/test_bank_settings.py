"""The knowledge bank's settings (core/bank/settings.py), [repositories.NAME] (core/repos/settings.py) and the
bank's calendar (core/clock.py: CREWLET_NOW, durations, crons).

Layers, lowest first: spec 003's default, company.toml's [knowledge], the environment. A value that cannot be
read is warned about once, naming the layer, the key and why, and the layer below applies; a key [knowledge]
does not know is refused. `crewlet settings knowledge|repositories` is driven as a separate process.
"""
from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
import tomli_w
from conftest import config_with
from test_repos_support import GitRepo, numbered

from core import clock
from core import config as config_mod
from core.sections import bank
from core.bank.repositories import open_repositories
from core.sections.bank import BankSettings, Cron, Duration
from core.config import ConfigError
from core.repos.modules import norm_folder
from core.sections.repos import DEFAULT_POLL_INTERVAL_S, RepositoriesSettings

ROOT = Path(__file__).resolve().parent.parent

# spec 003, "Settings": every variable and its default, as the spec writes them
SPEC_DEFAULTS = {
    "KNOWLEDGE_AUTO_TRIAGE": "shadow", "KNOWLEDGE_AUDIT_RATE": 0.1, "KNOWLEDGE_KAPPA_FLOOR": 0.6,
    "KNOWLEDGE_KAPPA_MIN_SAMPLES": 20, "KNOWLEDGE_KAPPA_WINDOW_DAYS": 30, "KNOWLEDGE_HOLDOUT_RATE": 0.1,
    "KNOWLEDGE_CONTEXT_TOP_K": 5, "KNOWLEDGE_CONTEXT_TOKEN_BUDGET": 1500, "KNOWLEDGE_SIMILARITY_THRESHOLD": 0.25,
    "KNOWLEDGE_CONVENTION_MIN_RUNS": 3, "KNOWLEDGE_CONVENTION_HARM_MARGIN": 3, "KNOWLEDGE_GAP_ISSUE_MIN_COUNT": 5,
    "KNOWLEDGE_GAP_ISSUES_CRON": "0 4 * * 1", "KNOWLEDGE_PAGE_REFRESH_MIN_INTERVAL": "6h",
    "KNOWLEDGE_PAGE_REFRESH_CRON": "23 * * * *", "PAGE_PROPOSED_ENTRY_BUDGET": 10,
    "PAGE_PROPOSED_ENTRY_EXPIRY_DAYS": 30, "PAGE_STANDING_ENTRY_DECAY_DAYS": 90, "PAGE_DECAY_CRON": "0 3 * * *",
}


def _parse(tmp_path: Path, file_values: dict | None = None, env: dict | None = None) -> BankSettings:
    return bank.parse(tmp_path / "company.toml", file_values or {}, env or {})


# -- the table and its layers --------------------------------------------------------------------------------

def test_every_setting_of_the_spec_with_its_default_and_snake_case_key():
    settings = BankSettings()
    assert set(bank.VARIABLES) == set(SPEC_DEFAULTS)
    for row in settings.rows():
        assert row["source"] == "default"
        assert row["value"] == SPEC_DEFAULTS[row["variable"]], row
        # the key is the variable in snake case, less the KNOWLEDGE_ prefix
        assert row["key"] == row["variable"].removeprefix("KNOWLEDGE_").lower()
        assert row["meaning"].endswith(".") and row["meaning"][0].isupper() or row["key"] == "auto_triage"
    assert settings.page_refresh_min_interval == Duration(21_600, "6h")
    assert settings.page_decay_cron == Cron("0 3 * * *") and not settings.page_decay_cron.off


def test_the_environment_wins_over_the_file_which_wins_over_the_default(tmp_path):
    s = _parse(tmp_path, {"holdout_rate": 0.2, "audit_rate": 0.3, "page_refresh_min_interval": "90m",
                          "page_decay_cron": "off", "auto_triage": "on"},
               {"KNOWLEDGE_HOLDOUT_RATE": "0.05", "PAGE_PROPOSED_ENTRY_BUDGET": "4",
                "KNOWLEDGE_GAP_ISSUES_CRON": "30 5 * * 2", "KNOWLEDGE_AUTO_TRIAGE": " OFF "})
    assert (s.holdout_rate, s.source("holdout_rate")) == (0.05, "environment")
    assert (s.audit_rate, s.source("audit_rate")) == (0.3, "company.toml")
    assert (s.page_proposed_entry_budget, s.source("page_proposed_entry_budget")) == (4, "environment")
    assert (s.page_refresh_min_interval, s.source("page_refresh_min_interval")) == (Duration(5_400, "90m"),
                                                                                      "company.toml")
    assert s.page_decay_cron.off and s.page_decay_cron.due(None) is False and str(s.page_decay_cron) == "off"
    assert s.gap_issues_cron == Cron("30 5 * * 2") and s.source("gap_issues_cron") == "environment"
    assert (s.auto_triage, s.source("auto_triage")) == ("off", "environment")
    assert (s.kappa_floor, s.source("kappa_floor")) == (0.6, "default")
    assert s.warnings == ()


def test_an_environment_variable_set_empty_is_not_set(tmp_path):
    s = _parse(tmp_path, {"holdout_rate": 0.2}, {"KNOWLEDGE_HOLDOUT_RATE": "  "})
    assert (s.holdout_rate, s.source("holdout_rate"), s.warnings) == (0.2, "company.toml", ())


@pytest.mark.parametrize("file_values, env, key, applies, source, layer, why", [
    ({"holdout_rate": 1.5}, {}, "holdout_rate", 0.1, "default", "knowledge.holdout_rate", "a rate is from 0 to 1"),
    ({"holdout_rate": 0.3}, {"KNOWLEDGE_HOLDOUT_RATE": "lots"}, "holdout_rate", 0.3, "company.toml",
     "environment: KNOWLEDGE_HOLDOUT_RATE", "'lots' is not a number"),
    ({"audit_rate": "0.2"}, {}, "audit_rate", 0.1, "default", "knowledge.audit_rate", "expected a number, found str"),
    ({}, {"KNOWLEDGE_AUDIT_RATE": "nan"}, "audit_rate", 0.1, "default", "KNOWLEDGE_AUDIT_RATE", "out of range"),
    ({"context_token_budget": 20_001}, {}, "context_token_budget", 1500, "default",
     "knowledge.context_token_budget", "use a whole number from 1 to 20000"),
    ({"context_token_budget": 3000}, {"KNOWLEDGE_CONTEXT_TOKEN_BUDGET": "25000"}, "context_token_budget", 3000,
     "company.toml", "KNOWLEDGE_CONTEXT_TOKEN_BUDGET", "out of range"),
    ({"kappa_min_samples": True}, {}, "kappa_min_samples", 20, "default", "knowledge.kappa_min_samples",
     "expected a whole number, found bool"),
    ({}, {"KNOWLEDGE_KAPPA_WINDOW_DAYS": "2.5"}, "kappa_window_days", 30, "default", "KNOWLEDGE_KAPPA_WINDOW_DAYS",
     "not a whole number"),
    ({"page_standing_entry_decay_days": 0}, {}, "page_standing_entry_decay_days", 90, "default",
     "knowledge.page_standing_entry_decay_days", "at least 1"),
    ({"auto_triage": "maybe"}, {}, "auto_triage", "shadow", "default", "knowledge.auto_triage",
     "is not one of off, shadow, on"),
    ({"page_refresh_min_interval": "6x"}, {}, "page_refresh_min_interval", Duration(21_600, "6h"), "default",
     "knowledge.page_refresh_min_interval", "'6x' is not a duration"),
    ({"page_refresh_min_interval": 3600}, {}, "page_refresh_min_interval", Duration(21_600, "6h"), "default",
     "knowledge.page_refresh_min_interval", "as a string, found int"),
    ({"page_decay_cron": "off"}, {"PAGE_DECAY_CRON": "61 * * * *"}, "page_decay_cron", Cron(None), "company.toml",
     "environment: PAGE_DECAY_CRON", "(bad minute)"),
    ({"gap_issues_cron": "0 0 * * * *"}, {}, "gap_issues_cron", Cron("0 4 * * 1"), "default",
     "knowledge.gap_issues_cron", "has 6 fields; a cron expression has five"),
    ({}, {"KNOWLEDGE_PAGE_REFRESH_CRON": "0 0 30 2 *"}, "page_refresh_cron", Cron("23 * * * *"), "default",
     "KNOWLEDGE_PAGE_REFRESH_CRON", "(bad day-of-month)"),
])
def test_a_value_that_cannot_be_read_is_warned_once_and_the_layer_below_applies(
        tmp_path, caplog, file_values, env, key, applies, source, layer, why):
    caplog.set_level(logging.WARNING, logger="crewlet.settings")
    s = _parse(tmp_path, file_values, env)
    assert getattr(s, key) == applies and s.source(key) == source
    assert len(s.warnings) == 1, s.warnings
    line = s.warnings[0]
    assert layer in line and why in line and "\n" not in line, line
    assert line.startswith(f"{tmp_path / 'company.toml'}: knowledge.{key}: " if layer.startswith("knowledge.")
                           else "environment: "), line
    instead = {"default": "the default", "company.toml": "company.toml's", "environment": "the environment's"}[source]
    assert line.endswith(f"— ignored; {instead} {bank.shown(applies)} applies"), line
    # said once in this process, however often the file is read again (a node reloads it when it changes)
    _parse(tmp_path, file_values, env)
    said = [r.getMessage() for r in caplog.records if r.name == "crewlet.settings"]
    assert said == [line]


def test_a_bad_value_under_a_good_one_is_still_said(tmp_path):
    s = _parse(tmp_path, {"holdout_rate": -1}, {"KNOWLEDGE_HOLDOUT_RATE": "0.4"})
    assert (s.holdout_rate, s.source("holdout_rate")) == (0.4, "environment")
    assert s.warnings == (f"{tmp_path / 'company.toml'}: knowledge.holdout_rate: -1 is out of range: a rate is from "
                          "0 to 1 — ignored; the environment's 0.4 applies",)


# -- composed into company.toml ------------------------------------------------------------------------------

def _write(tmp_path: Path, **changes) -> Path:
    f = tmp_path / "company.toml"
    f.write_text(tomli_w.dumps(config_with(**changes)), encoding="utf-8")
    return f


def test_company_toml_and_the_environment_reach_the_company(tmp_path, monkeypatch):
    f = _write(tmp_path, knowledge={"backend": "native", "holdout_rate": 0.25, "page_proposed_entry_budget": 3,
                                    "kappa_floor": 7})
    monkeypatch.setenv("PAGE_PROPOSED_ENTRY_BUDGET", "6")
    company = config_mod.load(f)
    assert company.knowledge.backend == "native"           # the table's own keys are read as before
    assert company.bank.holdout_rate == 0.25 and company.bank.source("holdout_rate") == "company.toml"
    assert company.bank.page_proposed_entry_budget == 6 and company.bank.source("page_proposed_entry_budget") == \
        "environment"
    assert company.bank.kappa_floor == 0.6 and len(company.bank.warnings) == 1   # 7 ignored, not a refusal
    assert config_mod.Company(file=f, spaces={}, actors={}).bank == BankSettings()


@pytest.mark.parametrize("typo, meant", [("holdout_rat", "holdout_rate"), ("page_decay_corn", "page_decay_cron")])
def test_an_unknown_key_in_knowledge_is_still_refused(tmp_path, typo, meant):
    f = _write(tmp_path, knowledge={"backend": "native", typo: 0.2})
    with pytest.raises(ConfigError) as exc:
        config_mod.load(f)
    assert exc.value.key == f"knowledge.{typo}" and f"did you mean '{meant}'" in exc.value.problem
    assert meant in exc.value.fix and "root_space" in exc.value.fix


def test_a_file_refused_elsewhere_says_only_its_refusal(tmp_path, caplog):
    """The bank's warnings are said once the file loads: beside a refusal they would be noise."""
    caplog.set_level(logging.WARNING, logger="crewlet.settings")
    f = _write(tmp_path, knowledge={"backend": "native", "holdout_rate": 2.5},
               spaces={"ENG": {"name": "Engineering", "lead": "nobody"}})
    with pytest.raises(ConfigError) as exc:
        config_mod.load(f)
    assert exc.value.key == "spaces.ENG.lead"
    assert [r for r in caplog.records if r.name == "crewlet.settings"] == []


# -- the CLI, as a separate process ----------------------------------------------------------------------------

def _run(home: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items()
             if not k.startswith("CREWLET_") and k not in bank.VARIABLES}
    return subprocess.run([sys.executable, "-c", "from crewlet_tui.cli import main; main()", "--home", str(home),
                           *args], env={**clean, **(env or {})}, cwd=ROOT, capture_output=True, text=True,
                          timeout=300)


@pytest.fixture(scope="module")
def settings_home(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("bank") / "home"
    assert _run(root, "init").returncode == 0
    data = config_mod.example_config()
    data["knowledge"] |= {"audit_rate": 0.3, "holdout_rate": 1.5, "page_decay_cron": "off"}
    (root / "company.toml").write_text(tomli_w.dumps(data), encoding="utf-8")
    return root


def test_the_cli_shows_each_value_where_it_came_from_and_what_it_means(settings_home):
    res = _run(settings_home, "settings", "knowledge", env={"KNOWLEDGE_PAGE_REFRESH_MIN_INTERVAL": "6x",
                                                            "KNOWLEDGE_HOLDOUT_RATE": "0.2", "COLUMNS": "400"})
    assert res.returncode == 0, res.stderr
    # one block per setting: "key = value  (from…)", then its variable, a cron in words, its meaning
    blocks = {b.splitlines()[0].split(" = ")[0]: b for b in res.stdout.split("\n\n") if " = " in b.splitlines()[0]}
    assert "0.3" in blocks["audit_rate"] and "company.toml; default 0.1" in blocks["audit_rate"]
    assert "0.2" in blocks["holdout_rate"] and "environment; default 0.1" in blocks["holdout_rate"]
    assert "off" in blocks["page_decay_cron"] and "When the decay pass runs." in blocks["page_decay_cron"]
    assert "0 4 * * 1" in blocks["gap_issues_cron"]
    assert "KNOWLEDGE_GAP_ISSUES_CRON\n  At 04:00 on Monday (UTC); next " in blocks["gap_issues_cron"]
    assert "the calendar (ages, decay, crons): " in res.stdout and ", the real clock" in res.stdout
    assert "(default" in blocks["kappa_floor"] and "Below this kappa" in blocks["kappa_floor"]
    assert "2 values could not be read and were ignored:" in res.stdout
    assert "knowledge.holdout_rate: 1.5 is out of range" in res.stdout
    assert "environment: KNOWLEDGE_PAGE_REFRESH_MIN_INTERVAL: '6x' is not a duration" in res.stdout
    # on stderr too, once each, as every command that reads the file says them
    warned = [line for line in res.stderr.splitlines() if line.startswith("warning:")]
    assert len(warned) == 2 and all("ignored;" in w for w in warned), res.stderr


def test_the_cli_json_carries_values_sources_and_warnings(settings_home):
    res = _run(settings_home, "settings", "knowledge", "--json", env={"KNOWLEDGE_CONTEXT_TOP_K": "8"})
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    rows = {r["key"]: r for r in out["settings"]}
    assert set(rows) == set(bank.KEYS) and out["file"] == str(settings_home / "company.toml")
    assert rows["context_top_k"]["value"] == 8
    assert rows["context_top_k"]["source"] == "environment" and rows["context_top_k"]["default"] == 5
    assert rows["audit_rate"]["source"] == "company.toml" and rows["audit_rate"]["value"] == 0.3
    assert rows["page_refresh_min_interval"]["seconds"] == 21_600 and rows["page_decay_cron"]["value"] == "off"
    assert rows["holdout_rate"]["value"] == 0.1 and rows["holdout_rate"]["source"] == "default"
    assert len(out["warnings"]) == 1 and "knowledge.holdout_rate" in out["warnings"][0]


def test_the_cli_says_when_crewlet_now_holds_the_calendar_and_when_it_cannot(settings_home):
    held = _run(settings_home, "settings", "knowledge", "--json", env={"CREWLET_NOW": "2027-03-01T03:30:00Z"})
    assert held.returncode == 0, held.stderr
    out = json.loads(held.stdout)
    assert out["calendar"] == {"now": "2027-03-01T03:30:00Z", "fixed": True}
    rows = {r["key"]: r for r in out["settings"]}
    assert rows["gap_issues_cron"]["next"] == "2027-03-01T04:00:00Z"       # 2027-03-01 is a Monday
    assert rows["page_refresh_cron"]["next"] == "2027-03-01T04:23:00Z"
    assert rows["page_decay_cron"]["next"] is None                        # off in this home's company.toml
    bad = _run(settings_home, "settings", "knowledge", "--json", env={"CREWLET_NOW": "soon"})
    assert bad.returncode == 0, bad.stderr
    assert json.loads(bad.stdout)["calendar"]["fixed"] is False
    said = [line for line in bad.stderr.splitlines() if "CREWLET_NOW" in line]
    assert said == ["warning: CREWLET_NOW='soon' is not an ISO date-time (e.g. 2027-03-01T03:00:00Z): ignored, the "
                    "real clock applies"]


def test_the_cli_exit_codes(tmp_path, settings_home):
    missing = _run(tmp_path / "nowhere", "settings", "knowledge")
    assert missing.returncode == 1 and "no crewlet home" in missing.stderr and missing.stderr.count("\n") == 1
    refused_home = tmp_path / "refused"
    assert _run(refused_home, "init").returncode == 0
    data = config_mod.example_config()
    data["knowledge"]["holdout_rat"] = 0.2
    (refused_home / "company.toml").write_text(tomli_w.dumps(data), encoding="utf-8")
    refused = _run(refused_home, "settings", "knowledge", "--json")
    assert refused.returncode == 1 and "knowledge.holdout_rat" in refused.stderr
    assert json.loads(refused.stdout)["error"] == "config"
    assert _run(settings_home, "settings", "knowledge", "--bogus").returncode == 2
    assert _run(settings_home, "settings").returncode == 2
    helped = _run(settings_home, "settings", "--help")
    assert helped.returncode == 0 and "knowledge" in helped.stdout and "repositories" in helped.stdout


# -- [repositories.NAME] ---------------------------------------------------------------------------------------

def test_repositories_are_read_from_company_toml_and_opened_as_real_git(tmp_path):
    repo = GitRepo(tmp_path / "checkouts" / "server", branch="trunk")
    repo.write("apps/api/pyproject.toml", "[project]\nname = 'api'\n")
    repo.write("docs/guide.md", numbered(3))
    head = repo.commit("first")
    home = tmp_path / "home"
    home.mkdir()
    f = home / "company.toml"
    f.write_text(tomli_w.dumps(config_with(repositories={
        "server": {"path": "../checkouts/server", "modules": ["./docs/", "docs"], "poll_interval": "90s"},
        "abs": {"path": str(repo.path), "default_branch": "trunk"},
    })), encoding="utf-8")
    company = config_mod.load(f)
    server = company.repositories["server"]
    assert server.path == repo.path and server.path.is_absolute()
    assert server.modules == ("docs",) and server.default_branch is None
    assert (server.poll_interval_s, server.poll_interval) == (90, "1m30s")
    assert company.repositories["abs"].poll_interval_s == DEFAULT_POLL_INTERVAL_S
    assert company.repositories.names() == ["server", "abs"]
    with open_repositories(company.repositories) as repos:
        assert sorted(repos) == ["abs", "server"]
        assert repos["server"].head() == head and repos["server"].default_branch == "trunk"
        assert repos.modules("server") == ["apps/api", "docs"]      # a manifest's folder and the listed one
        assert repos["abs"].head() == head


@pytest.mark.parametrize("table, key, says", [
    ({"server": {"path": "nowhere"}}, "repositories.server.path", "does not exist"),
    ({"server": {"path": "company.toml"}}, "repositories.server.path", "is not a directory"),
    ({"server": {"default_branch": "main"}}, "repositories.server.path", "needs the path of its local git checkout"),
    ({"server": {"path": ".", "branch": "main"}}, "repositories.server.branch", "did you mean 'default_branch'"),
    ({"server": {"path": ".", "default_branch": "--upload-pack=x"}}, "repositories.server.default_branch",
     "is not a branch name"),
    ({"server": {"path": ".", "modules": ["../etc"]}}, "repositories.server.modules", "climbs out"),
    ({"server": {"path": ".", "modules": "apps"}}, "repositories.server.modules", "expected list"),
    ({"server": {"path": ".", "poll_interval": "6x"}}, "repositories.server.poll_interval", "is not a duration"),
    ({"server": {"path": ".", "poll_interval": "1s"}}, "repositories.server.poll_interval", "out of range"),
    ({"server": {"path": ".", "poll_interval": 300}}, "repositories.server.poll_interval", "expected str"),
    ({"a:b": {"path": "."}}, "repositories.a:b", "not a repository name"),
    ({"server": "."}, "repositories.server", "not a repository's table"),
])
def test_a_repository_table_that_cannot_be_used_is_refused_in_one_line(tmp_path, table, key, says):
    f = tmp_path / "company.toml"
    f.write_text(tomli_w.dumps(config_with(repositories=table)), encoding="utf-8")
    with pytest.raises(ConfigError) as exc:
        config_mod.load(f)
    assert exc.value.key == key and says in str(exc.value) and "\n" not in str(exc.value), str(exc.value)
    assert str(exc.value).startswith(f"{f}: {key}: ")


def test_no_repositories_is_an_empty_set(tmp_path):
    f = _write(tmp_path)
    assert config_mod.load(f).repositories == RepositoriesSettings()
    with open_repositories(RepositoriesSettings()) as repos:
        assert len(repos) == 0


@pytest.mark.parametrize("text", ["apps/web", "./apps//web/", "/apps/web", ".", "", "a\\b", " x/./y "])
def test_listed_modules_are_written_as_the_repos_layer_writes_folders(text):
    from core.sections.repos import _folder

    assert _folder(text) == norm_folder(text)


def test_the_cli_lists_the_repositories(tmp_path):
    repo = GitRepo(tmp_path / "server")
    repo.commit("first")
    home = tmp_path / "home"
    assert _run(home, "init").returncode == 0
    data = config_mod.example_config() | {"repositories": {"server": {"path": "../server", "modules": ["apps/x"]}}}
    (home / "company.toml").write_text(tomli_w.dumps(data), encoding="utf-8")
    res = _run(home, "settings", "repositories", "--json")
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["repositories"] == [{
        "name": "server", "path": str(repo.path), "default_branch": None, "modules": ["apps/x"],
        "poll_interval": "5m", "poll_interval_s": 300}]
    plain = _run(home, "settings", "repositories", env={"COLUMNS": "300"})
    assert plain.returncode == 0 and "server" in plain.stdout and str(repo.path) in plain.stdout
    assert "HEAD's branch" in plain.stdout and "apps/x" in plain.stdout


# -- the calendar: CREWLET_NOW, durations, crons ------------------------------------------------------------------

def test_crewlet_now_sets_the_calendar_and_not_the_records_clock(monkeypatch):
    monkeypatch.setenv("CREWLET_NOW", "2027-03-01T03:30:00+02:00")
    assert clock.calendar_now() == datetime(2027, 3, 1, 1, 30, tzinfo=timezone.utc)
    assert clock.calendar_now_ms() == clock.to_ms(datetime(2027, 3, 1, 1, 30, tzinfo=timezone.utc))
    assert clock.now_ms() < clock.calendar_now_ms()      # records keep the real clock (before 2027 here)
    monkeypatch.setenv("CREWLET_NOW", "2027-03-01T03:30")  # no offset: UTC
    assert clock.calendar_now() == datetime(2027, 3, 1, 3, 30, tzinfo=timezone.utc)
    monkeypatch.setenv("CREWLET_NOW", "2027-03-01")
    assert clock.calendar_now() == datetime(2027, 3, 1, tzinfo=timezone.utc)


def test_a_crewlet_now_that_cannot_be_read_is_warned_once_and_the_real_clock_applies(monkeypatch, caplog):
    caplog.set_level(logging.WARNING, logger="crewlet.clock")
    monkeypatch.setenv("CREWLET_NOW", "next tuesday, 9-ish")
    before = datetime.now(timezone.utc)
    first, second = clock.calendar_now(), clock.calendar_now()
    after = datetime.now(timezone.utc)
    assert before <= first <= second <= after
    said = [r.getMessage() for r in caplog.records if r.name == "crewlet.clock"]
    assert said == ["CREWLET_NOW='next tuesday, 9-ish' is not an ISO date-time (e.g. 2027-03-01T03:00:00Z): "
                    "ignored, the real clock applies"]


def test_ages_and_decay_are_taken_on_the_calendar(monkeypatch):
    monkeypatch.setenv("CREWLET_NOW", "2027-03-31T00:00:00Z")
    created = clock.to_ms(datetime(2027, 3, 1, tzinfo=timezone.utc))
    assert clock.age_ms(created) == 30 * 86_400_000
    assert not clock.older_than_days(created, 30) and clock.older_than_days(created, 29)
    assert clock.age_ms(clock.calendar_now_ms() + 5_000) == 0     # a stamp ahead of the calendar is no age
    assert clock.from_ms(created) == datetime(2027, 3, 1, tzinfo=timezone.utc)


def test_a_cron_is_due_once_it_fired_since_the_last_run(monkeypatch):
    nightly = Cron("0 3 * * *")
    last = clock.to_ms(datetime(2027, 3, 1, 3, 0, tzinfo=timezone.utc))
    monkeypatch.setenv("CREWLET_NOW", "2027-03-02T02:59:00Z")
    assert not nightly.due(last)
    monkeypatch.setenv("CREWLET_NOW", "2027-03-02T03:00:00Z")
    assert nightly.due(last)
    assert nightly.due(None)                         # never ran: due at once
    assert not Cron(None).due(None)                   # off: never
    assert nightly.next_after(datetime(2027, 3, 2, 3, 0, tzinfo=timezone.utc)) == \
        datetime(2027, 3, 3, 3, 0, tzinfo=timezone.utc)
    assert nightly.explained() == "At 03:00 every day" and Cron(None).explained() == "never"


@pytest.mark.parametrize("text, seconds", [("90m", 5_400), ("6h", 21_600), ("1d", 86_400), ("1h30m", 5_400),
                                           ("1h 30m", 5_400), ("2w", 1_209_600), ("45s", 45), (" 6H ", 21_600)])
def test_durations(text, seconds):
    assert clock.parse_duration(text) == seconds
    assert clock.parse_duration(clock.duration_text(seconds)) == seconds


@pytest.mark.parametrize("text", ["6x", "6", "", "h", "-5m", "5m-", "x6h", "6h6x", "1.5h"])
def test_a_duration_that_is_not_one_says_so(text):
    with pytest.raises(ValueError, match="is not a duration|is empty"):
        clock.parse_duration(text)


def test_cron_problems_name_the_field():
    assert clock.cron_problem("0 4 * * 1") is None and clock.cron_problem("0 4 * * mon") is None
    assert "bad hour" in clock.cron_problem("0 24 * * *")
    assert "has 1 field;" in clock.cron_problem("@daily")
    assert clock.next_cron("0 4 * * 1", datetime(2026, 12, 2, tzinfo=timezone.utc)) == \
        datetime(2026, 12, 7, 4, 0, tzinfo=timezone.utc)
    assert clock.next_cron("*/15 * * * *", datetime(2026, 12, 2, 10, 7, tzinfo=timezone.utc)) - \
        datetime(2026, 12, 2, 10, 7, tzinfo=timezone.utc) == timedelta(minutes=8)
