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
