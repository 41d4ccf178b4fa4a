"""The app's one screen registry (crewlet_tui/screens/registry.py): every screen is in it, and the app, the
command palette, help and the keys that open a screen all read it — so a screen is added in one module and
one entry, and these tests ask the registry rather than keep lists of their own."""
from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest
from textual.command import CommandList
from textual.screen import ModalScreen, Screen

import crewlet_tui.screens as screens_pkg
from crewlet_tui.screens import registry
from crewlet_tui.screens.help import help_renderable
from test_app_support import SIZE, app_for, new_home, open_kb, wait_screen, wait_until


def defined_screens() -> dict[str, type[Screen]]:
    """Every full screen (not a dialog) defined in crewlet_tui/screens/, by class name."""
    found: dict[str, type[Screen]] = {}
    for info in pkgutil.iter_modules(screens_pkg.__path__):
        module = importlib.import_module(f"crewlet_tui.screens.{info.name}")
        for name, cls in inspect.getmembers(module, inspect.isclass):
            if (cls.__module__ == module.__name__ and issubclass(cls, Screen) and cls.__name__ != "CrewletScreen"
                    and not (issubclass(cls, ModalScreen) and cls.__name__.endswith("Modal"))):
                found[name] = cls
    return found


def test_every_screen_module_is_registered_and_every_entry_loads():
    registered = {item.load().__name__ for item in registry.SCREENS}
    defined = set(defined_screens())
    assert defined - registered == set(), "screens missing from screens/registry.py"
    assert registered - defined == set()
    for item in registry.SCREENS:
        assert issubclass(item.load(), Screen), item.name
        assert item.help_in == "" or item.help_in in registry.BY_NAME, item.name


def test_help_has_a_section_for_every_entry_and_marks_the_one_help_was_opened_from():
    from rich.console import Console

    def text(current: str | None) -> str:
        console = Console(width=200, record=True)
        console.print(help_renderable(current))
        return console.export_text()

    everywhere = text(None)
    for item in registry.SCREENS:
        if item.keys:
            assert item.title in everywhere
            first_key, does = item.keys[0]
            assert does in everywhere, item.name
        section = registry.BY_NAME[registry.help_section(item.name) or item.name]
        shown = text(item.name)
        if section.keys:
            assert f"{section.title}  (this screen)" in shown, item.name
            assert shown.index("(this screen)") < shown.index("Everywhere")
        else:
            assert "(this screen)" not in shown, item.name


def test_an_unknown_screen_name_is_refused_with_the_known_ones():
    with pytest.raises(KeyError, match="no screen named 'nope'.*spaces"):
        registry.entry("nope")


@pytest.mark.parametrize("name", [item.name for item in registry.SCREENS if item.palette])
async def test_each_palette_entry_opens_its_screen(tmp_path, name):
    item = registry.entry(name)
    home = new_home(tmp_path)
    app = app_for(home, "alex")
    async with app.run_test(size=SIZE) as pilot:
        await wait_screen(pilot, "SpacesScreen")
        if name == "spaces":   # from a page, back to the spaces
            with open_kb(home) as kb:
                page = kb.create_page("ENG", "Runbook", "steps\n", actor="alex")
            app.open_page(page.id)
            await wait_screen(pilot, "PageScreen")
        await pilot.press("ctrl+p")
        await wait_screen(pilot, "CommandPalette")
        await pilot.press(*item.palette_name)
        commands = app.screen.query_one(CommandList)

        def index() -> int | None:
            for i in range(commands.option_count):
                if str(commands.get_option_at_index(i).prompt).startswith(item.palette_name):
                    return i
            return None

        await wait_until(pilot, lambda: index() is not None, what=f"the palette's {item.palette_name!r}")
        commands.highlighted = index()
        await pilot.press("enter")
        await wait_until(pilot, lambda: item.is_showing(app.screen), what=f"the {name} screen")


@pytest.mark.parametrize("name", [item.name for item in registry.SCREENS if item.key])
async def test_each_screens_key_opens_it_from_the_spaces_screen(tmp_path, name):
    item = registry.entry(name)
    app = app_for(new_home(tmp_path), "alex")
    async with app.run_test(size=SIZE) as pilot:
        await wait_screen(pilot, "SpacesScreen")
        await pilot.press(item.key)
        await wait_until(pilot, lambda: item.is_showing(app.screen), what=f"the {name} screen")
        assert registry.name_of(app.screen) == name


async def test_a_write_in_the_background_wakes_the_duties_and_a_read_does_not(tmp_path):
    """call_in_background(..., writes=True) marks a write: the duties' next pass runs at once after it."""
    home = new_home(tmp_path)
    with open_kb(home) as kb:
        page = kb.create_page("ENG", "Runbook", "steps\n", actor="alex")
    app = app_for(home, "alex")
    async with app.run_test(size=SIZE) as pilot:
        pokes: list[int] = []
        app.poke_indexer = lambda: pokes.append(1)  # type: ignore[method-assign]
        await wait_screen(pilot, "SpacesScreen")
        app.open_page(page.id)
        await wait_screen(pilot, "PageScreen")
        await wait_until(pilot, lambda: app.screen.page is not None)
        assert pokes == []            # the page's read is no write
        await pilot.press("c")
        await wait_until(pilot, lambda: app.screen.is_modal)
        await pilot.press(*"looks right", "enter")
        await wait_until(pilot, lambda: pokes, what="the comment's write to wake the duties")
    with open_kb(home) as kb:
        assert [c.body for c in kb.comments(page.id)] == ["looks right"]
