"""A refusal or failure in the words the app shows (a notice, a screen's trail, a tree's level): the one line
`core.errors.describe` gives every surface, as the CLI says it — a person at this machine can take the fix it
names — and a bug by its own words. The CLI's exit line is cli_common.handle_errors, MCP's core/mcp/session.py.
"""
from __future__ import annotations

from core.errors import describe

from .sanitize import clean_line


def error_text(exc: BaseException) -> str:
    said = describe(exc)
    return clean_line((str(exc) or exc.__class__.__name__) if said.internal else said.message)
