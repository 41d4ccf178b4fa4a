"""What a new user trips on in the app (issue 21), driven by Pilot: a home that is a file, the footer on a
trashed page, toasts that cover nothing being read, and search that says how it runs. Each test failed
before its fix. (Every screen at 80x24 and 120x36 is tests/test_app_small_terminal.py.)"""
from __future__ import annotations

from test_app_support import (SIZE, app_for, new_home, open_kb, rendered_text, screen_name, wait_rendered,
                              wait_screen, wait_until)


def footer_keys(app) -> dict[str, str]:
    """The keys the footer shows now: key display → description (disabled ones included, marked)."""
    from textual.widgets._footer import FooterKey

    return {k.key_display: k.description + (" (disabled)" if k.has_class("-disabled") else "")
            for k in app.screen.query(FooterKey)}


# -- a home that is a file ---------------------------------------------------------------------------

async def test_a_home_that_is_a_file_is_told_and_nothing_offers_to_create_it(tmp_path):
    f = tmp_path / "a-file"
    f.write_text("x")
    app = app_for(f)
    said: list[str] = []
    exit_ = app.exit
    app.exit = lambda *a, **k: (said.append(str(k.get("message"))), exit_(*a, **k))[1]  # type: ignore[method-assign]
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, lambda: not app.is_running, what="the app to exit")
        assert screen_name(app) != "WelcomeScreen"
    assert app.return_code == 1
    told = " ".join(said)
    assert f"{f} is a file, not a crewlet home" in told and "Errno" not in told
    assert f.read_text() == "x"
