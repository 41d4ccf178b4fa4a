"""Driving `crewlet mcp` as an agent runtime does: a real MCP client session from the SDK spawns the
server as a subprocess and talks to it over stdio. Tests never call the server's functions directly.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, StdioServerParameters

from core.paths import Home

ROOT = Path(__file__).resolve().parent.parent
CREWLET = [sys.executable, "-c", "from crewlet_tui.cli import main; main()"]
ENV = {k: v for k, v in os.environ.items() if not k.startswith("CREWLET_")}


def server_params(home: Path, actor: str | None = None, *extra: str,
                  env: dict[str, str] | None = None) -> StdioServerParameters:
    args = [*CREWLET[1:], "--home", str(home), *(["--as", actor] if actor else []), "mcp", *extra]
    return StdioServerParameters(command=CREWLET[0], args=args, env={**ENV, **(env or {})}, cwd=str(ROOT))


@asynccontextmanager
async def connect(home: Path, actor: str | None = None, *extra: str,
                  env: dict[str, str] | None = None) -> AsyncIterator[Client]:
    """A client session on a fresh `crewlet mcp` process (closed, and the process reaped, at exit).
    The client's response cache is off: every call reaches the server, as the tests mean it to."""
    async with Client(server_params(home, actor, *extra, env=env), cache=None, read_timeout_seconds=120) as client:
        yield client


async def call(client: Client, tool: str, **arguments: Any) -> tuple[str, dict[str, Any]]:
    """A tool call that must succeed: (its text, its structured content)."""
    result = await client.call_tool(tool, arguments)
    text = "".join(getattr(c, "text", "") for c in result.content)
    assert not result.is_error, f"{tool} failed: {text}"
    return text, result.structured_content or {}


async def refused(client: Client, tool: str, **arguments: Any) -> tuple[str, dict[str, Any]]:
    """A tool call that must come back as a tool error, in one line and never a traceback."""
    result = await client.call_tool(tool, arguments)
    text = "".join(getattr(c, "text", "") for c in result.content)
    assert result.is_error, f"{tool} was not refused: {text}"
    assert "\n" not in text.strip() and "Traceback" not in text, text
    return text, result.structured_content or {}


def crewlet(home: Path, *args: str, actor: str | None = None,
            env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The CLI, as a separate process (what a person runs beside the server); `env` adds to its environment."""
    argv = [*CREWLET, "--home", str(home), *(["--as", actor] if actor else []), *args]
    return subprocess.run(argv, env={**ENV, **(env or {})}, cwd=ROOT, capture_output=True, text=True, timeout=300)


def crewlet_json(home: Path, *args: str, actor: str | None = None, env: dict[str, str] | None = None) -> Any:
    res = crewlet(home, *args, "--json", actor=actor, env=env)
    assert res.returncode == 0, (res.returncode, res.stdout, res.stderr)
    return json.loads(res.stdout)


# -- a test module's example home, copied for each test (import these fixtures by name) -----------------------

@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def example_home(tmp_path_factory: pytest.TempPathFactory) -> Home:
    """The example company, made once a module by `crewlet init --example` through its process."""
    root = tmp_path_factory.mktemp("mcp-example") / "example"
    res = crewlet(root, "init", "--example")
    assert res.returncode == 0, res.stderr
    return Home(root)


@pytest.fixture
def home(example_home: Home, tmp_path: Path) -> Home:
    """A copy of the example home a test may change."""
    root = tmp_path / "home"
    subprocess.run(["cp", "-a", str(example_home.root), str(root)], check=True)
    return Home(root)


def server_side(home: Home, text: str) -> None:
    """What an agent is told holds nothing of the server's own: no command of this machine, no path of the
    home, no rescued file."""
    assert "`crewlet" not in text and "crewlet spaces" not in text and "crewlet ask" not in text, text
    assert str(home.root) not in text and str(home.root.resolve()) not in text and "rescued" not in text, text
