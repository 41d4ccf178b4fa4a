"""The engine's refusals. Each carries a stable code for scripts and one line for a person."""
from __future__ import annotations

from typing import Any


class CrewletError(Exception):
    code = "error"

    def __init__(self, message: str, *, code: str | None = None, **details: Any) -> None:
        super().__init__(message)
        if code:
            self.code = code
        self.details = details

    def to_json(self) -> dict[str, Any]:
        return {"error": self.code, "message": str(self), **self.details}


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
    def of(cls, ref: str) -> "NoPage":
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


class Invalid(CrewletError):
    """Bad input from the caller (an empty title, a limit out of range)."""

    code = "invalid"
