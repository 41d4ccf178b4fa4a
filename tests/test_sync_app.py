"""The app open on one node while another node writes: its background worker is woken by the log
watcher, applies what the other node appended, and the page on show reads its rows again."""
from __future__ import annotations

from test_app_support import SIZE, app_for, new_home, open_kb, wait_until

from core.paths import Home
from core.sync import join as join_mod


async def shows_a_save_made_on_another(tmp_path, target: str) -> None:
    """Node B's app shows a page; node A saves it; B's page on show turns to the new revision on its own."""
    a = new_home(tmp_path, "A")
    with open_kb(a) as kb:
        page = kb.create_page("ENG", "Shared Page", "# Shared\n\nfirst words\n")
    join_mod.join(a, target)
    a, b = Home(a.root), Home(tmp_path / "B")
    join_mod.join(b, target)
    app = app_for(b, start_indexer=True, start_page=page.id)
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, lambda: app.screen.view.page.revision == 1, timeout=30, what="the page")
        with open_kb(a) as kb:
            kb.save_page(page.id, "# Shared\n\nwords written on node A\n", base_revision=1)
        await wait_until(pilot, lambda: app.screen.view.page.revision == 2, timeout=30, what="the refreshed page")
        assert "words written on node A" in app.screen.view.page.body


async def test_the_app_on_one_node_shows_a_save_made_on_another(tmp_path):
    await shows_a_save_made_on_another(tmp_path, str(tmp_path / "shared"))


async def test_the_app_on_a_jetstream_node_shows_a_save_made_on_another(tmp_path, nats_server):
    """The same on NATS JetStream: the worker is woken by a consumer on the streams, not by a stat."""
    await shows_a_save_made_on_another(tmp_path, nats_server.url)


async def test_the_app_says_when_its_node_cannot_reach_the_servers_and_keeps_reading(tmp_path, nats_server):
    a = new_home(tmp_path, "A")
    with open_kb(a) as kb:
        page = kb.create_page("ENG", "Shared Page", "# Shared\n\nfirst words\n")
    join_mod.join(a, nats_server.url)
    app = app_for(Home(a.root), start_indexer=True, start_page=page.id)
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, lambda: app.screen.view.page.revision == 1, timeout=30, what="the page")
        nats_server.kill()
        app.poke_indexer()
        await wait_until(pilot, lambda: "offline, behind since" in app.actor_line, timeout=30, what="the offline line")
        assert app.screen.view.page.revision == 1          # the page on show is still read from this node's copy
        nats_server.start()
        app.poke_indexer()
        await wait_until(pilot, lambda: "offline" not in app.actor_line, timeout=30, what="back online")
