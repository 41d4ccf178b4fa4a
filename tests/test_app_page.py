"""The page screen: rendered Markdown, the side panel, safe rendering of hostile text, links."""
from __future__ import annotations

from textual.widgets import Markdown, OptionList, Static

from crewlet_tui.links import classify
from crewlet_tui.sanitize import clean_line, clean_text
from test_app_support import (SIZE, app_for, build_index, new_home, open_kb, screen_name, wait_rendered,
                              wait_screen, wait_until)

RUNBOOK = """\
# Deploy

How a change reaches production.

## Steps

1. Merge to `main`.
2. Run the deploy.

| step | who |
| --- | --- |
| deploy | on call |

```sh
nimbus deploy --env production
```

See [the rollback]({rollback}) and [the docs](https://example.com/docs) or [mail us](mailto:ops@example.com).
Never [this](javascript:alert(1)) nor [that](file:///etc/passwd).

<b>raw html</b> stays text.
"""


async def _open_page(pilot, app, ref):
    await wait_screen(pilot, "SpacesScreen")
    app.open_page(ref)
    await wait_screen(pilot, "PageScreen")
    await wait_until(pilot, lambda: app.screen.view is not None, what="the page read")
    body = app.screen.query_one("#page-body", Markdown)
    # the body mounts its blocks in a task of its own (under its lock): wait for that, not for a while
    await wait_until(pilot, lambda: body.query("MarkdownBlock") and not body.lock.is_locked, what="the body shown")
    await pilot.pause()


async def test_page_renders_markdown_and_its_surroundings(tmp_path):
    home = new_home(tmp_path)
    with open_kb(home) as kb:
        rollback = kb.create_page("ENG", "Rollback", "# Rollback\n\nRoll back first.\n", actor="alex")
        runbook = kb.create_page("ENG", "Deploy Runbook",
                                 RUNBOOK.format(rollback=f"#/knowledge/pages/{rollback.id}"), actor="alex")
        kb.move_page(rollback.id, runbook.id, actor="alex")
        kb.create_page("ENG", "Canary", "canaries", actor="alex", parent=runbook.id)
        kb.save_page(runbook.id, runbook.body + "\nOne more line.\n", base_revision=1, actor="sam", message="tail")
        kb.add_comment(runbook.id, "Is [bold]this[/] right?", actor="sam")
    build_index(home)  # backlinks are derived by the indexer

    app = app_for(home)
    async with app.run_test(size=SIZE) as pilot:
        await _open_page(pilot, app, "ENG/deploy runbook")
        screen = app.screen
        assert screen.page.id == runbook.id
        body = screen.query_one("#page-body", Markdown)
        kinds = {type(block).__name__ for block in body.query("*")}
        assert {"MarkdownH1", "MarkdownH2", "MarkdownOrderedList", "MarkdownTable", "MarkdownFence"} <= kinds
        # raw HTML is shown as its own text (at the body's end: the page's footer takes two rows at this width)
        await wait_rendered(pilot, "Deploy Runbook", "How a change reaches production.")
        screen.query_one("#page-main").scroll_end(animate=False)
        await wait_rendered(pilot, "<b>raw html</b> stays text.")
        meta = str(screen.query_one("#page-meta", Static).render())
        assert "ENG/deploy runbook" in meta and "revision 2" in meta and "last saved by sam" in meta
        related = screen.query_one("#page-related", OptionList)
        prompts = [str(related.get_option_at_index(i).prompt) for i in range(related.option_count)]
        assert prompts[0] == "Children (2)"
        assert any("Canary" in p for p in prompts) and any("Rollback" in p for p in prompts)
        assert "Linked from (0)" in prompts
        comments = str(screen.query_one("#page-comments", Static).render())
        assert "Is [bold]this[/] right?" in comments  # markup shown as typed, not interpreted

        # the rollback page is "Linked from" the runbook; following a child opens it
        related.focus()
        related.highlighted = next(i for i, p in enumerate(prompts) if "Rollback" in p)
        await pilot.press("enter")
        await wait_until(pilot, lambda: app.screen.page is not None and app.screen.page.id == rollback.id)
        related = app.screen.query_one("#page-related", OptionList)
        prompts = [str(related.get_option_at_index(i).prompt) for i in range(related.option_count)]
        assert "Linked from (1)" in prompts and any("ENG/Deploy Runbook" in p for p in prompts)
        meta = str(app.screen.query_one("#page-trail", Static).render())
        assert "ENG › Deploy Runbook" in meta
        await pilot.press("escape")
        await wait_until(pilot, lambda: app.screen.page is not None and app.screen.page.id == runbook.id)


async def test_links_follow_only_safe_schemes_and_app_routes(tmp_path):
    home = new_home(tmp_path)
    with open_kb(home) as kb:
        target = kb.create_page("ENG", "Target", "the target", actor="alex")
        page = kb.create_page("ENG", "Links", f"[a](#/knowledge/pages/{target.id}) [b](/pages/{target.id})",
                              actor="alex")

    app = app_for(home)
    async with app.run_test(size=SIZE) as pilot:
        await _open_page(pilot, app, page.id)
        screen = app.screen
        for bad in ("javascript:alert(1)", "file:///etc/passwd", "data:text/html,hi", "ftp://x.org", "../x"):
            screen.follow_link(bad)
        await pilot.pause(0.05)
        assert app.screen is screen and app.opened_urls == []
        screen.follow_link("https://example.com/docs")
        screen.follow_link("mailto:ops@example.com")
        assert app.opened_urls == ["https://example.com/docs", "mailto:ops@example.com"]  # headless: noted, not opened

        # clicking a rendered app route opens that page in the app
        body = screen.query_one("#page-body", Markdown)
        body.post_message(Markdown.LinkClicked(body, f"/pages/{target.id}"))
        await wait_until(pilot, lambda: screen_name(app) == "PageScreen" and app.screen is not screen
                         and app.screen.page is not None and app.screen.page.id == target.id)


def test_link_classification():
    assert classify("#/knowledge/pages/abc123").kind == "page"
    assert classify("/pages/abc123").value == "abc123"
    assert classify("https://x.org/a").kind == "external"
    assert classify("http://x.org").kind == "external"
    assert classify("mailto:a@b.c").kind == "external"
    for href in ("javascript:alert(1)", "JavaScript:alert(1)", "file:///etc/passwd", "data:text/html,x",
                 "vbscript:x", "https:", "relative/path", "/pages/../../etc", "https://x.org/\x1b[31m"):
        assert classify(href).kind == "inert", href


def test_sanitising_makes_controls_visible_and_inert():
    hostile = "a\x1b[31mred\x1b]0;title\x07b\x9bc\x00d\re\r\nf\tg"
    shown = clean_text(hostile)
    assert "\x1b" not in shown and "\x07" not in shown and "\x9b" not in shown and "\x00" not in shown
    assert "a␛[31mred␛]0;title␇b<U+009B>c␀d␍e\nf\tg" == shown
    assert clean_line("one\ntwo\tthree") == "one two three"


async def test_escape_sequences_and_markup_render_inert(tmp_path):
    home = new_home(tmp_path)
    with open_kb(home) as kb:
        page = kb.create_page("ENG", "[bold]markup[/] and [link=x]y[/link]",
                              "# Hostile\n\nthis is \x1b[31mred\x1b]0;title\x07 text\n\n"
                              "- [red]not red[/red]\n", actor="alex")
        kb.add_comment(page.id, "\x1b[2Jcleared?", actor="sam")

    app = app_for(home)
    async with app.run_test(size=SIZE) as pilot:
        await _open_page(pilot, app, page.id)
        screen = app.screen
        title = screen.query_one("#page-title", Static).render()
        assert str(title) == "[bold]markup[/] and [link=x]y[/link]"
        text = await wait_rendered(pilot, "␛[31mred␛]0;title␇ text", "[red]not red[/red]", "␛[2Jcleared?")
        assert "\x1b" not in text and "\x07" not in text
        assert "control character" in str(screen.query_one("#page-notice", Static).render())
        # the editor holds no control characters either, and says so
        await pilot.press("e")
        await wait_screen(pilot, "EditScreen")
        assert "\x1b" not in app.screen.editor.text and "␛[31mred" in app.screen.editor.text
        await pilot.press("escape")
        await wait_screen(pilot, "PageScreen")
        # the outline and search never show raw titles as markup either
        app.open_outline("ENG")
        await wait_screen(pilot, "OutlineScreen")
        await wait_until(pilot, lambda: app.screen.page_tree.first_window_shown)
        assert app.screen.page_tree.level_nodes()[0].label.plain == "≡ [bold]markup[/] and [link=x]y[/link]"
