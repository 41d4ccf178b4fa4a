"""[integrations.confluence], [integrations.plane] and an actor's own credentials
([actors.HANDLE.credentials]) — the remote backends' settings and their parsers.

This module stands on floor 1 whatever floor the remote backends stand on (tests/test_import_graph.py):
`core.config` composes it, so it imports the kit (core/settings.py) and nothing else of crewlet.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.settings import ConfigError, env_name, expect, http_url, only_known, seconds, table

TABLE = "integrations"
# a remote backend and its name in words: the one list (core.knowledge asks it for every surface)
REMOTE_LABELS = {"confluence": "Confluence", "plane": "Plane"}
REMOTE_BACKENDS = tuple(REMOTE_LABELS)
DEFAULT_CONNECT_TIMEOUT_S = 3.0
DEFAULT_READ_TIMEOUT_S = 10.0
CONFLUENCE_KEYS = ("url", "token_env", "username_env", "connect_timeout_s", "read_timeout_s")
PLANE_KEYS = ("url", "workspace", "token_env", "skills_project", "enabled", "connect_timeout_s", "read_timeout_s")
CREDENTIAL_KEYS = ("confluence_token_env", "confluence_username_env", "plane_token_env")
_PROJECT_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


@dataclass(frozen=True)
class Credentials:
    """[actors.HANDLE.credentials]: the NAMES of the environment variables holding an actor's own
    credential for a remote backend (never the secret itself)."""

    confluence_token_env: str = ""
    confluence_username_env: str = ""
    plane_token_env: str = ""


@dataclass(frozen=True)
class ConfluenceSettings:
    """[integrations.confluence]: the site, and the company's read credential (by variable name).
    With username_env it is Cloud (basic auth: username + API token); without, Data Center (bearer
    personal access token)."""

    url: str
    token_env: str
    username_env: str = ""
    connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S
    read_timeout_s: float = DEFAULT_READ_TIMEOUT_S

    @property
    def cloud(self) -> bool:
        return bool(self.username_env)


@dataclass(frozen=True)
class PlaneSettings:
    """[integrations.plane]: the instance, the workspace, the company's read key (by variable name) and
    the project holding tool skills (dropped from every search, the target of `trigger:` files)."""

    url: str
    workspace: str
    token_env: str
    skills_project: str = "SKILLS"
    enabled: bool = True
    connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S
    read_timeout_s: float = DEFAULT_READ_TIMEOUT_S


@dataclass(frozen=True)
class Integrations:
    confluence: ConfluenceSettings | None = None
    plane: PlaneSettings | None = None


def parse(file: Path, raw: Any) -> Integrations:
    """[integrations]: at most one table per remote backend (which one is the knowledge home is
    knowledge.backend's to say: config checks it first)."""
    raw = table(file, TABLE, raw, "make [integrations] a table")
    only_known(file, TABLE, raw, REMOTE_BACKENDS, problem="unknown integration", what="declare one of",
               shown=[f"[integrations.{b}]" for b in REMOTE_BACKENDS])
    confluence = plane = None
    if "confluence" in raw:
        t = "integrations.confluence"
        c = expect(file, t, raw["confluence"], dict, f"make [{t}] a table")
        only_known(file, t, c, CONFLUENCE_KEYS)
        for need, example in (("url", 'url = "https://example.atlassian.net/wiki"'),
                              ("token_env", 'token_env = "CONFLUENCE_API_TOKEN"')):
            if need not in c:
                raise ConfigError(file, f"{t}.{need}", "is missing", f"add {example}")
        confluence = ConfluenceSettings(
            url=http_url(file, f"{t}.url", c["url"], "https://example.atlassian.net/wiki"),
            token_env=env_name(file, f"{t}.token_env", c["token_env"], "CONFLUENCE_API_TOKEN"),
            username_env=env_name(file, f"{t}.username_env", c["username_env"], "CONFLUENCE_USERNAME")
            if c.get("username_env") else "",
            connect_timeout_s=seconds(file, f"{t}.connect_timeout_s", c.get("connect_timeout_s"), DEFAULT_CONNECT_TIMEOUT_S),
            read_timeout_s=seconds(file, f"{t}.read_timeout_s", c.get("read_timeout_s"), DEFAULT_READ_TIMEOUT_S))
    if "plane" in raw:
        t = "integrations.plane"
        p = expect(file, t, raw["plane"], dict, f"make [{t}] a table")
        only_known(file, t, p, PLANE_KEYS)
        for need, example in (("url", 'url = "https://plane.example.com"'), ("workspace", 'workspace = "acme"'),
                              ("token_env", 'token_env = "PLANE_API_KEY"')):
            if need not in p:
                raise ConfigError(file, f"{t}.{need}", "is missing", f"add {example}")
        workspace = expect(file, f"{t}.workspace", p["workspace"], str, 'workspace = "acme"').strip()
        if not re.match(r"^[A-Za-z0-9][A-Za-z0-9_-]*$", workspace):
            raise ConfigError(file, f"{t}.workspace", f"{workspace!r} is not a workspace slug",
                              "use the slug from the workspace's URL (https://plane.example.com/SLUG/projects)")
        skills = expect(file, f"{t}.skills_project", p.get("skills_project", "SKILLS"), str, 'skills_project = "SKILLS"')
        if not _PROJECT_RE.match(skills):
            raise ConfigError(file, f"{t}.skills_project", f"{skills!r} is not a project identifier",
                              'use the project\'s identifier, e.g. skills_project = "SKILLS"')
        plane = PlaneSettings(
            url=http_url(file, f"{t}.url", p["url"], "https://plane.example.com"), workspace=workspace,
            token_env=env_name(file, f"{t}.token_env", p["token_env"], "PLANE_API_KEY"), skills_project=skills,
            enabled=expect(file, f"{t}.enabled", p.get("enabled", True), bool, "set it to true or false"),
            connect_timeout_s=seconds(file, f"{t}.connect_timeout_s", p.get("connect_timeout_s"), DEFAULT_CONNECT_TIMEOUT_S),
            read_timeout_s=seconds(file, f"{t}.read_timeout_s", p.get("read_timeout_s"), DEFAULT_READ_TIMEOUT_S))
    return Integrations(confluence=confluence, plane=plane)


def parse_credentials(file: Path, actor_key: str, raw: Any) -> Credentials:
    """[actors.HANDLE.credentials] (absent: none of its own)."""
    t = f"{actor_key}.credentials"
    c = table(file, t, raw)
    only_known(file, t, c, CREDENTIAL_KEYS)
    examples = {"confluence_token_env": "ENG_BOT_CONFLUENCE_TOKEN", "confluence_username_env": "ENG_BOT_CONFLUENCE_USER",
                "plane_token_env": "ENG_BOT_PLANE_KEY"}
    return Credentials(**{k: env_name(file, f"{t}.{k}", c[k], examples[k]) for k in CREDENTIAL_KEYS if c.get(k)})
