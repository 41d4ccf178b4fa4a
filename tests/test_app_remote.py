"""The app over a remote backend: it says where the knowledge lives and that there is no local copy, opens
on the search (which goes through the seam to the site), opens a hit through the page API as Markdown,
and offers no outline, revisions or "not searchable yet". A real Confluence-shaped server on 127.0.0.1."""
from __future__ import annotations

from textual.widgets import OptionList, Static

from core import config as config_mod

from remote_servers import ConfluenceServer, PlaneServer
from test_app_support import SIZE, app_for, new_home, screen_name, wait_screen, wait_until


def _confluence_home(tmp_path, server):
    data = config_mod.example_config()
    data["knowledge"] = {"backend": "confluence", "confluence_spaces": ["ENG"]}
    data["integrations"] = {"confluence": {"url": server.url, "token_env": "APP_CF_TOKEN"}}
    return new_home(tmp_path, config=data)


async def test_the_app_searches_confluence_live_and_opens_a_page(tmp_path, monkeypatch):
    monkeypatch.setenv("APP_CF_TOKEN", "company-token")
    with ConfluenceServer() as cf:
        cf.user("company-token", "svc")
        cf.space("ENG")
        ops = cf.page("ENG", "Operations", "<p>ops</p>")
        cf.page("ENG", "Deploy Runbook", '<h2>Steps</h2><p>Roll back with the <strong>rollback</strong> job.</p>'
                '<ac:structured-macro ac:name="code"><ac:plain-text-body><![CDATA[make rollback]]>'
                '</ac:plain-text-body></ac:structured-macro>', parent=ops)
        home = _confluence_home(tmp_path, cf)
        app = app_for(home, start_indexer=True)
        async with app.run_test(size=SIZE) as pilot:
            await wait_screen(pilot, "SearchScreen")          # the knowledge is reached by searching it
            screen = app.screen
            copy = screen.query_one("#search-copy", Static)
            assert f"searching Confluence at {cf.url} live" in str(copy.render())
            assert "no local copy" in str(copy.render())
            status = screen.query_one("#status-index", Static)
            await wait_until(pilot, lambda: "searched live, no local copy" in str(status.render()))
            assert "Confluence, live" in str(screen.query_one("#status-who", Static).render())
            assert not app._duties_running                       # no index, no embedding: nothing local to keep

            await pilot.press(*"rollback", "enter")
            outcome = screen.query_one("#search-outcome", Static)
            await wait_until(pilot, lambda: screen.last is not None)
            assert str(outcome.render()).startswith("1 result"), str(outcome.render())
            shown = str(outcome.render())       # in words (crewlet_tui/search_words.py), never the codes
            assert "confluence live, no local copy" in shown and "ranked by relevance" in shown, shown
            assert "degraded" not in shown and "served" not in shown
            results = screen.query_one("#search-results", OptionList)
            assert "Operations" in str(results.get_option_at_index(0).prompt)
            results.focus()
            results.highlighted = 0
            await pilot.press("enter")
            await wait_screen(pilot, "RemotePageScreen")
            page_screen = app.screen
            await wait_until(pilot, lambda: page_screen.page is not None)
            assert "no local copy" in str(page_screen.query_one("#remote-where", Static).render())
            assert page_screen.page.body.startswith("## Steps") and "```\nmake rollback\n```" in page_screen.page.body
            assert "ENG › Operations" in str(page_screen.query_one("#remote-trail", Static).render())
            await pilot.press("o")
            assert app.opened_urls and app.opened_urls[-1].startswith(cf.url + "/spaces/ENG/pages/")
            await pilot.press("y")                                # no history here (a native page's key)
            assert screen_name(app) == "RemotePageScreen"
            await pilot.press("escape")
            await wait_screen(pilot, "SearchScreen")
            await pilot.press("escape")
            await wait_screen(pilot, "SpacesScreen")
            app.open_outline("ENG")                               # no local outline of a remote space
            await pilot.pause(0.05)
            assert screen_name(app) == "SpacesScreen"


async def test_the_app_says_when_the_site_cannot_be_searched(tmp_path, monkeypatch):
    monkeypatch.setenv("APP_CF_TOKEN", "company-token")
    with ConfluenceServer() as cf:
        cf.user("company-token", "svc")
        cf.space("ENG")
        home = _confluence_home(tmp_path, cf)
        cf.mode = "status:503"
        app = app_for(home, start_search="deploy")
        async with app.run_test(size=SIZE) as pilot:
            await wait_screen(pilot, "SearchScreen")
            screen = app.screen
            await wait_until(pilot, lambda: screen.last is not None)
            text = str(screen.query_one("#search-outcome", Static).render())
            assert text.startswith("Could not search") and "503" in text
            assert "Not searchable yet" not in text


async def test_the_app_searches_plane_and_says_it_ranks_by_recency(tmp_path, monkeypatch):
    monkeypatch.setenv("APP_PLANE_KEY", "company-key")
    with PlaneServer() as pl:
        pl.key("company-key", "svc")
        eng = pl.project("ENG", members={"svc"})
        pl.project("SKILLS", members={"svc"})
        pl.page(eng, "Deploy Runbook", "<p>deploy with care</p>")
        data = config_mod.example_config()
        data["knowledge"] = {"backend": "plane", "plane_projects": ["ENG"]}
        data["integrations"] = {"plane": {"url": pl.url, "workspace": "acme", "token_env": "APP_PLANE_KEY"}}
        home = new_home(tmp_path, config=data)
        app = app_for(home, start_search="deploy")
        async with app.run_test(size=SIZE) as pilot:
            await wait_screen(pilot, "SearchScreen")
            screen = app.screen
            await wait_until(pilot, lambda: screen.last is not None and screen.last.hits)
            assert "ranked by recency" in str(screen.query_one("#search-outcome", Static).render())
            results = screen.query_one("#search-results", OptionList)
            results.focus()
            results.highlighted = 0
            await pilot.press("enter")
            await wait_screen(pilot, "RemotePageScreen")
            await wait_until(pilot, lambda: app.screen.page is not None)
            assert app.screen.page.body == "deploy with care\n"
