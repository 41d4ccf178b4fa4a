"""The MCP server: the SDK's low-level server, our tools and resources, served over stdio.

Every request runs its store work in a worker thread under the session's lock (one call at a time over
the one SQLite connection), after catching up with what other processes wrote; the event loop stays
free to read the next message. Nothing a tool raises reaches the SDK: a refusal is a tool error
(`isError`) carrying the store's one line, anything else is logged to stderr with its traceback and
answered as a one-line tool error, and the server goes on serving.

stdout carries only the protocol: the SDK's stdio transport points file descriptor 1 at stderr while
it serves, and logging goes to stderr.

The SDK is imported when a server is built, not when this module is: it brings its HTTP transports'
dependencies (starlette, uvicorn and with it click), which `import core` must not (a library's users
who never serve MCP pay nothing, and tests/test_core_isolation.py holds core to no CLI framework).
"""
from __future__ import annotations

import logging
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any, TypeVar

import anyio
import anyio.to_thread
from pydantic import ValidationError

from ..errors import CrewletError, NotFound
from . import resources
from .session import Session, describe_error
from .tools import TOOLS, Tool

log = logging.getLogger("crewlet.mcp")

T = TypeVar("T")
SERVER_NAME = "crewlet"
RESOURCE_NOT_FOUND = -32002      # the MCP specification's code for a resource that does not exist


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("crewlet")
    except Exception:  # a checkout run without installing
        return "0"


def instructions(session: Session, tools: list[Tool] | None = None) -> str:
    """What the model is told about this server when it connects: who it acts as, what is here, and the tools
    it is offered — each in its own one-line hint (Tool.hint, declared beside its description), so a new tool
    is told of here without a word written in this function."""
    who = session.actor
    kind = "an agent" if who.is_agent else "a person"
    offered = [t for t in (tools if tools is not None else TOOLS) if t.offered_to(who.is_agent)]
    if session.remote:
        lines = [f"crewlet serves the team's knowledge base, which lives in {session.where()}: it is searched and "
                 f"read there live, as {who.handle} ({kind}), and crewlet keeps no copy of it."]
    else:
        spaces = session.kb.spaces(actor=session.handle)
        listed = ", ".join(f"{s['key']} ({s['name']}, {s['pages']} page{'' if s['pages'] == 1 else 's'})"
                           for s in spaces if s["declared"])
        lines = [f"crewlet is the team's knowledge base: pages of Markdown in spaces, each space an outline. You act "
                 f"as {who.handle} ({kind}): what you write is under that name.",
                 f"Spaces: {listed or 'none declared yet'}."]
    usable = [t for t in offered if t.on_remote or not session.remote]
    lines.append("Your tools:")
    lines += [f"- {t.name}: {t.hint}." for t in usable]
    refused = [t.name for t in offered if t not in usable]
    if refused:
        lines.append(f"Pages are written in the site itself: {_listed(refused)} "
                     f"{'is' if len(refused) == 1 else 'are'} refused here, saying so.")
    if who.is_agent and not session.remote:
        knowledge = session.node.company.knowledge
        lines.append(f"As an agent you may not add pages to {knowledge.root_space} (the company root) nor write in "
                     f"{knowledge.skills_container} (tool skills).")
    return "\n".join(lines)


def _listed(names: list[str]) -> str:
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def _sdk() -> SimpleNamespace:
    """The MCP SDK's pieces this server uses (imported on first use: see the module's docstring)."""
    import mcp_types
    from mcp.server.lowlevel.server import Server
    from mcp.server.stdio import stdio_server
    from mcp.shared.exceptions import MCPError

    return SimpleNamespace(types=mcp_types, Server=Server, stdio_server=stdio_server, MCPError=MCPError)


class CrewletServer:
    def __init__(self, session: Session, tools: list[Tool] | None = None) -> None:
        sdk = self.sdk = _sdk()
        self.session = session
        self.tools = {t.name: t for t in (tools if tools is not None else TOOLS)}
        self.server = sdk.Server(
            SERVER_NAME, version=_version(), title="crewlet knowledge base",
            instructions=instructions(session, list(self.tools.values())),
            on_list_tools=self.list_tools, on_call_tool=self.call_tool,
            on_list_resources=self.list_resources, on_list_resource_templates=self.list_templates,
            on_read_resource=self.read_resource)

    # -- running store work --------------------------------------------------------------------------
    async def _run(self, fn: Callable[[], T]) -> T:
        """`fn` in a worker thread, under the session's lock, after catching up with other writers."""
        self._warm()

        def locked() -> T:
            with self.session.lock:
                self.session.catch_up()
                return fn()

        return await anyio.to_thread.run_sync(locked)

    def _warm(self) -> None:
        """The embedding model loads in the background (begun when the server starts serving; here too for a
        server driven without serve_stdio), so `initialize` never waits for it."""
        self.session.start_warm()

    def _offered(self) -> list[Tool]:
        is_agent = self.session.actor.is_agent
        return [t for t in self.tools.values() if t.offered_to(is_agent)]

    # -- tools ---------------------------------------------------------------------------------------
    async def list_tools(self, ctx: Any, params: Any) -> Any:
        offered = await self._run(self._offered)
        return self.sdk.types.ListToolsResult(tools=[
            self.sdk.types.Tool(name=t.name, title=t.title, description=t.description, input_schema=t.input_schema(),
                                annotations=self.sdk.types.ToolAnnotations(title=t.title, read_only_hint=t.read_only,
                                                                           destructive_hint=False, open_world_hint=False))
            for t in offered])

    async def call_tool(self, ctx: Any, params: Any) -> Any:
        types = self.sdk.types

        def answer() -> Any:  # one trip to the worker thread: look the tool up, check, run
            offered = {t.name: t for t in self._offered()}
            tool = offered.get(params.name)
            if tool is None:
                return _error(f"no tool named '{params.name}' — tools/list names the tools: "
                              f"{', '.join(sorted(offered))}", {"error": "unknown_tool"})
            try:
                args = tool.args.model_validate(params.arguments or {})
            except ValidationError as exc:
                return _error(_arguments_line(tool.name, exc), {"error": "invalid_arguments"})
            reply = tool.run(self.session, args)
            return types.CallToolResult(content=[types.TextContent(type="text", text=reply.text)],
                                        structured_content=reply.data)

        try:
            return await self._run(answer)
        except Exception as exc:
            message, data = describe_error(exc, self.session.node.home)
            if isinstance(exc, CrewletError):
                log.info("%s refused: %s", params.name, message)
            else:
                log.exception("%s failed", params.name)
            return _error(message, data)

    # -- resources ------------------------------------------------------------------------------------
    async def list_resources(self, ctx: Any, params: Any) -> Any:
        cursor = params.cursor if params is not None else None
        try:
            listed, next_cursor = await self._run(lambda: resources.listing(self.session, cursor))
        except Exception as exc:
            raise self._protocol_error(exc) from None
        return self.sdk.types.ListResourcesResult(
            resources=[self.sdk.types.Resource(uri=r.uri, name=r.name, title=r.title, description=r.description,
                                      mime_type=resources.MIME) for r in listed],
            next_cursor=next_cursor)

    async def list_templates(self, ctx: Any, params: Any) -> Any:
        return self.sdk.types.ListResourceTemplatesResult(resource_templates=[self.sdk.types.ResourceTemplate(
            uri_template=resources.TEMPLATE, name="page", title="A page of the knowledge base",
            description="One page in full (Markdown), by its id: what get_page returns.", mime_type=resources.MIME)])

    async def read_resource(self, ctx: Any, params: Any) -> Any:
        uri = str(params.uri)
        try:
            text, _ = await self._run(lambda: resources.read(self.session, uri))
        except Exception as exc:
            raise self._protocol_error(exc, uri) from None
        return self.sdk.types.ReadResourceResult(contents=[self.sdk.types.TextResourceContents(uri=uri, text=text,
                                                                             mime_type=resources.MIME)])

    def _protocol_error(self, exc: Exception, uri: str | None = None) -> Exception:
        """Resources have no tool errors: a refusal is a JSON-RPC error carrying the same one line."""
        message, data = describe_error(exc, self.session.node.home)
        if not isinstance(exc, CrewletError):
            log.exception("resource request failed")
        code = RESOURCE_NOT_FOUND if isinstance(exc, NotFound) else self.sdk.types.INVALID_PARAMS if isinstance(
            exc, CrewletError) else self.sdk.types.INTERNAL_ERROR
        return self.sdk.MCPError(code=code, message=message, data=data | ({"uri": uri} if uri else {}))

    # -- serving -------------------------------------------------------------------------------------
    async def serve_stdio(self) -> None:
        from .stdio_guard import answering_bad_lines

        self.session.start_warm()   # the model loads while the client shakes hands; the first search waits for it
        async with answering_bad_lines(self.sdk.stdio_server()) as (read_stream, write_stream):
            await self.server.run(read_stream, write_stream, self.server.create_initialization_options())


def _error(message: str, data: dict[str, Any]) -> Any:
    import mcp_types as types

    return types.CallToolResult(content=[types.TextContent(type="text", text=message)],
                                structured_content=data | {"message": message}, is_error=True)


def _arguments_line(tool: str, exc: ValidationError) -> str:
    """A model's wrong arguments in one line: which argument, and what is wrong with it."""
    parts = []
    for err in exc.errors():
        where = ".".join(str(p) for p in err["loc"]) or "arguments"
        parts.append(f"'{where}': {err['msg']}")
    return f"{tool} was called with bad arguments — " + "; ".join(parts)


def serve(session: Session) -> None:
    """Serve the session over stdio until the client closes standard input."""
    anyio.run(CrewletServer(session).serve_stdio)
