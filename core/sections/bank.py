"""The knowledge bank's settings (spec 003, "Settings"): its part of [knowledge] in company.toml, and the same
names as environment variables, which win.

Three layers, lowest first: the spec's default, `company.toml` ([knowledge], the key in snake case:
`holdout_rate`), the environment (the upper-case name: `KNOWLEDGE_HOLDOUT_RATE`). Unlike every other table, a
value here that cannot be read — of the wrong type, out of range, a bad cron expression or duration — does not
refuse the file: spec 003 says it "is ignored, and the next layer applies". It is said once, as a warning
naming the layer, the key and why, and what applies instead; every value keeps the layer it came from
(`BankSettings.source`), and `crewlet settings knowledge` shows them. A key [knowledge] does not know is still
refused (`core.config` checks the table's keys, these among them), because a typo that loads is a setting
silently not set.

A room of floor 1 (docs/architecture.md, "The floors"): it imports the kit and the clock, nothing above.
"""
from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from datetime import datetime
from pathlib import Path
from typing import Any

from core.clock import calendar_now, cron_due, cron_explained, cron_problem, next_cron, parse_duration
from core.settings import key_in

TABLE = "knowledge"
DEFAULT, FILE, ENVIRONMENT = "default", "company.toml", "environment"
SOURCES = (DEFAULT, FILE, ENVIRONMENT)           # lowest first: a later layer wins
AUTO_TRIAGE_MODES = ("off", "shadow", "on")
MAX_CONTEXT_TOKENS = 20_000
OFF = "off"
log = logging.getLogger("crewlet.settings")


class Unreadable(ValueError):
    """A value of one layer that cannot be read: its reason in words ("is out of range: a rate is from 0 to 1")."""


@dataclass(frozen=True)
class Duration:
    """A duration as it was written ("6h", "90m") and its length in seconds."""

    seconds: int
    text: str

    def __str__(self) -> str:
        return self.text


@dataclass(frozen=True)
class Cron:
    """When a job runs: a five-field cron expression in UTC, or off (`expr` None)."""

    expr: str | None

    @property
    def off(self) -> bool:
        return self.expr is None

    def __str__(self) -> str:
        return self.expr or OFF

    def explained(self) -> str:
        """In words ("At 03:00 every day"; "never" when off)."""
        return "never" if self.expr is None else cron_explained(self.expr)

    def next_after(self, after: datetime) -> datetime | None:
        """The next instant after `after` it fires (UTC); None when off."""
        return None if self.expr is None else next_cron(self.expr, after)

    def due(self, last_run_ms: int | None) -> bool:
        """Whether its job is due on the calendar (`core.clock.calendar_now`, which CREWLET_NOW sets); never
        when off."""
        return self.expr is not None and cron_due(self.expr, last_run_ms)


@dataclass(frozen=True)
class BankSettings:
    """The knowledge bank's settings (the spec's defaults here), each with the layer it came from, and the
    warnings said about the values that could not be read."""

    auto_triage: str = "shadow"
    audit_rate: float = 0.1
    kappa_floor: float = 0.6
    kappa_min_samples: int = 20
    kappa_window_days: int = 30
    holdout_rate: float = 0.1
    context_top_k: int = 5
    context_token_budget: int = 1500
    similarity_threshold: float = 0.25
    convention_min_runs: int = 3
    convention_harm_margin: int = 3
    gap_issue_min_count: int = 5
    gap_issues_cron: Cron = Cron("0 4 * * 1")
    page_refresh_min_interval: Duration = Duration(6 * 3_600, "6h")
    page_refresh_cron: Cron = Cron("23 * * * *")
    page_proposed_entry_budget: int = 10
    page_proposed_entry_expiry_days: int = 30
    page_standing_entry_decay_days: int = 90
    page_decay_cron: Cron = Cron("0 3 * * *")
    sources: Mapping[str, str] = field(default_factory=dict, repr=False)   # key -> a SOURCES layer (absent: default)
    warnings: tuple[str, ...] = field(default=(), repr=False)

    def source(self, key: str) -> str:
        """Where `key`'s value came from: "default", "company.toml" or "environment"."""
        if key not in SETTINGS_BY_KEY:
            raise KeyError(key)
        return self.sources.get(key, DEFAULT)

    def rows(self, now: datetime | None = None) -> list[dict[str, Any]]:
        """Every setting as the CLI and scripts show it: key, variable, value, source, default, meaning (a
        duration's seconds; a cron in words and when it next fires after `now`, default the calendar's)."""
        at = now or calendar_now()
        return [_row(d, getattr(self, d.key), self.source(d.key), at) for d in SETTINGS]


# -- reading one layer's value ---------------------------------------------------------------------------------
# `read(value, from_env)`: a file's value is TOML-typed (a rate is a number, a cron a string); the
# environment's is text, read as the setting's type. Each raises Unreadable with the reason.

Reader = Callable[[Any, bool], Any]


def _text(value: Any, what: str) -> str:
    if not isinstance(value, str):
        raise Unreadable(f"expected {what} as a string, found {type(value).__name__} {value!r}")
    return value.strip()


def _number(low: float, high: float, what: str) -> Reader:
    def read(value: Any, from_env: bool) -> float:
        if from_env:
            try:
                value = float(value)
            except ValueError:
                raise Unreadable(f"{value!r} is not a number") from None
        elif isinstance(value, bool) or not isinstance(value, (int, float)):
            raise Unreadable(f"expected a number, found {type(value).__name__} {value!r}")
        if not math.isfinite(value) or not low <= value <= high:
            raise Unreadable(f"{value:g} is out of range: {what} is from {low:g} to {high:g}")
        return float(value)

    return read


def _whole(low: int, high: int | None = None) -> Reader:
    def read(value: Any, from_env: bool) -> int:
        if from_env:
            try:
                value = int(value.strip())
            except ValueError:
                raise Unreadable(f"{value!r} is not a whole number") from None
        elif isinstance(value, bool) or not isinstance(value, int):
            raise Unreadable(f"expected a whole number, found {type(value).__name__} {value!r}")
        if value < low or (high is not None and value > high):
            bound = f"from {low} to {high}" if high is not None else f"at least {low}"
            raise Unreadable(f"{value} is out of range: use a whole number {bound}")
        return value

    return read


def _choice(*options: str) -> Reader:
    def read(value: Any, from_env: bool) -> str:
        text = _text(value, "one of " + ", ".join(options)).lower()
        if text not in options:
            raise Unreadable(f"{value!r} is not one of {', '.join(options)}")
        return text

    return read


def _duration(value: Any, from_env: bool) -> Duration:
    text = _text(value, 'a duration such as "6h"')
    try:
        return Duration(parse_duration(text), text)
    except ValueError as exc:
        raise Unreadable(str(exc)) from None


def _cron(value: Any, from_env: bool) -> Cron:
    text = " ".join(_text(value, 'a cron expression such as "0 3 * * *", or "off"').split())
    if text.lower() == OFF:
        return Cron(None)
    problem = cron_problem(text)
    if problem:
        raise Unreadable(f"{problem}; write five fields such as 0 3 * * *, or off")
    return Cron(text)


@dataclass(frozen=True)
class Declared:
    """One setting: its key in [knowledge], its environment variable, how a layer's value is read, and the
    spec's line for what it means."""

    key: str
    variable: str
    read: Reader
    meaning: str


_RATE = _number(0, 1, "a rate")
SETTINGS: tuple[Declared, ...] = (
    Declared("auto_triage", "KNOWLEDGE_AUTO_TRIAGE", _choice(*AUTO_TRIAGE_MODES),
             "off, shadow (decide and record, do not act) or on."),
    Declared("audit_rate", "KNOWLEDGE_AUDIT_RATE", _RATE,
             "The share of triage's own decisions sent to a person as audits, from 0 to 1."),
    Declared("kappa_floor", "KNOWLEDGE_KAPPA_FLOOR", _number(-1, 1, "a kappa"),
             "Below this kappa, a decision type escalates instead of acting."),
    Declared("kappa_min_samples", "KNOWLEDGE_KAPPA_MIN_SAMPLES", _whole(0),
             "The verdicts a decision type needs before the floor applies."),
    Declared("kappa_window_days", "KNOWLEDGE_KAPPA_WINDOW_DAYS", _whole(1),
             "The days of verdicts that agreement is measured over."),
    Declared("holdout_rate", "KNOWLEDGE_HOLDOUT_RATE", _RATE,
             "The share of hosted runs given no knowledge, from 0 to 1."),
    Declared("context_top_k", "KNOWLEDGE_CONTEXT_TOP_K", _whole(0),
             "The relevant entries in a run's context, after the conventions."),
    Declared("context_token_budget", "KNOWLEDGE_CONTEXT_TOKEN_BUDGET", _whole(1, MAX_CONTEXT_TOKENS),
             f"The tokens that a run's knowledge may take, at most {MAX_CONTEXT_TOKENS}."),
    Declared("similarity_threshold", "KNOWLEDGE_SIMILARITY_THRESHOLD", _RATE,
             "How alike two entries must be, from 0 to 1, before triage asks a model how they relate."),
    Declared("convention_min_runs", "KNOWLEDGE_CONVENTION_MIN_RUNS", _whole(1),
             "The separate runs with the same review finding before it becomes a candidate convention."),
    Declared("convention_harm_margin", "KNOWLEDGE_CONVENTION_HARM_MARGIN", _whole(0),
             "How far harmful outcomes must outnumber helpful ones before a candidate convention is archived."),
    Declared("gap_issue_min_count", "KNOWLEDGE_GAP_ISSUE_MIN_COUNT", _whole(1),
             "How often a question must be asked before it gets an issue."),
    Declared("gap_issues_cron", "KNOWLEDGE_GAP_ISSUES_CRON", _cron,
             "When gap issues are opened. off disables the job."),
    Declared("page_refresh_min_interval", "KNOWLEDGE_PAGE_REFRESH_MIN_INTERVAL", _duration,
             "The least time between two builds of one generated page, such as 90m, 6h or 1d."),
    Declared("page_refresh_cron", "KNOWLEDGE_PAGE_REFRESH_CRON", _cron,
             "When generated pages are looked for to rebuild. off disables it: a page is then built only when it "
             "is made or its question changes (after the minimum interval), and a build that failed twice is "
             "not tried again."),
    Declared("page_proposed_entry_budget", "PAGE_PROPOSED_ENTRY_BUDGET", _whole(0),
             "The proposed entries that one actor may leave on one curated page."),
    Declared("page_proposed_entry_expiry_days", "PAGE_PROPOSED_ENTRY_EXPIRY_DAYS", _whole(1),
             "How long a proposed entry waits before decay archives it."),
    Declared("page_standing_entry_decay_days", "PAGE_STANDING_ENTRY_DECAY_DAYS", _whole(1),
             "How long a standing entry may go unused before decay archives it."),
    Declared("page_decay_cron", "PAGE_DECAY_CRON", _cron,
             "When the decay pass runs. off disables it."),
)
SETTINGS_BY_KEY = {d.key: d for d in SETTINGS}
KEYS = tuple(SETTINGS_BY_KEY)          # what [knowledge] accepts besides core.config's own keys
VARIABLES = tuple(d.variable for d in SETTINGS)
_DEFAULTS = BankSettings()


def shown(value: Any) -> str:
    """A value as the settings table shows it (0.1, 1500, 6h, 0 3 * * *, off)."""
    return f"{value:g}" if isinstance(value, float) else str(value)


def _json_value(value: Any) -> Any:
    return str(value) if isinstance(value, (Duration, Cron)) else value


def _row(d: Declared, value: Any, source: str, now: datetime) -> dict[str, Any]:
    row = {"key": d.key, "variable": d.variable, "value": _json_value(value), "shown": shown(value),
           "source": source, "default": _json_value(getattr(_DEFAULTS, d.key)), "meaning": d.meaning}
    if isinstance(value, Duration):
        row["seconds"] = value.seconds
    if isinstance(value, Cron):
        row["when"] = value.explained()
        following = value.next_after(now)
        row["next"] = following.isoformat().replace("+00:00", "Z") if following else None
    return row


# -- the layers ------------------------------------------------------------------------------------------------

def parse(file: Path, knowledge: Mapping[str, Any] | None, env: Mapping[str, str]) -> BankSettings:
    """The bank's settings from [knowledge] (`knowledge`: the whole table, whose other keys are core.config's)
    and the environment `env`, each over the default. A value that cannot be read is warned about once (in
    this process) and left out: the layer below applies. An environment variable set empty is not set."""
    knowledge = knowledge or {}
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    warnings: list[str] = []
    for d in SETTINGS:
        layers = [(FILE, key_in(TABLE, d.key), knowledge.get(d.key), False),
                  (ENVIRONMENT, d.variable, env.get(d.variable), True)]
        layers = [(src, name, raw, from_env) for src, name, raw, from_env in layers
                  if raw is not None and not (from_env and not str(raw).strip())]
        read: dict[str, Any] = {}
        problems: list[tuple[str, str, Any, str]] = []
        for src, name, raw, from_env in layers:
            try:
                read[src] = d.read(raw, from_env)
            except Unreadable as exc:
                problems.append((src, name, raw, str(exc)))
        winner = ENVIRONMENT if ENVIRONMENT in read else FILE if FILE in read else DEFAULT
        if winner != DEFAULT:
            values[d.key] = read[winner]
            sources[d.key] = winner
        applies = values.get(d.key, getattr(_DEFAULTS, d.key))
        for src, name, _raw, why in problems:
            where = str(file) if src == FILE else "environment"
            instead = ("the default" if winner == DEFAULT else
                       "company.toml's" if winner == FILE else "the environment's")
            warnings.append(f"{where}: {name}: {why} — ignored; {instead} {shown(applies)} applies")
    _say(warnings)
    return BankSettings(**values, sources=sources, warnings=tuple(warnings))


_said: set[str] = set()


def _say(warnings: list[str]) -> None:
    """Each warning logged once in this process: a node loads company.toml again when it changes, and a
    value that could not be read is worth one line, not one per load."""
    for line in warnings:
        if line not in _said:
            _said.add(line)
            log.warning("%s", line)


def _check_declarations() -> None:
    """Every field of BankSettings is declared, and every declaration is a field (a setting added to one and
    not the other would be shown without a value, or read into nothing)."""
    names = {f.name for f in fields(BankSettings)} - {"sources", "warnings"}
    if names != set(KEYS):
        raise AssertionError(f"BankSettings and SETTINGS disagree: {sorted(names ^ set(KEYS))}")


_check_declarations()
