"""Every line on stdin gets an answer: one that is not JSON-RPC is answered with the protocol's error.

The SDK's stdio transport reads a line, and when it is not a JSON-RPC message (not JSON at all, a lone
surrogate escape, nesting past its parser's depth, a number past its range, JSON of the wrong shape) it
hands the parser's exception to the server, which logs it and answers nothing: the client waits for a
reply to that request until its own timeout. This sits between the transport and the server: such an
exception becomes a JSON-RPC error written back on the transport's own stream (so replies never tear),
-32700 (parse error) for text that is not JSON the SDK reads, -32600 (invalid request) for JSON that is
no message; its id is the request's when a lenient read of the line finds one, else null (JSON-RPC 2.0
§5.1). A blank line is no request and gets no answer.
"""
from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import anyio

log = logging.getLogger("crewlet.mcp")

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
MAX_ID_CHARS = 200          # an id past this is no id a client is waiting on: answered with null


def _readable_id(raw: Any) -> str | int | None:
    """The request's id when it is one JSON-RPC allows (a string or an integer) and of a sane size."""
    if isinstance(raw, dict):
        value = raw.get("id")
        if isinstance(value, bool):
            return None
        if isinstance(value, str) and len(value) <= MAX_ID_CHARS:
            return value
        if isinstance(value, int) and len(str(value)) <= MAX_ID_CHARS:
            return value
    return None


def _lenient_read(line: str) -> Any:
    """The line as Python's json reads it (it accepts lone surrogates), or None when it cannot."""
    try:
        return json.loads(line)
    except (ValueError, RecursionError, MemoryError):
        return None


def error_for(exc: Exception) -> tuple[int, str, str | int | None] | None:
    """(code, message, id) answering the transport's exception for a line it could not read, or None when the
    exception is not about a line (the server's own handling applies)."""
    errors = getattr(exc, "errors", None)
    if not callable(errors):
        return None
    try:
        details = errors()
    except Exception:  # noqa: BLE001 - not a pydantic ValidationError after all
        return None
    if not details:
        return None
    first = details[0]
    given = first.get("input")
    if first.get("type") == "json_invalid":
        why = str(first.get("msg", "")).removeprefix("Invalid JSON: ")
        request_id = _readable_id(_lenient_read(given)) if isinstance(given, str) else None
        return PARSE_ERROR, f"Parse error: the line is not JSON the server reads ({why})", request_id
    return INVALID_REQUEST, "Invalid Request: the line is JSON but not a JSON-RPC 2.0 message", _readable_id(given)


@asynccontextmanager
async def answering_bad_lines(transport: AbstractAsyncContextManager[tuple[Any, Any]]) -> AsyncIterator[tuple[Any, Any]]:
    """`transport` (the SDK's stdio_server()) with every unreadable line answered on its write stream; the
    server reads the messages through the stream this yields."""
    import mcp_types as types
    from mcp.shared._context_streams import create_context_streams
    from mcp.shared.message import SessionMessage

    async with transport as (sdk_read, write_stream):
        send, receive = create_context_streams[Any](0)

        async def forward() -> None:
            async with send:
                async for item in sdk_read:
                    if isinstance(item, Exception) and _blank(item):
                        continue                               # a blank line: no request, nothing to answer
                    answer = error_for(item) if isinstance(item, Exception) else None
                    if answer is None:
                        await send.send(item)
                        continue
                    code, message, request_id = answer
                    log.info("answered a line that is not JSON-RPC: %s", message)
                    await write_stream.send(SessionMessage(types.JSONRPCError(
                        jsonrpc="2.0", id=request_id, error=types.ErrorData(code=code, message=message))))

        async with anyio.create_task_group() as tg:
            tg.start_soon(forward)
            try:
                yield receive, write_stream
            finally:
                tg.cancel_scope.cancel()


def _blank(exc: Exception) -> bool:
    try:
        first = exc.errors()[0]  # type: ignore[attr-defined]
    except Exception:  # noqa: BLE001
        return False
    given = first.get("input")
    return first.get("type") == "json_invalid" and isinstance(given, str) and not given.strip()
