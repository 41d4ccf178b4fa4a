"""A page whose body is one 5 MB line (issue 19, part 6).

Reproduction: the app took 3.6–5.3 s a key on that page and 25 s to open the editor. The page screen now
cuts a line past LINE_SHOWN characters visibly (saying how much is not shown, and where it is), and the
editor says why it will not open a line past LINE_EDITED rather than hang. The key latency itself is
measured by bench/long_line.py against a small page (tests never assert a time)."""
from __future__ import annotations

from conftest import config_with
from test_app_support import SIZE, app_for, new_home, open_kb, rendered_text, wait_rendered, wait_screen, wait_until

from crewlet_tui.screens.edit import LINE_EDITED, too_long_to_edit
from crewlet_tui.widgets.page_view import LINE_SHOWN, cut_long_lines


def test_a_long_line_is_cut_visibly_and_the_rest_of_the_body_is_kept():
    body = "# Title\n\n" + "x" * (LINE_SHOWN + 1234) + "\n\nafter\n"
    shown = cut_long_lines(body)
    assert shown.startswith("# Title\n\n" + "x" * LINE_SHOWN + " … ⟨1,234 more characters of this line")
    assert "`crewlet page show` prints the whole page" in shown and shown.endswith("\n\nafter\n")
    assert cut_long_lines("short\nlines\n") == "short\nlines\n"


def test_the_editor_says_why_it_will_not_open_a_line_too_long_to_edit():
    assert too_long_to_edit("x" * LINE_EDITED) is None
    why = too_long_to_edit("x" * 5_000_000)
    assert why is not None and "5,000,000 characters" in why and "crewlet page save" in why


async def test_a_page_of_one_5_mb_line_shows_cut_keeps_its_keys_and_the_editor_says_why_not(tmp_path):
    # such a page: written before [limits] bounded a body at 1 MiB, or under a company that raised the bound
    home = new_home(tmp_path, config=config_with(limits={"page_body_bytes": 8 * 1024 * 1024}))
    with open_kb(home) as kb:
        page = kb.create_page("ENG", "One Long Line", "x" * 5_000_000, actor="alex")
    app = app_for(home, "alex")
    async with app.run_test(size=SIZE) as pilot:
        await wait_screen(pilot, "SpacesScreen")
        app.open_page(page.id)
        await wait_screen(pilot, "PageScreen", timeout=120)
        shown = app.screen
        await wait_until(pilot, lambda: shown.view is not None, timeout=120)
        for key in "jjkG":                               # the keys answer; at the end, the cut is said
            await pilot.press(key)
        await wait_rendered(pilot, "more characters of this", timeout=60)
        assert app.screen is shown
        await pilot.press("e")
        await wait_until(pilot, lambda: any("5,000,000 characters" in n.message for n in app._notifications),
                         what="the editor to say why it will not open")
        assert app.screen is shown and "EditScreen" not in [type(s).__name__ for s in app.screen_stack]
        assert "One Long Line" in rendered_text(app)
