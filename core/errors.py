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
    """A reference that names no page. The fact alone: each surface adds its own advice (the CLI names
    `crewlet pages`, MCP its list_pages tool), since a model cannot run a command."""

    def __init__(self, ref: str) -> None:
        container = ref.split("/", 1)[0].strip() if "/" in ref else None
        super().__init__(f"no page '{ref}'", ref=ref, container=container)
        self.ref, self.container = ref, container


class KnowledgeElsewhere(Refused):
    """The company's knowledge lives on a remote site (knowledge.backend): this node keeps no copy of it
    to write to or to list. The fact (where, and whether a write was refused) in the core's words; each
    surface adds how to reach it there."""

    code = "knowledge_elsewhere"

    def __init__(self, message: str, *, backend: str, url: str, write: bool) -> None:
        super().__init__(message, backend=backend, url=url, write=write)
        self.backend, self.url, self.write = backend, url, write


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
