"""`crewlet mcp`: the knowledge app's tools and pages as resources, through a real MCP client
session from the SDK that spawns the server over stdio (tests/mcp_client.py). Nothing here calls the
server's functions behind the protocol."""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest
from mcp_client import CREWLET, ENV, ROOT, call, connect, crewlet, crewlet_json, refused

from core import config as config_mod
from core.node import Node
from core.pages.links import extract_links
from core.mcp.tools import TOOLS
from core.pages.service import KnowledgeBase
from core.paths import Home

pytestmark = pytest.mark.anyio

# the knowledge app's tools, as the registry says them (everyone's who holds the app)
KNOWLEDGE_APP = {t.name for t in TOOLS if t.audience == "anyone"}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def example_home(tmp_path_factory) -> Home:
    """The bundled example, indexed and embedded once for the module (tests copy it before writing)."""
    root = tmp_path_factory.mktemp("mcp") / "example"
    assert crewlet(root, "init", "--example").returncode == 0
    res = crewlet(root, "worker", "--once")
    assert res.returncode == 0, res.stderr
    return Home(root)


@pytest.fixture
def home(example_home, tmp_path) -> Home:
    root = tmp_path / "home"
    subprocess.run(["cp", "-a", str(example_home.root), str(root)], check=True)
    return Home(root)


def page_id(home: Home, ref: str) -> str:
    return crewlet_json(home.root, "page", "show", ref)["id"]


# -- what the server offers --------------------------------------------------------------------------

async def test_lists_the_knowledge_app_s_tools_each_described_for_a_model(home):
    async with connect(home.root, "eng-bot") as client:
        tools = (await client.list_tools()).tools
    # an agent is offered its own memory's tools too (tests/test_mcp_diary.py); here, the knowledge app's
    tools = [t for t in tools if t.name in KNOWLEDGE_APP]
    assert {t.name for t in tools} == KNOWLEDGE_APP
    for t in tools:
        assert len(t.description) > 150, t.name  # what it does, what it returns, when to use it
        assert "Returns" in t.description and "Use it" in t.description, t.name
        for name, prop in t.input_schema["properties"].items():
            assert len(prop.get("description", "")) > 20, (t.name, name)
        assert t.annotations.read_only_hint == next(r.read_only for r in TOOLS if r.name == t.name)


def test_every_tool_declares_a_one_line_hint_beside_its_description():
    names = [t.name for t in TOOLS]
    assert len(names) == len(set(names))
    for t in TOOLS:
        assert t.hint.strip() and "\n" not in t.hint and len(t.hint) <= 200, t.name
        assert not t.hint.endswith("."), t.name        # the instructions end each line themselves


def test_the_readme_documents_every_tool_of_the_registry():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    documented = set(re.findall(r"^\| `(\w+)\(", readme, flags=re.M))
    assert documented == {t.name for t in TOOLS}, documented ^ {t.name for t in TOOLS}


def _tool_lines(instructions: str) -> dict[str, str]:
    return {line[2:].split(":", 1)[0]: line for line in instructions.splitlines() if line.startswith("- ")}


async def test_the_instructions_name_exactly_the_offered_tools_in_their_own_hints(home):
    """The server's instructions are composed from the registry: every tool the actor is offered, in its own
    hint, and none it is not — a tool added to TOOLS is told of without a word written in server.py."""
    for actor, is_agent in (("eng-bot", True), ("alex", False)):
        async with connect(home.root, actor) as client:
            instructions = client.instructions or ""
            listed = {t.name for t in (await client.list_tools()).tools}
        offered = [t for t in TOOLS if t.offered_to(is_agent)]
        assert {t.name for t in offered} == listed
        lines = _tool_lines(instructions)
        assert set(lines) == listed, (actor, instructions)
        for t in offered:
            assert lines[t.name] == f"- {t.name}: {t.hint}.", actor
        assert f"You act as {actor}" in instructions and "Spaces: " in instructions and "ENG (" in instructions
        rule = "As an agent you may not add pages to HOME"
        assert (rule in instructions) == is_agent


async def test_the_body_parameter_links_by_id_with_an_example_the_link_extractor_reads(home):
    target = page_id(home, "ENG/Deploy Runbook")
    async with connect(home.root, "eng-bot") as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        for name in ("write_page", "save_page"):
            words = tools[name].input_schema["properties"]["body"]["description"]
            assert "BY ID" in words
            example = re.search(r"\[its title\]\(#/knowledge/pages/<page id>\)", words)
            assert example, words
            written = example.group(0).replace("<page id>", target)
            assert extract_links(written) == {target}
        # and a page written that way is linked from: get_page on the target names it
        body = f"Before a risky change read {example.group(0).replace('<page id>', target)}."
        _, new = await call(client, "write_page", container="ENG", title="Change policy", body=body)
        _, page = await call(client, "get_page", ref=target)
    assert [b["id"] for b in page["backlinks"]] == [new["id"]]


async def test_pages_are_resources_listed_space_by_space(home):
    async with connect(home.root, "alex") as client:
        listed = (await client.list_resources()).resources
        templates = (await client.list_resource_templates()).resource_templates
        names = [r.name for r in listed]
        assert names == sorted(names, key=lambda n: (n.split("/")[0], n.split("/", 1)[1].lower()))
        assert {n.split("/")[0] for n in names} == {"ENG", "HOME", "LEAD", "PROD"} and len(names) == 10
        assert [t.uri_template for t in templates] == ["crewlet://pages/{id}"]
        runbook = next(r for r in listed if r.name == "ENG/Deploy Runbook")
        assert str(runbook.uri) == f"crewlet://pages/{page_id(home, 'ENG/Deploy Runbook')}"
        content = (await client.read_resource(str(runbook.uri))).contents[0]
        assert content.mime_type == "text/markdown" and "# Deploy Runbook" in content.text
        assert "Watch the error rate" in content.text
        with pytest.raises(Exception, match="no page"):
            await client.read_resource("crewlet://pages/nosuchpage")


async def test_resources_are_listed_in_windows_with_a_cursor(home):
    with Node.open(home) as node:
        kb = KnowledgeBase(node)
        for i in range(520):
            kb.create_page("PROD", f"Note {i:03d}", "x")
    async with connect(home.root, "alex") as client:
        first = await client.list_resources()
        assert len(first.resources) == 500 and first.next_cursor
        second = await client.list_resources(cursor=first.next_cursor)
    assert len(second.resources) == 30 and second.next_cursor is None
    assert not {r.uri for r in first.resources} & {r.uri for r in second.resources}


# -- every tool's success path ------------------------------------------------------------------------

async def test_every_tool_answers_an_agent(home):
    async with connect(home.root, "eng-bot") as client:
        text, found = await call(client, "search_knowledge", query="how do we roll back a deploy", limit=3)
        assert found["hits"] and found["served_mode"] == "hybrid"
        assert {"id", "address", "title", "snippet", "score"} <= set(found["hits"][0])
        assert text.startswith("3 pages matched")

        text, page = await call(client, "get_page", ref="ENG/deploy  RUNBOOK")
        assert (page["title"], page["address"], page["revision"]) == ("Deploy Runbook", "ENG/deploy runbook", 1)
        assert page["labels"] == ["deploy", "ops", "runbook"] and "Watch the error rate" in page["body"]
        assert [c["title"] for c in page["children"]] == ["Rollback"]
        assert "Rollback" in text and "base_revision 1" in text

        _, spaces = await call(client, "list_pages")
        assert {s["key"] for s in spaces["spaces"]} >= {"ENG", "HOME", "LEAD", "PROD", "SKILLS"}
        _, top = await call(client, "list_pages", container="ENG")
        assert top["total"] == 3 and top["next_cursor"] is None
        _, under = await call(client, "list_pages", container="ENG", parent=page["id"])
        assert [p["title"] for p in under["pages"]] == ["Rollback"]

        _, folder = await call(client, "write_page", container="ENG", title="Incidents")
        assert folder["is_folder"] and folder["revision"] == 1
        _, review = await call(client, "write_page", container="ENG", title="Incident review",
                               body="Blameless, within a week.\n", parent=folder["id"])
        assert review["parent_id"] == folder["id"]
        _, saved = await call(client, "save_page", ref=review["id"], body="Blameless, within five days.\n",
                              base_revision=1, message="tighter")
        assert saved["revision"] == 2
        text, same = await call(client, "save_page", ref=review["id"], body="Blameless, within five days.\n",
                                base_revision=2)
        assert same["revision"] == 2 and text.startswith("Nothing to save")
        _, comment = await call(client, "comment_on_page", ref="ENG/Incident review", text="Add the template?")
        assert comment["page_id"] == review["id"] and comment["author"] == "eng-bot"
    shown = crewlet_json(home.root, "page", "show", review["id"])
    assert shown["body"] == "Blameless, within five days.\n" and shown["saved_by"] == "eng-bot"
    assert [c["body"] for c in shown["comments"]] == ["Add the template?"]
    history = crewlet_json(home.root, "page", "history", review["id"])
    assert history[0]["message"] == "tighter"


async def test_search_outcomes_are_different_sentences(home, tmp_path):
    async with connect(home.root, "eng-bot") as client:
        text, out = await call(client, "search_knowledge", query="zebra quasar xylophone", mode="keyword")
        assert out["hits"] == [] and text.startswith("Nothing matched")
        # a page nobody embedded yet: searched by meaning over 10 of 11 pages, and said so
        await call(client, "write_page", container="ENG", title="Pager rota", body="Who carries the pager this week.")
        text, out = await call(client, "search_knowledge", query="who is on call")
        assert "searched 10 of 11 pages by meaning" in text.lower()
    # an index that cannot be read: the search did not run, and it says so rather than "nothing matched"
    index = home.root / "index"
    for state in index.rglob("*.seg"):
        state.write_bytes(b"garbage")
    for toc in index.rglob("*.toc"):
        toc.write_bytes(b"garbage")
    async with connect(home.root, "eng-bot") as client:
        text, out = await call(client, "search_knowledge", query="deploy", mode="keyword")
    assert out["hits"] == [] and out["served_mode"] is None
    assert text.startswith("the knowledge base could not be searched just now"), text


async def test_a_company_on_confluence_is_searched_live_through_the_same_tool(tmp_path):
    from tests.remote_servers import ConfluenceServer

    with ConfluenceServer() as cf:
        cf.user("company-token", "svc")
        cf.space("ENG", "Engineering")
        cf.page("ENG", "Deploy Runbook", "<p>To <strong>roll back</strong> a deploy, run the rollback job.</p>")
        root = tmp_path / "home"
        assert crewlet(root, "init", "--operator", "alex").returncode == 0
        data = config_mod.example_config()
        data["knowledge"] = {"backend": "confluence", "confluence_spaces": ["ENG"]}
        data["integrations"] = {"confluence": {"url": cf.url, "token_env": "CF_TOKEN"}}
        config_mod.write(root / "company.toml", data)
        async with connect(root, "eng-bot", env={"CF_TOKEN": "company-token"}) as client:
            text, out = await call(client, "search_knowledge", query="roll back", mode="keyword")
            instructions = client.instructions or ""
    assert [h["title"] for h in out["hits"]] == ["Deploy Runbook"]
    assert out["hits"][0]["url"].startswith(cf.url) and out["hits"][0]["link"].endswith(f"({out['hits'][0]['url']})")
    assert "get_page" in text and "each at its url" in text
    # a remote company's instructions: the tools that serve it in their hints, the others named as refused there
    lines = _tool_lines(instructions)
    served = {t.name for t in TOOLS if t.offered_to(True) and t.on_remote}
    assert set(lines) == served and {"search_knowledge", "get_page"} <= served
    refused_there = [t.name for t in TOOLS if t.offered_to(True) and not t.on_remote]
    assert refused_there and all(name in instructions.split("refused here")[0].splitlines()[-1] for name in refused_there)
    assert "lives in Confluence" in instructions


async def test_a_container_key_in_another_case_names_the_declared_one_and_address_means_what_the_cli_says(home):
    """`eng` is ENG for every tool, as for the CLI (tests/test_cli_trips.py); and a page's `address` is the same
    CONTAINER/address in get_page, list_pages and `crewlet page show --json`."""
    async with connect(home.root, "eng-bot") as client:
        _, page = await call(client, "get_page", ref="eng/deploy runbook")
        _, top = await call(client, "list_pages", container="eng")
        _, found = await call(client, "search_knowledge", query="roll back", mode="keyword", container="eng")
        _, written = await call(client, "write_page", container="eng", title="Pager rota", body="Who is on call.")
    assert (page["container"], page["title"]) == ("ENG", "Deploy Runbook")
    assert top["container"] == "ENG" and "Deploy Runbook" in {p["title"] for p in top["pages"]}
    assert found["hits"] and all(h["address"].startswith("ENG/") for h in found["hits"])
    assert written["container"] == "ENG"
    shown = crewlet_json(home.root, "page", "show", page["id"])
    assert page["address"] == shown["address"] == "ENG/deploy runbook"
    assert next(p for p in top["pages"] if p["id"] == page["id"])["address"] == shown["address"]


# -- refusals: the store's one line, as a tool error, and the server serves on -------------------------

async def test_refusals_are_tool_errors_in_the_stores_words(home):
    async with connect(home.root, "eng-bot") as client:
        text, data = await refused(client, "write_page", container="HOME", title="Company news", body="x")
        assert text.startswith("an agent may not add a page to the root space HOME") and data["error"] == "reserved"
        text, data = await refused(client, "write_page", container="SKILLS", title="Deploy skill", body="x")
        assert text.startswith("an agent may not write in the skills container SKILLS") and data["error"] == "reserved"
        text, data = await refused(client, "write_page", container="NOPE", title="Lost", body="x")
        # the fact and what the agent can do; never the server's file nor the edit only a person there can make
        assert text.startswith("container 'NOPE' is not a declared space — pick one of: ENG, HOME") and data["error"] == "not_declared"
        assert "company.toml" not in text and "declare it in" not in text and str(home.root) not in text
        text, data = await refused(client, "get_page", ref="ENG/No such page")
        assert text.startswith("no page 'ENG/No such page'") and data["error"] == "not_found"
        assert "list_pages with container 'ENG'" in text and "crewlet" not in text     # this surface's own advice
        text, _ = await refused(client, "get_page", ref="nothing")
        assert "search_knowledge" in text and "CONTAINER" not in text and "crewlet" not in text
        text, _ = await refused(client, "write_page", container="ENG", title="Deploy runbook", body="x")
        assert text.startswith("ENG/Deploy Runbook already exists") and "save_page" in text
        text, _ = await refused(client, "save_page", ref="ENG/Rollback", body="x", base_revision=1, extra=1)
        assert "'extra'" in text
        text, _ = await refused(client, "search_knowledge", query="x", mode="fuzzy")
        assert "'mode'" in text
        text, _ = await refused(client, "no_such_tool")
        assert "no tool named 'no_such_tool'" in text
        # …and the same server still answers
        _, page = await call(client, "get_page", ref="ENG/Rollback")
        assert page["title"] == "Rollback"


async def test_a_stale_save_is_refused_and_the_model_is_told_its_text_was_not_saved(home):
    """The model holds its own text (it sent it): no file is kept for it under the server's home, whose path it
    could not open anyway; it is told to read the page again and save against the new revision."""
    async with connect(home.root, "eng-bot") as client:
        _, page = await call(client, "get_page", ref="ENG/Rollback")
        body_file = home.root / "sams.md"
        body_file.write_text("Sam's rewrite.\n")
        assert crewlet(home.root, "page", "save", "ENG/Rollback", "--body-file", str(body_file), "--base-rev", "1",
                       actor="sam").returncode == 0
        text, data = await refused(client, "save_page", ref=page["id"], body="The agent's careful text.\n",
                                   base_revision=page["revision"])
    assert "is at revision 2, not 1" in text and "your text was not saved" in text
    assert "call save_page with base_revision 2" in text and "rescued" not in text and str(home.root) not in text
    assert data["error"] == "stale_revision" and data["current_revision"] == 2 and data.get("rescued_to") is None
    assert not home.rescue_dir.exists() or not any(home.rescue_dir.iterdir())
    assert crewlet_json(home.root, "page", "show", "ENG/Rollback")["body"] == "Sam's rewrite.\n"


async def test_a_person_needs_admin_for_the_skills_container(home):
    async with connect(home.root, "sam") as client:
        text, _ = await refused(client, "write_page", container="SKILLS", title="Deploy skill", body="x")
        assert text.startswith("sam may not create a page in the skills container SKILLS")
        # the org root is not refused to a person
        await call(client, "write_page", container="HOME", title="Holidays", body="Office closed on Friday.")
    async with connect(home.root, "alex") as client:
        await call(client, "write_page", container="SKILLS", title="Deploy skill", body="trigger: deploy")


def test_an_unknown_actor_refuses_to_start_in_one_line(home):
    res = subprocess.run([*CREWLET, "--home", str(home.root), "mcp", "--as", "nobody"], env=ENV, cwd=ROOT,
                         input="", capture_output=True, text=True, timeout=120)
    assert res.returncode == 1 and res.stdout == ""
    assert len(res.stderr.strip().splitlines()) == 1 and "no actor 'nobody'" in res.stderr


def test_a_person_without_the_knowledge_app_refuses_to_start_in_one_line(home):
    data = config_mod.load(home.config_file).raw
    data["actors"]["kim"] = {"kind": "person", "knowledge": False}
    config_mod.write(home.config_file, data)
    res = subprocess.run([*CREWLET, "--home", str(home.root), "--as", "kim", "mcp"], env=ENV, cwd=ROOT,
                         input="", capture_output=True, text=True, timeout=120)
    assert res.returncode == 1 and res.stdout == ""
    assert len(res.stderr.strip().splitlines()) == 1 and "kim does not hold the knowledge app" in res.stderr


def test_stdout_carries_only_the_protocol(home):
    """A raw session: every line the server writes to stdout is a JSON-RPC message, a refusal and a
    logged warning included (--verbose logs every refusal to stderr)."""
    messages = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
         "params": {"name": "write_page", "arguments": {"container": "HOME", "title": "x"}}},
        {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
         "params": {"name": "search_knowledge", "arguments": {"query": "deploy"}}},
    ]
    proc = subprocess.Popen([*CREWLET, "--home", str(home.root), "--as", "eng-bot", "mcp", "--verbose"], env=ENV,
                            cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    answers = []
    for m in messages:
        proc.stdin.write(json.dumps(m) + "\n")
        proc.stdin.flush()
        if "id" in m:
            answers.append(json.loads(proc.stdout.readline()))
    proc.stdin.close()
    rest, err = proc.stdout.read(), proc.stderr.read()
    assert proc.wait(timeout=60) == 0
    assert rest == ""
    assert [a["id"] for a in answers] == [1, 2, 3]
    assert answers[1]["result"]["isError"] is True and not answers[2]["result"]["isError"]
    assert "write_page refused: an agent may not add a page" in err


# -- what agents read ----------------------------------------------------------------------------------

async def test_an_agents_reads_are_recorded_and_a_persons_are_not(home):
    runbook = page_id(home, "ENG/Deploy Runbook")
    async with connect(home.root, "alex") as client:
        await call(client, "search_knowledge", query="deploy runbook")
        await call(client, "get_page", ref=runbook)
    assert crewlet_json(home.root, "page", "reads", runbook)["reads"] == []
    long_query = "déploiement " * 30  # 390 bytes of words that match nothing by keyword
    async with connect(home.root, "eng-bot") as client:
        _, found = await call(client, "search_knowledge", query="deploy runbook", limit=4)
        await call(client, "get_page", ref=runbook)
        await call(client, "get_page", ref="ENG/Rollback")
        _, none = await call(client, "search_knowledge", query="zebra quasar", mode="keyword")
        assert none["hits"] == []
        await refused(client, "get_page", ref="ENG/nothing")
        await call(client, "list_pages", container="ENG")       # a listing is not a read
        await call(client, "search_knowledge", query=long_query + " deploy", mode="keyword")
    reads = crewlet_json(home.root, "page", "reads", runbook)["reads"]
    assert [r["via"] for r in reads] == ["search", "get_page", "search"]  # newest first
    assert all(r["actor"] == "eng-bot" for r in reads)
    clipped, got, searched = reads
    assert searched["query"] == "deploy runbook" and searched["of"] == len(found["hits"])
    assert searched["rank"] == [h["id"] for h in found["hits"]].index(runbook) + 1
    assert got["rank"] == 1 and got["of"] == 1 and got["query"] is None
    assert len(clipped["query"].encode()) <= 200 and clipped["query"].endswith("…")
    assert long_query.startswith(clipped["query"][:-1])
    # one event per act: the search that showed four pages is one read listing four
    with Node.open(home) as node:
        rows = node.conn.execute("SELECT via, pages FROM knowledge_reads ORDER BY at").fetchall()
    assert [r["via"] for r in rows] == ["search", "get_page", "get_page", "search"]
    assert len(json.loads(rows[0]["pages"])) == len(found["hits"])
    table = crewlet(home.root, "page", "reads", runbook)
    assert table.returncode == 0 and "eng-bot" in table.stdout and "deploy runbook" in table.stdout


# -- freshness and concurrency --------------------------------------------------------------------------

async def test_a_server_sees_what_others_wrote_before_each_call(home):
    async with connect(home.root, "eng-bot") as client:
        await refused(client, "get_page", ref="ENG/Written elsewhere")
        body = home.root / "b.md"
        body.write_text("Written by the CLI while the server ran: quokka.\n")
        assert crewlet(home.root, "page", "create", "ENG", "Written elsewhere", "--body-file", str(body)).returncode == 0
        _, page = await call(client, "get_page", ref="ENG/Written elsewhere")
        assert "quokka" in page["body"]
        _, found = await call(client, "search_knowledge", query="quokka", mode="keyword")
        assert [h["id"] for h in found["hits"]] == [page["id"]]


async def test_two_servers_and_the_cli_write_to_one_home_at_once(home):
    import anyio

    n = 12
    body = home.root / "cli.md"
    body.write_text("from the CLI\n")

    def cli_writes() -> list[int]:
        return [crewlet(home.root, "page", "create", "PROD", f"CLI note {i}", "--body-file", str(body)).returncode
                for i in range(n)]

    results: dict[str, list[str]] = {}

    async def server_writes(actor: str, container: str) -> None:
        async with connect(home.root, actor) as client:
            ids = []
            for i in range(n):
                _, page = await call(client, "write_page", container=container, title=f"{actor} note {i}",
                                     body=f"note {i} by {actor}")
                _, again = await call(client, "get_page", ref=page["id"])
                ids.append(again["id"])
            results[actor] = ids

    async with anyio.create_task_group() as tg:
        tg.start_soon(server_writes, "eng-bot", "ENG")
        tg.start_soon(server_writes, "sam", "PROD")
        codes = await anyio.to_thread.run_sync(cli_writes)
    assert codes == [0] * n
    assert len(results["eng-bot"]) == len(results["sam"]) == n
    assert crewlet_json(home.root, "pages", "PROD")["total"] == 2 + 2 * n
    assert crewlet_json(home.root, "pages", "ENG")["total"] == 3 + n
    assert crewlet(home.root, "log", "check").returncode == 0


def _server_pid() -> int:
    """The `crewlet mcp` process this test's client spawned (a child of this process)."""
    children = []
    for task in Path(f"/proc/{os.getpid()}/task").iterdir():
        children += [int(c) for c in (task / "children").read_text().split()]
    (pid,) = [p for p in children if b"mcp" in Path(f"/proc/{p}/cmdline").read_bytes()]
    return pid


async def _until(condition, what: str, bound_s: float = 60.0) -> None:
    """Poll a condition (never a fixed wait), failing past the bound."""
    import anyio

    deadline = time.monotonic() + bound_s
    while not condition():
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        await anyio.sleep(0.002)


def _connection_closed(exc: BaseException) -> bool:
    import anyio
    from mcp.shared.exceptions import MCPError

    return (isinstance(exc, MCPError) and "closed" in str(exc).lower()) or isinstance(
        exc, (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream, BrokenPipeError))


def _leaves(group: BaseExceptionGroup) -> list[BaseException]:
    out: list[BaseException] = []
    for exc in group.exceptions:
        out += _leaves(exc) if isinstance(exc, BaseExceptionGroup) else [exc]
    return out


async def test_a_server_killed_mid_write_loses_nothing_it_acknowledged(home):
    import anyio

    acknowledged = []
    log_file = home.root / "log" / "pages.log"
    killed = False
    try:
        async with connect(home.root, "eng-bot") as client:
            server = _server_pid()
            for i in range(20):
                _, page = await call(client, "write_page", container="ENG", title=f"Kept {i}", body="x" * 4096)
                acknowledged.append(page["id"])
            size = log_file.stat().st_size
            async with anyio.create_task_group() as tg:
                # one more write in flight: killed once its record reached the log, before it answers
                tg.start_soon(client.call_tool, "write_page", {"container": "ENG", "title": "In flight",
                                                               "body": "y" * 100_000})
                await _until(lambda: log_file.stat().st_size > size, "the in-flight write's record")
                os.kill(server, signal.SIGKILL)
                killed = True
    except* Exception as group:
        # the session ends with the process it talked to ("Connection closed") — and only that: a failed
        # write or a failed wait before the kill is the test failing, never swallowed with the closed connection
        if not killed or not all(_connection_closed(e) for e in _leaves(group)):
            raise
    assert killed and len(acknowledged) == 20, acknowledged
    assert crewlet(home.root, "log", "check").returncode == 0
    for pid in acknowledged:
        assert crewlet_json(home.root, "page", "show", pid)["body"] == "x" * 4096
    # the write that was in flight is all there or not there at all
    in_flight = crewlet(home.root, "page", "show", "ENG/In flight", "--json")
    if in_flight.returncode == 0:
        assert json.loads(in_flight.stdout)["body"] == "y" * 100_000
    # the home is whole for the next writer
    async with connect(home.root, "eng-bot") as client:
        await call(client, "write_page", container="ENG", title="After the kill", body="fine")
