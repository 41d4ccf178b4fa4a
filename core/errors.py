"""The engine's refusals: one model for every surface.

Every refusal the engine raises is a `CrewletError` (or a subclass): a stable `code` for scripts (declared
once, on the class that owns it; a raise may name a finer one), one line for a person, and `details` (a
dict of facts). A refusal whose next step names something only a person at this machine can do — a
`crewlet` command, a file to edit — keeps that step apart as its `fix`: `str(exc)` is the fact and the fix,
`exc.fact` the fact alone, so a surface that cannot take that step (a model over MCP) says its own instead.

`describe(exc)` is the one reading of any exception the surfaces meet (the CLI's exit 1, the MCP tool
error, the app's notice): a refusal's own `description()`, or a failure of storage (`OSError`, SQLite) in
words that name the real cause, or an internal error. Each surface adds only its own advice.
"""
from __future__ import annotations

import errno
import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

INTERNAL = "internal"      # describe()'s code for an exception that is not a refusal: a bug, said as one


@dataclass(frozen=True)
class Description:
    """What a surface says of an exception: `message` for a person at this machine (the fact and its fix),
    `fact` without the fix, `code` and `details` for scripts and structured content."""

    code: str
    message: str
    fact: str = ""
    details: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.fact:
            object.__setattr__(self, "fact", self.message)

    @property
    def internal(self) -> bool:
        """Not a refusal nor a failure the engine names: a bug (the CLI shows its traceback)."""
        return self.code == INTERNAL

    def to_json(self, message: str | None = None) -> dict[str, Any]:
        return {"error": self.code, "message": self.message if message is None else message, **self.details}

    def with_details(self, **more: Any) -> Description:
        return replace(self, details=self.details | more)


class CrewletError(Exception):
    """A refusal: `code` (stable), one line (`str`), `details`; `fix` the next step of a person at this
    machine, said after the fact (" — fix"), which a surface may replace with its own."""

    code = "error"

    def __init__(self, message: str, *, code: str | None = None, fix: str | None = None, **details: Any) -> None:
        super().__init__(f"{message} — {fix}" if fix else message)
        self.fact = message
        self.fix = fix or ""
        if code:
            self.code = code
        self.details = details

    def to_json(self) -> dict[str, Any]:
        return self.description().to_json()

    def with_note(self, note: str, **details: Any) -> CrewletError:
        """This refusal with `note` said after it (after the fact alone too, for a surface that leaves the fix
        out) and more details: an instance of the same class, whatever its constructor takes."""
        again = type(self).__new__(type(self), str(self) + note)
        again.__dict__.update(self.__dict__)
        again.fact = self.fact + note
        again.details = self.details | details
        return again

    def description(self) -> Description:
        """How the surfaces say it; a subclass whose facts live in attributes says them here."""
        return Description(self.code, str(self), self.fact, dict(self.details))


class Refused(CrewletError):
    """The operation was understood and refused: by a rule, or by the applier at apply time."""

    code = "refused"


class NotFound(CrewletError):
    code = "not_found"


class NoPage(NotFound):
    """A reference that names no page: the fact alone (details: ref, and the container an address names).
    Each surface adds its own advice — the CLI names `crewlet pages`, MCP its list_pages tool — since the
    words of one are no use on the other (a model cannot run a command)."""

    @classmethod
    def of(cls, ref: str) -> NoPage:
        container = ref.split("/", 1)[0].strip() if "/" in ref else None
        return cls(f"no page '{ref}'", ref=ref, container=container)


class KnowledgeElsewhere(Refused):
    """The company's knowledge lives on a remote site (knowledge.backend): this node keeps no copy of it to
    write to or to list. The fact in the core's words (details: backend, url, and whether a write was
    refused); each surface adds how to reach it there (config.RemoteSite.refusal builds it)."""

    code = "knowledge_elsewhere"


class StaleRevision(Refused):
    """A save against a revision that is no longer current. Carries the writer's own text so that
    nothing typed is lost."""

    code = "stale_revision"

    def __init__(self, message: str, *, base_revision: int, current_revision: int, your_body: str,
                 rescued_to: str | None = None) -> None:
        super().__init__(message, base_revision=base_revision, current_revision=current_revision)
        self.base_revision = base_revision
        self.current_revision = current_revision
        self.your_body = your_body
        self.rescued_to = rescued_to

    def description(self) -> Description:
        return super().description().with_details(your_body=self.your_body, rescued_to=self.rescued_to)


class UnknownContainer(NotFound):
    """A container asked for (to list, to search) that is neither declared nor holds a live page: a typo,
    refused alike by every command and tool (details: container). `pages.containers.unknown_container`
    decides it."""

    code = "unknown_container"

    @classmethod
    def of(cls, key: str) -> UnknownContainer:
        return cls(f"no space '{key}': it is not declared and holds no pages", fix="`crewlet spaces` lists them",
                   container=key)


class Invalid(CrewletError):
    """Bad input from the caller (an empty title, a limit out of range)."""

    code = "invalid"


# -- failures of storage, in words that name the real cause ------------------------------------------------

# what a person at this machine does about each (a surface that cannot act there says the fact alone)
STORAGE_FIXES = {"disk_full": "free some space there and retry", "read_only": "make it writable to change anything",
                 "busy": "retry when the other process is done"}


def storage_problem(exc: BaseException, path: Path) -> tuple[str, str]:
    """(code, words) naming the real cause of a failed read or write of `path`: a full disk or a read-only
    file is not a damaged database, and must never be told to restore from a backup."""
    from .store import sqlite3

    if isinstance(exc, OSError) and exc.errno is not None:
        err = exc.errno
        why = exc.strerror or str(exc)
        if err in (errno.ENOSPC, errno.EDQUOT):
            return "disk_full", f"the disk holding {path} is full ({why})"
        if err == errno.EFBIG:
            return "disk_full", f"{path} cannot grow: the file size limit is reached ({why})"
        if err == errno.EROFS:
            return "read_only", f"{path} is on a read-only filesystem"
        if err in (errno.EACCES, errno.EPERM):
            return "read_only", f"{path} cannot be written ({why})"
        if err == errno.EIO:
            if _no_space_left(path):  # a short write on a full disk
                return "disk_full", f"the disk holding {path} is full ({why})"
            return "io", f"an I/O error on {path} ({why})"
        return "io", f"{path}: {why}"
    if isinstance(exc, sqlite3.Error):
        primary = (getattr(exc, "sqlite_errorcode", None) or 0) & 0xFF
        if primary == 10 and _no_space_left(path):
            primary = 13  # SQLite reports some writes a full disk refuses as an I/O error
        words = {13: ("disk_full", f"the disk holding {path} is full ({exc})"),
                 8: ("read_only", f"{path} is read-only ({exc})"),
                 10: ("io", f"an I/O error on {path} ({exc}) — a full disk or a failing one"),
                 14: ("io", f"{path} cannot be opened ({exc})"),
                 5: ("busy", f"{path} is locked by another process ({exc})"),
                 6: ("busy", f"{path} is locked ({exc})")}
        if primary in words:
            return words[primary]
        text = str(exc)
        if "disk is full" in text:
            return "disk_full", f"the disk holding {path} is full ({exc})"
        if "readonly" in text or "read-only" in text:
            return "read_only", f"{path} is read-only ({exc})"
        return "database", f"{path}: {exc}"
    return "io", f"{path}: {exc}"


def _no_space_left(path: Path) -> bool:
    try:
        st = os.statvfs(path if path.is_dir() else path.parent)
    except OSError:
        return False
    return st.f_bavail * st.f_frsize < 64 * 1024


class Place(Protocol):
    """Where a home's storage is (paths.Home is one; named here so the floor imports nothing above it)."""

    @property
    def root(self) -> Path: ...

    @property
    def db_file(self) -> Path: ...


def _storage(exc: BaseException, home: Place | None) -> Description:
    from .store import sqlite3

    if isinstance(exc, IsADirectoryError) and exc.filename:
        return Description("io", f"{exc.filename} is a directory — give a file", f"{exc.filename} is a directory")
    if isinstance(exc, FileNotFoundError) and exc.filename:
        return Description("io", f"{exc.filename}: no such file — check the path", f"{exc.filename}: no such file")
    if isinstance(exc, OSError):
        path = Path(exc.filename) if exc.filename else home.root if home is not None else Path(".")
    else:
        path = home.db_file if home is not None else Path("the database")
    code, words = storage_problem(exc, path)
    if code == "database" and isinstance(exc, sqlite3.DatabaseError) and not isinstance(exc, sqlite3.OperationalError):
        fact = f"{path} cannot be read as a crewlet database ({exc})"
        return Description("database", f"{fact} — restore it from a backup, or move it aside and replay the log into a "
                                       "fresh one", fact)
    fix = STORAGE_FIXES.get(code)
    return Description(code, f"{words} — {fix}" if fix else words, words)


def describe(exc: BaseException, *, home: Place | None = None) -> Description:
    """The one reading of an exception a surface meets: a refusal as it describes itself; a failed read or
    write of storage by its real cause (naming the file the error names, else the home's root for a file
    error and its database for a SQLite one); text that is not UTF-8; anything else an internal error (a bug: the CLI shows its traceback)."""
    from .store import sqlite3

    if isinstance(exc, CrewletError):
        return exc.description()
    if isinstance(exc, (OSError, sqlite3.Error)):
        return _storage(exc, home)
    if isinstance(exc, UnicodeDecodeError):
        return Description("io", str(exc))
    return Description(INTERNAL, f"internal error: {type(exc).__name__}: {exc}")
