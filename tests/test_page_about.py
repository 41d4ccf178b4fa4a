"""What a page is about (issue 35, "Pages linked to items"): `EntryBank.link_page` to a module, a space or another
page, each refusal in one line, the links read back, the pages linked to a work area's modules (load_context
serves them first), and the links on a second node through a shared log directory."""
from __future__ import annotations

import pytest
from conftest import new_home
from test_repos_support import GitRepo

from core.bank.entries import EntryBank
from core.bank.links import linked_pages
from core.errors import Invalid, NotFound, Refused
from core.node import Node
from core.pages.service import KnowledgeBase
from core.repos import Repositories, Repository, parse_scope


@pytest.fixture
def repo(tmp_path):
    g = GitRepo(tmp_path / "api")
    g.write("apps/server/pyproject.toml", "[project]\nname='server'\n")
    g.write("apps/server/prisma/schema.prisma", "model User {}\n")
    g.write("apps/web/package.json", "{}\n")
    g.commit("first")
    return g


def _bank(node, repo) -> EntryBank:
    return EntryBank(node, repositories=Repositories({"api": Repository("api", repo.path)}))


def test_a_page_linked_to_a_module_a_space_and_a_page_lists_them_and_unlinks(node, kb, repo):
    server = kb.create_page("ENG", "Server", "the API server", actor="alex")
    other = kb.create_page("ENG", "Deploys", "how we deploy", actor="alex")
    bank = _bank(node, repo)
    bank.link_page(server.id, module="apps/server", actor="alex")
    bank.link_page(server.id, space="eng", actor="alex")
    links = bank.link_page(server.id, page_ref="ENG/Deploys", actor="eng-bot")
    assert [(ln.kind, ln.item, ln.label) for ln in links] == [
        ("module", "api:apps/server", "api:apps/server"), ("page", other.id, "ENG/Deploys"), ("space", "ENG", "ENG")]
    # linking again is nothing new; unlinking removes it, and unlinking again is nothing new
    assert len(bank.link_page(server.id, module="api:apps/server", actor="alex")) == 3
    assert [ln.kind for ln in bank.link_page(server.id, space="ENG", remove=True, actor="alex")] == ["module", "page"]
    assert [ln.kind for ln in bank.link_page(server.id, space="ENG", remove=True, actor="alex")] == ["module", "page"]


def test_each_wrong_link_is_refused_in_one_line(node, kb, repo):
    server = kb.create_page("ENG", "Server", "the API server", actor="alex")
    bank = _bank(node, repo)
    for kwargs, cls, words in [
        ({}, Invalid, "link a page to one item"),
        ({"module": "apps/server", "space": "ENG"}, Invalid, "link a page to one item"),
        ({"module": "../etc"}, Invalid, "climbs out of the repository"),
        ({"module": "web:apps"}, Invalid, "names no configured repository 'web'"),
        ({"space": "NOPE"}, NotFound, "no space 'NOPE'"),
        ({"page_ref": "ENG/Nothing"}, NotFound, "no page 'ENG/Nothing'"),
        ({"page_ref": server.id}, Refused, "cannot be about itself"),
    ]:
        with pytest.raises(cls) as exc:
            bank.link_page(server.id, actor="alex", **kwargs)
        assert words in str(exc.value) and "\n" not in str(exc.value), kwargs
    assert bank.links(server.id) == []


def test_the_pages_linked_to_a_work_area_are_those_of_a_module_holding_it_or_within_it(node, kb, repo):
    server = kb.create_page("ENG", "Server", "the API server", actor="alex")
    schema = kb.create_page("ENG", "Schema", "the database schema", actor="alex")
    web = kb.create_page("ENG", "Web", "the web app", actor="alex")
    gone = kb.create_page("ENG", "Old Server", "how it was", actor="alex")
    bank = _bank(node, repo)
    bank.link_page(server.id, module="apps/server", actor="alex")
    bank.link_page(schema.id, module="apps/server/prisma", actor="alex")
    bank.link_page(web.id, module="apps/web", actor="alex")
    bank.link_page(gone.id, module="apps/server", actor="alex")
    kb.trash_page(gone.id, actor="alex")

    def pages(area: str) -> list[str]:
        return [p.page for p in linked_pages(node.conn, [parse_scope(area, ["api"])])]

    # work in the schema's folder: its own page first (the deeper module), then the server's; never the web's
    assert pages("apps/server/prisma/migrations") == ["ENG/Schema", "ENG/Server"]
    assert pages("apps/server") == ["ENG/Schema", "ENG/Server"]
    assert pages("apps/web") == ["ENG/Web"]
    assert pages("apps/serverless") == []       # whole folder names: apps/server does not hold apps/serverless
    bank.link_page(web.id, module="apps/web", remove=True, actor="alex")
    assert pages("apps/web") == []


def test_links_reach_a_second_node_through_a_shared_log(tmp_path):
    from test_sync import cli, ok

    a = new_home(tmp_path / "A")
    ok(cli(a.root, "sync", "join", str(tmp_path / "shared")))
    ok(cli(tmp_path / "B", "sync", "join", str(tmp_path / "shared"), "--operator", "sam"))
    with Node.open(a) as node:
        kb = KnowledgeBase(node)
        p = kb.create_page("ENG", "Server", "the API server", actor="alex")
        EntryBank(node).link_page(p.id, module="apps/server", actor="alex")
    from core.paths import Home
    with Node.open(Home(tmp_path / "B")) as node:
        assert [(ln.kind, ln.item) for ln in EntryBank(node).links("ENG/Server")] == [("module", "apps/server")]
