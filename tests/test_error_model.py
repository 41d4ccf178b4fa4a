"""One error model (issue 32): every exception class core raises toward a surface is a `CrewletError` with a
stable code of its own, and the three surfaces — the CLI's exit 1, the MCP tool error, the app's notice —
say one example of each family through `core.errors.describe`, each adding only its own advice.

The class tree is walked from the code (every module of core imported), so a new error class that forgets
its base or its code fails here, not on a user's screen.
"""
from __future__ import annotations

import errno
import importlib
import inspect
import json
import pkgutil

from pathlib import Path

import pytest
import typer

import core
from core.errors import CrewletError, Description, describe
from core.paths import Home
from core.store import sqlite3   # the driver the engine uses (its errors are not the stdlib's where it is pysqlite3)

# Exceptions core raises and catches itself, never letting one reach a surface: control flow, each with
# the place that catches it. Everything else defined in core must be a CrewletError.
INSIDE_CORE = {
    "core.replica.appliers.Refuse": "DecidingApplier turns it into the record's refused outcome",
    "core.replica.appliers.Noop": "DecidingApplier turns it into the record's no-op outcome",
    "core.replica.appliers.Malformed": "the engine records a malformed record as refused",
    "core.replica.engine._GiveUp": "catch_up stops the batch and says why",
    "core.replica.kinds.CannotSay": "recover.py leaves out a candidate the rows cannot rebuild",
    "core.search.ivf.kmeans.Stopped": "training stops when the duty is asked to",
    "core.duties.runner.LeaseLost": "the runner skips the pass another holder took over",
    "core.remote.searcher.NotSearched": "a remote search that does not run is an outcome, not an error",
    "core.repos.git.NoAnswer": "a cat-file that stops answering is read as no answer by its caller",
    "core.repos.citations.ShapeError": "check_citations turns it into the citation's failed outcome",
    "core.sections.bank.Unreadable": "the bank's settings warn once and let the layer below apply",
    "core.bank.judge.JudgeFailed": "the recheck writes a citation the model gave no verdict on as changed, for a person",
    "core.bank.generated_model.EditsFailed": "a refresh the model gave no edits for is a failed build, tried once "
                                             "more and then left to the hourly look",
    "core.bank.triage_judge.JudgmentFailed": "triage escalates an entry the judgments could not judge "
                                             "(JUDGES_DISAGREE, the failure in its inputs)",
}


def core_exception_classes() -> dict[str, type[BaseException]]:
    found: dict[str, type[BaseException]] = {}
    for info in pkgutil.walk_packages(core.__path__, "core."):
        module = importlib.import_module(info.name)
        for name, obj in vars(module).items():
            if inspect.isclass(obj) and issubclass(obj, BaseException) and obj.__module__ == module.__name__:
                found[f"{obj.__module__}.{obj.__qualname__}"] = obj
    return found


def test_every_error_class_core_raises_toward_a_surface_is_a_crewlet_error_with_a_code_of_its_own():
    classes = core_exception_classes()
    assert "core.settings.ConfigError" in classes and "core.log.filelog.LogDamage" in classes   # the walk saw them
    missing = set(INSIDE_CORE) - set(classes)
    assert not missing, f"no longer defined (drop them from INSIDE_CORE): {missing}"
    outside = {name: cls for name, cls in classes.items() if name not in INSIDE_CORE}
    not_ours = sorted(name for name, cls in outside.items() if not issubclass(cls, CrewletError))
    assert not not_ours, f"error classes outside the model (make them CrewletError, with a code): {not_ours}"
    declared: dict[str, str] = {}
    for name, cls in sorted(outside.items()):
        code = cls.code
        assert isinstance(code, str) and code and code == code.strip() and " " not in code, (name, code)
        if "code" in vars(cls):       # a code names one class (and the subclasses that keep it)
            assert code not in declared, f"{name} declares {code!r}, as {declared.get(code)} does"
            declared[code] = name
    # the roots that were apart before issue 32 are one tree now
    for root in ("core.settings.ConfigError", "core.log.filelog.LogDamage", "core.log.filelog.LogFailed",
                 "core.log.filelog.LogBusy", "core.embed.provider.ProviderError", "core.chat.openai_http.ChatFailed",
                 "core.remote.http.RemoteFailure", "core.log.filelog.RecordTooLarge", "core.log.jetstream.StreamRefused"):
        assert root in declared.values(), root


# -- one example of each family, said by each surface ---------------------------------------------------------

def _examples(home: Home) -> dict[str, BaseException]:
    from core.chat.openai_http import ChatFailed
    from core.config import ConfigError
    from core.embed.provider import InputRefused
    from core.errors import Invalid, NoPage, Refused, StaleRevision, UnknownContainer
    from core.log import LogBusy, LogCorrupt, LogFailed
    from core.remote.http import RemoteFailure

    damage = LogCorrupt(home.log_file, 4096, 7, "bad checksum", next_offset=5000)
    full = OSError(errno.ENOSPC, "No space left on device", str(home.db_file))
    locked = sqlite3.OperationalError("database is locked")
    locked.sqlite_errorcode = 5  # type: ignore[attr-defined]
    return {
        "refused": Refused("an agent may not add a page to the root space HOME", code="reserved"),
        "stale": StaleRevision("ENG/Rollback is at revision 2, not 1", base_revision=1, current_revision=2,
                               your_body="mine", rescued_to=str(home.root / "rescued" / "x.md")),
        "not_found": NoPage.of("ENG/Nothing"),
        "unknown_container": UnknownContainer.of("NOPE"),
        "invalid": Invalid("the limit must be between 1 and 500 (got 0)", code="invalid_limit"),
        "config": ConfigError(home.config_file, "spaces.ENG.lead", "'nobody' is not an actor", "name an actor"),
        "log_damaged": damage,
        "log": LogFailed(f"{home.log_file}: fsync failed"),
        "log_busy": LogBusy(home.log_file, 31, "crewlet worker (pid 42)"),
        "provider_failed": InputRefused("refused: too long", status=400, code="context_length_exceeded"),
        "chat_failed": ChatFailed("timeout", "the model did not answer within 60 s"),
        "remote_failed": RemoteFailure("unreachable", "confluence.example.com cannot be reached"),
        "disk_full": full,
        "busy": locked,
    }


@pytest.fixture
def a_home(tmp_path) -> Home:
    root = tmp_path / "home"
    root.mkdir()
    return Home(root)


def test_describe_reads_every_family_with_its_code_and_one_line(a_home):
    for family, exc in _examples(a_home).items():
        said = describe(exc, home=a_home)
        assert isinstance(said, Description) and not said.internal, family
        assert said.code == {"refused": "reserved", "stale": "stale_revision", "invalid": "invalid_limit"}.get(
            family, family), (family, said.code)
        assert said.message and "\n" not in said.message and said.fact and said.message.startswith(said.fact[:20])
    assert describe(KeyError("x")).internal      # a bug is not a refusal: the CLI shows its traceback


def _cli_line(exc: BaseException, capsys, as_json: bool = False) -> tuple[str, dict | None]:
    from crewlet_tui.cli_common import handle_errors

    @handle_errors
    def command(as_json: bool = False) -> None:
        raise exc

    with pytest.raises(typer.Exit) as exit_:
        command(as_json=as_json)
    assert exit_.value.exit_code == 1
    out = capsys.readouterr()
    return " ".join(out.err.split()), (json.loads(out.out.strip().splitlines()[-1]) if as_json else None)


def test_the_three_surfaces_say_each_family_through_describe(a_home, capsys, monkeypatch):
    from core.mcp.session import describe_error
    from crewlet_tui.cli_common import STATE
    from crewlet_tui.error_words import error_text

    monkeypatch.setattr(STATE, "home_arg", str(a_home.root))
    root = str(a_home.root)
    for family, exc in _examples(a_home).items():
        said = describe(exc, home=a_home)
        # the CLI: exit 1, one line on stderr — the message as a person at this machine reads it (its fix
        # included) — and the same code in --json
        line, _ = _cli_line(exc, capsys)
        assert line.startswith("crewlet: ") and " ".join(said.message.split()) in line, (family, line)
        _, payload = _cli_line(exc, capsys, as_json=True)
        assert payload is not None and payload["error"] == said.code, (family, payload)
        # MCP: the fact and the tools' advice, never a command of this machine nor its paths
        text, data = describe_error(exc, a_home)
        assert "\n" not in text and data["error"] == said.code and data["message"] == text, family
        assert "`crewlet" not in text and root not in text and root not in json.dumps(data), (family, text)
        assert "your_body" not in data, family     # a refused write's text is the model's own: not sent back
        # the app: the message in one notice line (a failure of storage names "the database": a notice has no home)
        assert error_text(exc) == " ".join(describe(exc).message.split()), family
    # what each surface adds is its own: the CLI names its command, MCP its tool, for the same refusal
    from core.errors import UnknownContainer

    line, _ = _cli_line(UnknownContainer.of("NOPE"), capsys)
    text, _ = describe_error(UnknownContainer.of("NOPE"), a_home)
    assert "`crewlet spaces` lists them" in line and "list_pages" not in line
    assert "list_pages" in text and "crewlet" not in text


def test_a_storage_failure_names_its_cause_and_the_fix_only_where_a_person_can_take_it(a_home):
    from core.mcp.session import describe_error

    full = OSError(errno.ENOSPC, "No space left on device", str(a_home.db_file))
    said = describe(full, home=a_home)
    assert said.code == "disk_full" and said.message.endswith("free some space there and retry")
    text, _ = describe_error(full, a_home)
    assert text.startswith("the disk holding crewlet.db is full") and "free some space" not in text
    # a file error that names no file names the home; a SQLite one its database
    assert str(a_home.root) in describe(OSError(errno.EIO, "I/O error"), home=a_home).message
    damaged = sqlite3.DatabaseError("file is not a database")
    assert describe(damaged, home=a_home).message.startswith(f"{a_home.db_file} cannot be read as a crewlet database")


def test_a_refusal_keeps_its_words_whole_and_its_fix_apart():
    """`str(exc)` is what every person-facing surface said before the model: the fact and the fix."""
    from core.config import ConfigError
    from core.errors import Refused

    refusal = Refused("container 'X' is not a declared space", fix="declare it in company.toml", code="not_declared")
    assert str(refusal) == "container 'X' is not a declared space — declare it in company.toml"
    assert refusal.fact == "container 'X' is not a declared space" and refusal.fix == "declare it in company.toml"
    config = ConfigError(Path("/h/company.toml"), "actors.x.admin", "not a boolean", "write true or false")
    assert str(config) == "/h/company.toml: actors.x.admin: not a boolean — write true or false"
    assert config.to_json() == {"error": "config", "message": str(config), "file": "/h/company.toml",
                                "key": "actors.x.admin"}


def test_mcp_cuts_a_command_a_refusal_wrote_into_its_fact(a_home):
    """A refusal should keep its command apart as its fix; MCP still never passes one on when it did not."""
    from core.errors import NotFound, Refused
    from core.log import LogMismatch
    from core.mcp.session import describe_error

    comment = NotFound("no comment 'c1' — `crewlet page show REF` lists a page's comments")
    aside = Refused("sam is a person: onboarding markers are agents' (`crewlet agents` shows them)", code="not_an_agent")
    diverged = LogMismatch(a_home.log_file, 0, 9, "the log was repaired and no longer holds record 9, which this node "
                           "applied: this database holds a change no log has — `crewlet log repair` rebuilds it",
                           kind="diverged")
    assert describe_error(comment, a_home)[0] == "no comment 'c1'"
    assert describe_error(aside, a_home)[0] == "sam is a person: onboarding markers are agents'"
    text, data = describe_error(diverged, a_home)
    assert "this database holds a change no log has" in text and "crewlet" not in text and data["kind"] == "diverged"
    assert text.startswith("the log is damaged: log/pages.log: the log was repaired")


def test_a_note_after_a_refusal_keeps_its_class_code_fix_and_facts_whatever_its_constructor(a_home):
    """How a refused save adds where the writer's text is kept: to any refusal, one with its own constructor
    (LogUnreachable takes servers and why) as well as a plain one with a fix."""
    from core.errors import Refused
    from core.log.jetstream import LogUnreachable

    down = LogUnreachable("nats://a:4222", "connection refused").with_note(" (your text is kept in r.md)", rescued_to="r.md")
    assert type(down) is LogUnreachable and down.servers == "nats://a:4222" and down.code == "log"
    assert str(down).endswith("connection refused (your text is kept in r.md)") and down.details == {"rescued_to": "r.md"}
    assert describe(down).message.startswith("the log cannot be written: the log's NATS servers")
    forbidden = Refused("sam does not hold the knowledge app", fix="an admin sets it in company.toml", code="forbidden")
    kept = forbidden.with_note(" (your text is kept in r.md)")
    assert str(kept) == "sam does not hold the knowledge app — an admin sets it in company.toml (your text is kept in r.md)"
    assert kept.fact == "sam does not hold the knowledge app (your text is kept in r.md)" and kept.code == "forbidden"
    assert forbidden.details == {} and str(forbidden).endswith("company.toml")    # the original is untouched
