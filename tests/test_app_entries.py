"""Entries in the app (issue 35, "People"): the page screen lists a page's entries under its body (kind, tier, age;
those waiting for a person; a count of those out of use) and its entry policy; enter opens an entry with its
citations and their checks; a person accepts one there (and the list follows), sets the page's policy; an agent is
refused both in one line. On a real home whose company.toml names a real git repository the entries cite, driven
by Pilot; ages on the bank's calendar (CREWLET_NOW)."""
from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from conftest import config_with
from test_app_small_terminal import footer_problems, status_problems
from test_app_support import app_for, new_home, rendered_text, wait_rendered, wait_screen, wait_until
from test_repos_support import GitRepo, numbered

from core.bank.entries import EntryBank
from core.node import Node
from core.pages.service import KnowledgeBase
from crewlet_tui.widgets.entry_list import EntryList

SIZE = (100, 32)
HOUR_MS = 3600 * 1000


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).isoformat()


@pytest.fixture
def bank_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """A home whose [repositories.server] is a real git checkout, a page with four entries under it — one a person
    wrote citing the code (GROUNDED), one an agent proposed citing the code and an issue, one verified, one
    archived — and the bank's calendar three hours after the last was written."""
    g = GitRepo(tmp_path / "server")
    g.write("src/cache.py", "TTL_SECONDS = 600\n" + numbered(9))
    sha = g.commit("first")
    home = new_home(tmp_path, config=config_with(repositories={"server": {"path": str(g.path)}}))
    with Node.open(home) as node, EntryBank(node) as bank:
        page = KnowledgeBase(node).create_page("ENG", "Caching", "# Caching\n\nHow the cache works.\n",
                                               actor="alex")
        cite = {"repository": "server", "path": "src/cache.py", "lines": [1, 1], "commit": sha,
                "quote": "TTL_SECONDS = 600"}
        grounded = bank.add(page.id, "Cache entries expire after ten minutes.", kind="CONVENTION", citations=[cite],
                            actor="alex")
        proposed = bank.add(page.id, "The cache is per process, not shared.", kind="GOTCHA",
                            citations=[cite, {"link": "acme/api#12", "kind": "issue"}], actor="eng-bot")
        verified = bank.add(page.id, "Cache keys carry the tenant id.", actor="sam")
        bank.verify(verified.id, actor="alex")
        archived = bank.add(page.id, "The cache is flushed on every deploy.", actor="alex")
        last = bank.archive(archived.id, actor="alex", reason="no longer true").status_at
    monkeypatch.setenv("CREWLET_NOW", _iso(last + 3 * HOUR_MS))
    return {"home": home, "page": page, "sha": sha, "grounded": grounded, "proposed": proposed,
            "verified": verified, "archived": archived}


def _said(app: Any, selector: str) -> str:
    """A Static's text as it shows it (the rendered screen splits a line at each change of style)."""
    return str(app.screen.query_one(selector).render())


def _rows(app: Any) -> list[str]:
    entries = app.screen.query_one(EntryList)
    return [entries.get_option_at_index(i).prompt.plain for i in range(entries.option_count)]


async def _on_page(pilot: Any, app: Any, page_id: str) -> None:
    await wait_screen(pilot, "SpacesScreen")
    app.open_page(page_id)
    await wait_screen(pilot, "PageScreen")
    await wait_until(pilot, lambda: app.screen.entries is not None and _rows(app), what="the entries read")


async def _open_entry(pilot: Any, app: Any, entry_id: str) -> None:
    """i (to the list), the arrows to `entry_id`'s row, enter: as a person gets there."""
    await pilot.press("i")
    entries = app.screen.query_one(EntryList)
    await wait_until(pilot, lambda: app.screen.focused is entries, what="the list focused")
    target = entries.get_option_index(f"entry:{entry_id}")
    for _ in range(entries.option_count):
        if entries.highlighted == target:
            break
        await pilot.press("down")
    assert entries.highlighted == target
    await pilot.press("enter")
    await wait_screen(pilot, "EntryScreen")
    await wait_until(pilot, lambda: app.screen.entry is not None and app.screen.entry.id == entry_id,
                     what="the entry read")


async def test_the_page_lists_its_entries_with_kind_tier_and_age_and_counts_those_out_of_use(bank_home):
    home, page = bank_home["home"], bank_home["page"]
    app = app_for(home, "alex")
    async with app.run_test(size=SIZE) as pilot:
        await _on_page(pilot, app, page.id)
        rows = _rows(app)
        assert rows[0] == "In use (2)"
        # verified first, then grounded; each row its kind, tier and age, then the body's first line
        assert rows[1].splitlines() == ["FACT  HUMAN_VERIFIED  3 h ago", "  Cache keys carry the tenant id."]
        assert rows[2].splitlines() == ["CONVENTION  GROUNDED  3 h ago", "  Cache entries expire after ten minutes."]
        assert rows[3] == "Waiting for a person (1)"
        assert rows[4].splitlines()[0] == "GOTCHA  PROPOSED  UNGROUNDED  3 h ago"
        assert rows[5] == "1 out of use: enter lists it"
        assert app.screen.query_one(EntryList).entry_count == 3
        # the heading says the counts and the policy; on the screen under the body once i moves there
        await pilot.press("i")
        assert _said(app, "#page-entries-title").startswith(
            "Entries  2 in use, 1 waiting, 1 out of use  ·  policy CURATED")
        await wait_rendered(pilot, "2 in use, 1 waiting, 1 out of use", "CURATED", "Cache keys carry the tenant id.",
                            "HUMAN_VERIFIED", "  3 h ago")
        # enter on the count lists those out of use, and again hides them
        entries = app.screen.query_one(EntryList)
        entries.highlighted = entries.get_option_index("out-of-use")
        await pilot.press("enter")
        await wait_until(pilot, lambda: "Out of use (1)" in _rows(app))
        assert any(r.startswith("FACT  ARCHIVED  UNGROUNDED") for r in _rows(app))
        await pilot.press("enter")
        await wait_until(pilot, lambda: "Out of use (1)" not in _rows(app))


async def test_enter_opens_the_entry_with_its_citations_and_their_checks(bank_home):
    home, page, sha = bank_home["home"], bank_home["page"], bank_home["sha"]
    proposed = bank_home["proposed"]
    app = app_for(home, "alex")
    async with app.run_test(size=SIZE) as pilot:
        await _on_page(pilot, app, page.id)
        await _open_entry(pilot, app, proposed.id)
        await wait_rendered(pilot, proposed.id, "The cache is per process, not shared.", "Citations (2)",
                            f"server:src/cache.py line 1 at {sha[:7]}", f"held, checked 3 h ago at {sha[:7]}")
        assert _said(app, "#entry-title") == f"Entry {proposed.id} under ENG/Caching"
        assert _said(app, "#entry-head") == "GOTCHA  ·  PROPOSED  ·  UNGROUNDED  (not served to agents)"
        assert "author        eng-bot (agent)" in _said(app, "#entry-meta")
        cites = _said(app, "#entry-citations").splitlines()
        assert cites == ["Citations (2)", f"1. server:src/cache.py line 1 at {sha[:7]}", "   “TTL_SECONDS = 600”",
                         f"   held, checked 3 h ago at {sha[:7]}", "2. issue acme/api#12", "   held, checked 3 h ago"]
        history = _said(app, "#entry-history").splitlines()
        assert history[0] == "History (1)" and "add → PROPOSED  eng-bot (agent)" in history[1]
        # a proposed entry offers accept, verify, dispute and archive
        keys = {k.description for k in app.screen.query("FooterKey") if k.display}
        assert {"Accept", "Verify", "Dispute", "Archive", "Back"} <= keys
        # tab, enter: back to its page by the link
        await pilot.press("tab")
        await pilot.press("enter")
        await wait_screen(pilot, "PageScreen")


async def test_a_cited_file_changed_on_the_branch_head_ungrounds_the_entry_on_its_screen(bank_home, tmp_path):
    """The screen reads an entry as a serve does: the cited file's blob at the head, not only the last check."""
    home, page, grounded = bank_home["home"], bank_home["page"], bank_home["grounded"]
    g = GitRepo(tmp_path / "server")
    g.write("src/cache.py", "TTL_SECONDS = 300\n" + numbered(9))
    g.commit("shorter")
    app = app_for(home, "alex")
    async with app.run_test(size=SIZE) as pilot:
        await _on_page(pilot, app, page.id)
        # the list says the tier it is served at: the head's file is not the one last checked
        assert any(r.startswith("CONVENTION  UNGROUNDED") for r in _rows(app))
        await _open_entry(pilot, app, grounded.id)
        assert app.screen.entry.tier == "UNGROUNDED"
        assert _said(app, "#entry-head") == "CONVENTION  ·  STANDING  ·  UNGROUNDED"
        await wait_rendered(pilot, "the file changed since")
        # the head was read by the session's one git process for the repository, which ends with the app
        cat = app.session.bank.repositories["server"].reader
        assert cat.pid is not None
    assert cat.pid is None      # ended (poll answered)


async def test_a_person_accepts_a_proposed_entry_and_the_list_follows(bank_home):
    home, page, proposed = bank_home["home"], bank_home["page"], bank_home["proposed"]
    app = app_for(home, "alex")
    async with app.run_test(size=SIZE) as pilot:
        await _on_page(pilot, app, page.id)
        await _open_entry(pilot, app, proposed.id)
        await pilot.press("a")
        await wait_until(pilot, lambda: app.screen.id == "entry-reason", what="the reason asked")
        await pilot.press(*"checked the code")
        await pilot.press("enter")
        await wait_until(pilot, lambda: app.screen.id != "entry-reason" and app.screen.entry.status == "STANDING",
                         what="the entry accepted")
        await wait_until(pilot, lambda: _said(app, "#entry-head") == "GOTCHA  ·  STANDING  ·  GROUNDED")
        assert "accept → STANDING  alex (person)" in _said(app, "#entry-history")
        assert "status set by alex, 2 h ago: checked the code" in _said(app, "#entry-meta")   # now, on its calendar
        # what the footer offers follows the status: no accept for an entry in use
        await wait_until(pilot, lambda: "Accept" not in {k.description for k in app.screen.query("FooterKey")
                                                          if k.display})
        with Node.open(home) as node:
            stored = EntryBank(node).show(proposed.id)
        assert (stored.status, stored.status_by, stored.status_reason) == ("STANDING", "alex", "checked the code")
        await pilot.press("escape")
        await wait_screen(pilot, "PageScreen")
        await wait_until(pilot, lambda: _rows(app)[0] == "In use (3)", what="the list read again")
        assert "Waiting for a person (1)" not in _rows(app)
        assert any(r.startswith("GOTCHA  GROUNDED  3 h ago") for r in _rows(app))


async def test_the_list_follows_entries_another_process_writes(bank_home):
    """Records another process appended, once applied, refresh the page screen (the app's `_refresh_views`, which
    the apply duty's pass calls) — and a refresh that finds the same rows leaves the person's place in the list."""
    home, page = bank_home["home"], bank_home["page"]
    app = app_for(home, "alex")
    async with app.run_test(size=SIZE) as pilot:
        await _on_page(pilot, app, page.id)
        entries = app.screen.query_one(EntryList)
        entries.highlighted = entries.get_option_index(f"entry:{bank_home['grounded'].id}")
        app._refresh_views()
        await pilot.pause(0.1)
        assert entries.highlighted == entries.get_option_index(f"entry:{bank_home['grounded'].id}")
        with Node.open(home) as other:
            added = EntryBank(other).add(page.id, "Evictions are least recently used first.", actor="sam")
        app.session.node.catch_up()
        app._refresh_views()
        await wait_until(pilot, lambda: _rows(app)[0] == "In use (3)", what="the new entry listed")
        assert f"entry:{added.id}" in [entries.get_option_at_index(i).id for i in range(entries.option_count)]
        # the highlight stayed on the row it was on
        assert entries.highlighted == entries.get_option_index(f"entry:{bank_home['grounded'].id}")


async def _pick_policy(pilot: Any, app: Any, policy: str) -> None:
    await pilot.press("p")
    await wait_until(pilot, lambda: app.screen.id == "entry-policy", what="the policy dialog")
    from textual.widgets import OptionList

    choices = app.screen.query_one(OptionList)
    target = choices.get_option_index(policy)
    while choices.highlighted != target:
        await pilot.press("down" if choices.highlighted < target else "up")
    await pilot.press("enter")


async def test_a_person_sets_the_pages_entry_policy(bank_home):
    home, page = bank_home["home"], bank_home["page"]
    app = app_for(home, "alex")
    async with app.run_test(size=SIZE) as pilot:
        await _on_page(pilot, app, page.id)
        await _pick_policy(pilot, app, "LOCKED")
        await wait_screen(pilot, "PageScreen")
        await wait_until(pilot, lambda: app.screen.entries.policy == "LOCKED", what="the policy set")
        await pilot.press("i")
        assert "policy LOCKED" in _said(app, "#page-entries-title")
        await wait_rendered(pilot, "LOCKED")
        with Node.open(home) as node:
            assert EntryBank(node).policy(page.id) == "LOCKED"


async def test_an_agent_is_refused_a_persons_actions_in_one_line(bank_home):
    home, page, proposed = bank_home["home"], bank_home["page"], bank_home["proposed"]
    app = app_for(home, "eng-bot")
    async with app.run_test(size=SIZE) as pilot:
        await _on_page(pilot, app, page.id)
        await _open_entry(pilot, app, proposed.id)
        before = app.session.node.applied_seq()
        await pilot.press("a")      # no reason asked: the engine refuses the agent at once
        words = ("refused: to accept an entry is a person's: eng-bot is an agent (this app acts as eng-bot: open it --as "
                 "a person to act as one)")
        await wait_until(pilot, lambda: _said(app, "#entry-notice") == words, what="the refusal")
        assert app.screen.id != "entry-reason"
        await wait_rendered(pilot, "eng-bot is an agent")
        await pilot.press("v")
        await wait_until(pilot, lambda: _said(app, "#entry-notice").startswith(
            "refused: to verify an entry is a person's: eng-bot is an agent (this app acts as eng-bot"), what="the refusal")
        assert app.screen.entry.status == "PROPOSED" and app.session.node.applied_seq() == before
        # the page's policy is a person's too
        await pilot.press("escape")
        await wait_screen(pilot, "PageScreen")
        await _pick_policy(pilot, app, "OPEN")
        await wait_screen(pilot, "PageScreen")
        await wait_until(pilot, lambda: any("a page's entry policy is a person's to set: eng-bot is an agent"
                                            in str(n.message) for n in app._notifications), what="the refusal")
        assert app.session.node.applied_seq() == before
        with Node.open(home) as node:
            assert EntryBank(node).policy(page.id) == "CURATED"


async def test_an_agent_archives_its_own_proposed_entry(bank_home):
    """The one action an agent may take (its own entry, while proposed): asked for a reason like a person."""
    home, page, proposed = bank_home["home"], bank_home["page"], bank_home["proposed"]
    app = app_for(home, "eng-bot")
    async with app.run_test(size=SIZE) as pilot:
        await _on_page(pilot, app, page.id)
        await _open_entry(pilot, app, proposed.id)
        await pilot.press("x")
        await wait_until(pilot, lambda: app.screen.id == "entry-reason", what="the reason asked")
        await pilot.press(*"a duplicate")
        await pilot.press("enter")
        await wait_until(pilot, lambda: app.screen.id != "entry-reason" and app.screen.entry.status == "ARCHIVED",
                         what="archived")
        await pilot.press("escape")
        await wait_screen(pilot, "PageScreen")
        await wait_until(pilot, lambda: "2 out of use: enter lists them" in _rows(app))


@pytest.mark.parametrize("size", [(80, 24), (120, 36)], ids=lambda s: f"{s[0]}x{s[1]}")
async def test_the_entries_and_the_entry_screen_are_usable_at_each_size(bank_home, size):
    """The page's footer holds its two new keys, the entry screen its own, nothing past an edge (as
    test_app_small_terminal measures every screen)."""
    home, page, proposed = bank_home["home"], bank_home["page"], bank_home["proposed"]
    app = app_for(home, "alex")
    async with app.run_test(size=size) as pilot:
        await _on_page(pilot, app, page.id)
        await pilot.press("i")
        await wait_rendered(pilot, "The cache is per process, not shared.", "CURATED")
        assert not footer_problems(app, "page", size[0]) + status_problems(app)
        await _open_entry(pilot, app, proposed.id)
        await wait_rendered(pilot, "Citations (2)")
        problems = footer_problems(app, "entry", size[0]) + status_problems(app)
        shown = {k.description for k in app.screen.query("FooterKey") if k.display}
        assert not problems and {"Accept", "Verify", "Dispute", "Archive", "Links", "Back", "Help"} <= shown
        assert "TTL_SECONDS = 600" in rendered_text(app)


async def test_what_an_entry_says_is_shown_as_typed_and_inert(bank_home):
    """Markup in a body is its own text, and a reason holding a terminal escape (the body's check refuses those,
    a reason is free text) is shown inert, on the list and the entry screen alike."""
    home, page = bank_home["home"], bank_home["page"]
    with Node.open(home) as node, EntryBank(node) as bank:
        odd = bank.add(page.id, "Flags like [bold]x[/] are literal in the config.", actor="alex")
        bank.dispute(odd.id, actor="sam", reason="see \x1b[2Jthe config loader")
    app = app_for(home, "alex")
    async with app.run_test(size=SIZE) as pilot:
        await _on_page(pilot, app, page.id)
        assert any("  Flags like [bold]x[/] are literal in the config." in r for r in _rows(app))
        await _open_entry(pilot, app, odd.id)
        assert _said(app, "#entry-body") == "Flags like [bold]x[/] are literal in the config."
        assert "status set by sam, " in _said(app, "#entry-meta")
        assert ": see ␛[2Jthe config loader" in _said(app, "#entry-meta")
        assert "see ␛[2Jthe config loader" in _said(app, "#entry-history")
        # a disputed entry may be accepted back into use or archived, not disputed again
        shown = {k.description for k in app.screen.query("FooterKey") if k.display}
        assert {"Accept", "Archive"} <= shown and not {"Dispute", "Verify"} & shown


async def test_ctrl_c_in_the_policy_dialog_quits_as_from_the_page(bank_home):
    app = app_for(bank_home["home"], "alex")
    async with app.run_test(size=SIZE) as pilot:
        await _on_page(pilot, app, bank_home["page"].id)
        await pilot.press("p")
        await wait_until(pilot, lambda: app.screen.id == "entry-policy", what="the policy dialog")
        await pilot.press("ctrl+c")
        await wait_until(pilot, lambda: app._exit, what="the app to quit from the dialog")


async def test_a_correction_links_to_what_it_supersedes_and_accepting_it_retires_the_old(bank_home):
    home, page, grounded = bank_home["home"], bank_home["page"], bank_home["grounded"]
    with Node.open(home) as node, EntryBank(node) as bank:
        fix = bank.supersede(grounded.id, "Cache entries expire after five minutes.", actor="eng-bot")
    app = app_for(home, "alex")
    async with app.run_test(size=SIZE) as pilot:
        await _on_page(pilot, app, page.id)
        await _open_entry(pilot, app, fix.id)
        links = app.screen.query_one("#entry-links")
        prompts = [links.get_option_at_index(i).prompt.plain for i in range(links.option_count)]
        assert prompts == ["↑ the page ENG/Caching",
                           f"supersedes {grounded.id} (it stays in use until a person accepts this one)"]
        await pilot.press("a")
        await wait_until(pilot, lambda: app.screen.id == "entry-reason", what="the reason asked")
        await pilot.press("enter")                      # no reason: it is optional
        await wait_until(pilot, lambda: app.screen.id != "entry-reason" and app.screen.entry.status == "STANDING",
                         what="the correction accepted")
        # its link opens the entry it retired, which says by what
        await pilot.press("tab", "down", "enter")
        await wait_until(pilot, lambda: app.screen.entry is not None and app.screen.entry.id == grounded.id,
                         what="the old entry opened")
        assert app.screen.entry.status == "SUPERSEDED"
        assert _said(app, "#entry-head") == "CONVENTION  ·  SUPERSEDED  ·  UNGROUNDED  (not served to agents)"
        links = app.screen.query_one("#entry-links")
        assert links.get_option_at_index(1).prompt.plain == f"superseded by {fix.id}"
        await pilot.press("escape")
        await pilot.press("escape")
        await wait_screen(pilot, "PageScreen")
        await wait_until(pilot, lambda: "1 out of use: enter lists it" not in _rows(app)
                         and "2 out of use: enter lists them" in _rows(app), what="the list followed")


async def test_the_highlighted_entry_stays_in_view_as_the_arrows_move_it(bank_home):
    """The list is as tall as its rows, under the body in the page's scroll: moving down the list moves that
    scroll, so the row the arrows reach is on the screen at 80x24."""
    home, page = bank_home["home"], bank_home["page"]
    with Node.open(home) as node, EntryBank(node) as bank:
        for n in range(12):
            bank.add(page.id, f"Shard {n} of the cache lives on its own node.", actor="alex", distinct=True)
    app = app_for(home, "alex")
    async with app.run_test(size=(80, 24)) as pilot:
        await _on_page(pilot, app, page.id)
        await pilot.press("i")
        entries = app.screen.query_one(EntryList)
        main = app.screen.query_one("#page-main")
        last = entries.get_option_index("out-of-use")
        while entries.highlighted != last:
            await pilot.press("down")
            await pilot.pause()
            assert entries.scroll_y == 0                    # one scroll: the page's
            top = entries.region.y + entries._index_to_line[entries.highlighted]
            assert main.region.y <= top < main.region.bottom, f"row {entries.highlighted} at {top}, not in {main.region}"
        assert main.scroll_y > 0
        first = entries.get_option_index(f"entry:{bank_home['verified'].id}")
        while entries.highlighted != first:
            await pilot.press("up")
            await pilot.pause()
            top = entries.region.y + entries._index_to_line[entries.highlighted]
            assert main.region.y <= top < main.region.bottom, f"row {entries.highlighted} at {top}, not in {main.region}"


async def test_an_entry_that_is_not_there_says_so_and_offers_nothing_to_do(bank_home):
    app = app_for(bank_home["home"], "alex")
    async with app.run_test(size=SIZE) as pilot:
        await wait_screen(pilot, "SpacesScreen")
        app.open_entry("0123456789abcdef")
        await wait_screen(pilot, "EntryScreen")
        await wait_until(pilot, lambda: _said(app, "#entry-title").startswith(
            "cannot open entry 0123456789abcdef: no entry '0123456789abcdef'"), what="the refusal")
        await pilot.press("a")
        await pilot.pause(0.1)
        assert app.screen.id != "entry-reason" and app.screen.entry is None


async def test_a_section_longer_than_the_list_shows_says_how_many_more(bank_home, monkeypatch):
    """A page with more entries in use than a section lists (SHOWN, 100) names the rest and the command that lists
    them all."""
    from crewlet_tui.widgets import entry_list

    monkeypatch.setattr(entry_list, "SHOWN", 1)
    home, page = bank_home["home"], bank_home["page"]
    app = app_for(home, "alex")
    async with app.run_test(size=SIZE) as pilot:
        await _on_page(pilot, app, page.id)
        assert _rows(app)[:3] == ["In use (2)", "FACT  HUMAN_VERIFIED  3 h ago\n  Cache keys carry the tenant id.",
                                  f"… 1 more: crewlet entries {page.id}"]
        assert app.screen.query_one(EntryList).entry_count == 2      # one in use, one waiting


async def test_an_entrys_search_hit_opens_its_screen(bank_home):
    """The search screen's hit for an entry ("… entry under ENG/Caching") opens the entry, by app.open_entry."""
    from textual.widgets import OptionList

    from test_app_support import build_index

    home, grounded = bank_home["home"], bank_home["grounded"]
    build_index(home)
    app = app_for(home, "alex", start_search="expire after ten minutes")
    async with app.run_test(size=SIZE) as pilot:
        await wait_screen(pilot, "SearchScreen")
        screen = app.screen
        results = screen.query_one("#search-results", OptionList)
        await wait_until(pilot, lambda: screen.last is not None and screen.last.hits, what="the hits")
        ids = [results.get_option_at_index(i).id or "" for i in range(results.option_count)]
        target = next(i for i, x in enumerate(ids) if x.endswith(f":{grounded.id}"))
        results.focus()
        results.highlighted = target
        await pilot.press("enter")
        await wait_screen(pilot, "EntryScreen")
        await wait_until(pilot, lambda: app.screen.entry is not None and app.screen.entry.id == grounded.id,
                         what="the entry read")
