"""knowledge.backend, single-homed: every refusal is one line naming the key and the fix; an empty backend
derives from the integration declared; the factory picks the searcher the backend names."""
from __future__ import annotations

from typing import Any

import pytest
import tomli_w
from typer.testing import CliRunner

from core import config as config_mod
from core.config import ConfigError
from core.node import Node
from core.remote.confluence import ConfluenceSearcher
from core.remote.plane import PlaneSearcher
from core.knowledge import make_searcher
from core.search.native import NativeSearcher
from crewlet_tui.cli import app

CONFLUENCE = {"url": "https://example.atlassian.net/wiki", "token_env": "CONFLUENCE_API_TOKEN"}
PLANE = {"url": "https://plane.example.com", "workspace": "acme", "token_env": "PLANE_API_KEY"}


def parse(tmp_path, knowledge: dict[str, Any] | None = None, integrations: dict[str, Any] | None = None,
          actors: dict[str, Any] | None = None):
    data = config_mod.example_config()
    data["knowledge"] = knowledge if knowledge is not None else {}
    if integrations is not None:
        data["integrations"] = integrations
    if actors:
        data["actors"] = {**data["actors"], **actors}
    return config_mod.parse(data, tmp_path / "company.toml")


@pytest.mark.parametrize("knowledge, integrations, actors, key, fix", [
    ({"backend": "native"}, {"confluence": CONFLUENCE}, None, "integrations.confluence", "exactly one knowledge home"),
    ({"backend": "native"}, {"plane": PLANE}, None, "integrations.plane", "exactly one knowledge home"),
    ({"backend": "none"}, {"confluence": CONFLUENCE}, None, "integrations.confluence", "remove one"),
    ({}, {"confluence": CONFLUENCE, "plane": PLANE}, None, "integrations", "remove one"),
    ({"backend": "plane"}, {"confluence": CONFLUENCE, "plane": PLANE}, None, "integrations", "remove one"),
    ({"backend": "confluence"}, {"plane": PLANE}, None, "integrations.plane", "remove one"),
    ({"backend": "confluence"}, None, None, "knowledge.backend", "add [integrations.confluence]"),
    ({"backend": "plane"}, {"plane": {**PLANE, "enabled": False}}, None, "knowledge.backend", "enabled = true"),
    ({"backend": "native", "confluence_spaces": ["ENG"]}, None, None, "knowledge.confluence_spaces",
     "remove knowledge.confluence_spaces (this backend's scope is knowledge.scope)"),
    ({"backend": "confluence", "plane_projects": ["ENG"]}, {"confluence": CONFLUENCE}, None, "knowledge.plane_projects",
     "knowledge.confluence_spaces"),
    ({"backend": "confluence", "scope": ["ENG"]}, {"confluence": CONFLUENCE}, None, "knowledge.scope",
     "knowledge.confluence_spaces"),
    ({"backend": "none", "scope": ["ENG"]}, None, None, "knowledge.scope", "searches nothing"),
    ({"backend": "plane", "vectors": True}, {"plane": PLANE}, None, "knowledge.vectors", "remove knowledge.vectors"),
    ({"backend": "confluence", "vectors": True}, {"confluence": CONFLUENCE}, None, "knowledge.vectors", "remove"),
    ({"backend": "sharepoint"}, None, None, "knowledge.backend", '"confluence"'),
    ({}, {"confluence": {"url": "example.com", "token_env": "T"}}, None, "integrations.confluence.url", "https://"),
    ({}, {"confluence": {"url": "https://x"}}, None, "integrations.confluence.token_env", 'token_env = "'),
    ({}, {"confluence": {**CONFLUENCE, "token": "abc"}}, None, "integrations.confluence.token", "token_env"),
    ({}, {"confluence": {**CONFLUENCE, "token_env": "ATATT3xFfGF0abcdefghijklmnopqrstuvwxyz"}}, None,
     "integrations.confluence.token_env", "rotate it"),
    ({}, {"confluence": {**CONFLUENCE, "read_timeout_s": 0}}, None, "integrations.confluence.read_timeout_s", "seconds"),
    ({}, {"plane": {**PLANE, "workspace": "a b"}}, None, "integrations.plane.workspace", "slug"),
    ({}, {"jira": {}}, None, "integrations.jira", "[integrations.confluence]"),
    ({}, {"confluence": CONFLUENCE}, {"bot": {"kind": "agent", "credentials": {"confluence_token": "x"}}},
     "actors.bot.credentials.confluence_token", "confluence_token_env"),
    ({}, {"confluence": CONFLUENCE}, {"bot": {"kind": "agent", "credentials": {"plane_token_env": "not a name"}}},
     "actors.bot.credentials.plane_token_env", "plane_token_env = "),
    ({"backend": "confluence", "confluence_spaces": "ENG"}, {"confluence": CONFLUENCE}, None,
     "knowledge.confluence_spaces", "a list"),
])
def test_each_refusal_names_the_key_and_the_fix(tmp_path, knowledge, integrations, actors, key, fix):
    with pytest.raises(ConfigError) as exc:
        parse(tmp_path, knowledge, integrations, actors)
    assert exc.value.key == key, str(exc.value)
    assert fix in exc.value.fix, str(exc.value)
    assert "\n" not in str(exc.value)


@pytest.mark.parametrize("integrations, backend", [
    (None, "native"),
    ({"confluence": CONFLUENCE}, "confluence"),
    ({"plane": PLANE}, "plane"),
    ({"plane": {**PLANE, "enabled": False}}, "native"),      # declared but off: not a knowledge home
])
def test_an_empty_backend_derives(tmp_path, integrations, backend):
    company = parse(tmp_path, {}, integrations)
    assert company.knowledge.backend == backend
    assert company.knowledge.vectors == (backend == "native")     # nothing local to embed on a remote backend
    assert parse(tmp_path, {"backend": ""}, integrations).knowledge.backend == backend


def test_the_scope_is_the_active_backends_list(tmp_path):
    company = parse(tmp_path, {"backend": "confluence", "confluence_spaces": [" ENG ", "HOME", ""]},
                    {"confluence": {**CONFLUENCE, "username_env": "CONFLUENCE_USERNAME"}},
                    {"bot": {"kind": "agent", "credentials": {"confluence_token_env": "BOT_TOKEN"}}})
    assert company.scope() == {"ENG", "HOME"}
    assert company.integrations.confluence.cloud and company.integrations.confluence.read_timeout_s == 10.0
    assert company.actors["bot"].credentials.confluence_token_env == "BOT_TOKEN"
    assert parse(tmp_path, {"backend": "plane", "plane_projects": ["ENG"]}, {"plane": PLANE}).scope() == {"ENG"}


def test_the_factory_picks_the_searcher_the_backend_names(tmp_path, make_home):
    kinds = {None: NativeSearcher, "confluence": ConfluenceSearcher, "plane": PlaneSearcher}
    for integration, cls in kinds.items():
        data = config_mod.example_config()
        data["knowledge"] = {}
        if integration:
            data["integrations"] = {integration: CONFLUENCE if integration == "confluence" else PLANE}
        with Node.open(make_home(data)) as node:
            searcher = make_searcher(node)
            try:
                assert type(searcher) is cls and searcher.backend() == (integration or "native")
            finally:
                searcher.close()


def test_a_cli_command_refuses_a_two_homed_company_in_one_line(make_home):
    home = make_home()
    data = config_mod.example_config()
    data["integrations"] = {"confluence": CONFLUENCE}
    home.config_file.write_text(tomli_w.dumps(data), encoding="utf-8")
    r = CliRunner().invoke(app, ["--home", str(home.root), "search", "deploy"])
    assert r.exit_code == 1
    (line,) = r.stderr.strip().splitlines()
    assert "integrations.confluence" in line and "exactly one knowledge home" in line


def test_an_edit_that_moves_the_backend_re_points_the_apps_searcher(make_home):
    from crewlet_tui.session import Session

    home = make_home()
    session = Session.open(home)
    try:
        assert type(session.searcher) is NativeSearcher and session.remote is None
        data = config_mod.example_config()
        data["knowledge"] = {"backend": "confluence", "confluence_spaces": ["ENG"]}
        data["integrations"] = {"confluence": CONFLUENCE}
        home.config_file.write_text(tomli_w.dumps(data), encoding="utf-8")
        assert type(session.searcher) is ConfluenceSearcher
        assert session.remote == "confluence" and session.where() == f"Confluence at {CONFLUENCE['url']}"
    finally:
        session.close()


def test_the_app_and_mcp_follow_the_backend_by_one_rule(make_home):
    """Review finding 9: the app's session kept its searcher when knowledge.backend went from native to
    none (the native searcher answers both) and MCP's made a new one (the model loaded again); both now
    ask core.knowledge, and re-point alike when the knowledge moves to a remote site."""
    from core.mcp.session import Session as McpSession
    from crewlet_tui.session import Session as AppSession

    home = make_home()
    app_session = AppSession.open(home)
    node = Node.open(home)
    mcp_session = McpSession(node, None)
    try:
        sessions = (app_session, mcp_session)
        first = [s.searcher for s in sessions]
        assert all(type(s) is NativeSearcher for s in first)
        for backend in ("none", "native"):
            data = config_mod.example_config()
            data["knowledge"] = {"backend": backend}
            home.config_file.write_text(tomli_w.dumps(data), encoding="utf-8")
            assert [s.searcher for s in sessions] == first, backend
        data = config_mod.example_config()
        data["knowledge"] = {"backend": "confluence", "confluence_spaces": ["ENG"]}
        data["integrations"] = {"confluence": CONFLUENCE}
        home.config_file.write_text(tomli_w.dumps(data), encoding="utf-8")
        assert all(type(s.searcher) is ConfluenceSearcher for s in sessions)
        assert app_session.where() == mcp_session.where() == f"Confluence at {CONFLUENCE['url']}"
    finally:
        mcp_session.close()
        node.close()
        app_session.close()
