"""What one write may hold: a page body and a comment are bounded ([limits] in company.toml), refused past the
bound with the bound named, for a person (the CLI) and an agent (MCP) alike, and by the import as a problem.
A search over a home holding a page at the bound still answers.

Before: `write_page` took a 20 MB body and `comment_on_page` a 1 MB comment; `crewlet search "lorem ipsum"`
then took 5.7 s and `page show` printed 21.6 MB."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import config_with
from mcp_client import call, connect, crewlet, crewlet_json, refused

from core import config as config_mod
from core.config import ConfigError
from core.errors import Invalid
from core.importer import import_directory
from core.importer.model import ImportProblems
from core.node import Node
from core.pages.service import KnowledgeBase
from core.sections.pages import DEFAULT_COMMENT_BYTES, DEFAULT_PAGE_BODY_BYTES, MAX_BODY_BYTES
from core.paths import Home

LOREM = "Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor incididunt ut labore.\n"


def lorem(size: int) -> str:
    """Exactly `size` bytes of prose (ASCII)."""
    return (LOREM * (size // len(LOREM) + 1))[:size]


def test_the_defaults_hold_every_real_page_and_refuse_far_past_them(kb, node):
    """1 MiB a body (the shared corpora's longest of 18,766 documents is 132 KiB), 64 KiB a comment."""
    assert (DEFAULT_PAGE_BODY_BYTES, DEFAULT_COMMENT_BYTES) == (1024 * 1024, 64 * 1024)
    page = kb.create_page("ENG", "At the bound", lorem(DEFAULT_PAGE_BODY_BYTES), actor="alex")
    before = node.log.last_seq()
    with pytest.raises(Invalid) as exc:
        kb.create_page("ENG", "Past the bound", lorem(DEFAULT_PAGE_BODY_BYTES + 1), actor="alex")
    assert exc.value.code == "body_too_large"
    assert str(exc.value) == ("a page body is at most 1,048,576 bytes (limits.page_body_bytes); this one is "
                              "1,048,577 bytes — split it into several pages")
    with pytest.raises(Invalid) as exc:
        kb.save_page(page.id, lorem(20 * 1024 * 1024), base_revision=1, actor="alex")
    assert "at most 1 MiB (limits.page_body_bytes); this one is 20 MiB" in str(exc.value)
    assert exc.value.details == {"limit": DEFAULT_PAGE_BODY_BYTES, "size": 20 * 1024 * 1024}

    kb.add_comment(page.id, "x" * DEFAULT_COMMENT_BYTES, actor="alex")
    with pytest.raises(Invalid) as exc:
        kb.add_comment(page.id, "x" * (1024 * 1024), actor="alex")
    assert exc.value.code == "comment_too_large" and "a comment is at most 64 KiB (limits.comment_bytes)" in str(exc.value)
    comment = kb.comments(page.id, actor="alex")[0]
    with pytest.raises(Invalid) as exc:
        kb.edit_comment(comment.id, "é" * DEFAULT_COMMENT_BYTES, actor="alex")   # 2 bytes a character
    assert exc.value.code == "comment_too_large"
    assert node.log.last_seq() == before + 1          # only the comment at the bound was written


def test_a_company_sets_its_own_bounds(tmp_path):
    home = Home(tmp_path / "h")
    from core.node import init_home

    init_home(home, config_with(limits={"page_body_bytes": 4096, "comment_bytes": 2048}))
    with Node.open(home) as node:
        kb = KnowledgeBase(node)
        kb.create_page("ENG", "Fits", lorem(4096), actor="alex")
        with pytest.raises(Invalid, match=r"at most 4 KiB \(limits.page_body_bytes\); this one is 4.9 KiB"):
            kb.create_page("ENG", "Too long", lorem(5000), actor="alex")
        with pytest.raises(Invalid, match=r"a comment is at most 2 KiB"):
            kb.add_comment("ENG/Fits", lorem(3000), actor="alex")


@pytest.mark.parametrize("limits, key, words", [
    ({"page_body_bytes": 100}, "limits.page_body_bytes", "out of range"),
    ({"page_body_bytes": MAX_BODY_BYTES + 1}, "limits.page_body_bytes", "out of range"),
    ({"comment_bytes": "64k"}, "limits.comment_bytes", "whole number"),
    ({"page_body_bytes": True}, "limits.page_body_bytes", "whole number"),
])
def test_a_bound_out_of_range_is_refused(tmp_path, limits, key, words):
    with pytest.raises(ConfigError) as exc:
        config_mod.parse(config_with(limits=limits), tmp_path / "company.toml")
    assert exc.value.key == key and words in exc.value.problem


def test_limits_that_is_not_a_table_is_refused(tmp_path):
    with pytest.raises(ConfigError) as exc:
        config_mod.parse(config_with(limits=1048576), tmp_path / "company.toml")
    assert exc.value.key == "limits" and exc.value.fix == "make [limits] a table"


def test_the_cli_refuses_a_body_past_the_bound_in_one_line(tmp_path):
    root = tmp_path / "h"
    assert crewlet(root, "init", "--example").returncode == 0
    big = tmp_path / "big.md"
    big.write_text(lorem(2 * 1024 * 1024), encoding="utf-8")
    res = crewlet(root, "page", "create", "ENG", "Huge", "--body-file", str(big))
    line = res.stderr.strip()
    assert res.returncode == 1 and "\n" not in line, (res.stdout, line)
    assert "a page body is at most 1 MiB (limits.page_body_bytes); this one is 2 MiB" in line
    res = crewlet(root, "page", "create", "ENG", "Huge", "--body-file", str(big), "--json")
    out = json.loads(res.stdout)
    assert res.returncode == 1 and out["error"] == "body_too_large" and out["limit"] == 1024 * 1024


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.anyio
async def test_an_agent_is_refused_past_the_bound_as_a_tool_error(tmp_path):
    root = tmp_path / "h"
    assert crewlet(root, "init", "--example").returncode == 0
    async with connect(root, "eng-bot") as client:
        text, _ = await refused(client, "write_page", container="ENG", title="Huge", body=lorem(20 * 1024 * 1024))
        assert "a page body is at most 1 MiB (limits.page_body_bytes); this one is 20 MiB" in text
        await call(client, "write_page", container="ENG", title="Small", body="fits\n")
        text, _ = await refused(client, "comment_on_page", ref="ENG/Small", text=lorem(1024 * 1024))
        assert "a comment is at most 64 KiB (limits.comment_bytes); this one is 1 MiB" in text
    shown = crewlet_json(root, "page", "show", "ENG/Small")
    assert shown["body"] == "fits\n" and not shown.get("comments")


def test_the_import_names_a_file_past_the_bound_as_a_problem(tmp_path, kb):
    tree = tmp_path / "docs" / "ENG"
    tree.mkdir(parents=True)
    (tree / "Fine.md").write_text("# Fine\n\nsmall\n", encoding="utf-8")
    (tree / "Huge.md").write_text(lorem(DEFAULT_PAGE_BODY_BYTES + 10), encoding="utf-8")
    with pytest.raises(ImportProblems) as exc:
        import_directory(kb, tmp_path / "docs", actor="alex")
    report = exc.value.report
    problems = [(p.code, p.files) for p in report.problems]
    assert ("too_large", ["ENG/Huge.md"]) in problems, problems
    words = next(p for p in report.problems if p.code == "too_large").message
    assert words == "is 1,048,586 bytes; a page holds at most 1,048,576 bytes (limits.page_body_bytes)"


def test_a_search_over_a_page_at_the_bound_answers_with_a_short_snippet(tmp_path):
    """A page at the bound is searched and shown like any other: the keyword search over it returns, with a
    snippet of a line, not the page (the figure is in the report, not asserted: the machine is shared)."""
    root = tmp_path / "h"
    assert crewlet(root, "init", "--example").returncode == 0
    config = config_mod.example_config() | {"providers": {"embeddings": {"provider": "none"}}}
    config_mod.write(root / "company.toml", config)
    body = tmp_path / "lorem.md"
    body.write_text(lorem(DEFAULT_PAGE_BODY_BYTES), encoding="utf-8")
    assert crewlet(root, "page", "create", "ENG", "Lorem", "--body-file", str(body)).returncode == 0
    out = crewlet_json(root, "search", "lorem ipsum")
    assert [h["title"] for h in out["hits"]][:1] == ["Lorem"]
    assert 0 < len(out["hits"][0]["snippet"]) < 1000
    res = crewlet(root, "page", "show", "ENG/Lorem")
    assert res.returncode == 0 and len(res.stdout.encode()) < 2 * DEFAULT_PAGE_BODY_BYTES


def test_the_bounds_are_read_as_the_file_changes(tmp_path):
    """A running app or MCP server sees an edited [limits] at its next write, as it sees any setting."""
    home = Home(tmp_path / "h")
    from core.node import init_home

    init_home(home, config_mod.example_config())
    with Node.open(home) as node:
        kb = KnowledgeBase(node)
        kb.create_page("ENG", "Two KiB", lorem(2048), actor="alex")
        path: Path = home.config_file
        config_mod.write(path, config_with(limits={"page_body_bytes": 1024}))
        from conftest import bump_mtime

        bump_mtime(path, 2000)
        with pytest.raises(Invalid, match="at most 1 KiB"):
            kb.create_page("ENG", "Another", lorem(2048), actor="alex")


async def test_a_person_saving_past_the_bound_in_the_app_is_told_it_and_keeps_the_text(tmp_path):
    from test_app_support import app_for, new_home, open_editor, open_kb, wait_screen, wait_until

    home = new_home(tmp_path, config=config_with(limits={"page_body_bytes": 1024}))
    with open_kb(home) as kb:
        page = kb.create_page("ENG", "Runbook", "step one\n", actor="alex")
    app = app_for(home, "alex")
    async with app.run_test(size=(80, 24)) as pilot:
        editing = await open_editor(pilot, app, page.id)
        editing.editor.text = lorem(2048)
        await pilot.press("ctrl+s")
        await wait_until(pilot, lambda: app.screen.id == "save-note", what="the note dialog")
        await pilot.press("enter")
        await wait_screen(pilot, "EditScreen")
        await wait_until(pilot, lambda: not editing.saving, what="the save to come back")
        assert editing.editor.text == lorem(2048) and editing.dirty
        told = [n.message for n in app._notifications]
        assert any("a page body is at most 1 KiB (limits.page_body_bytes); this one is 2 KiB" in m for m in told), told
    with open_kb(home) as kb:
        assert kb.resolve(page.id).revision == 1
