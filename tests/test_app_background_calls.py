"""A screen's background call names its handlers at the call (`on_done`, `on_fail`, `on_gone`): nothing in
the app finds a handler by a name built at runtime (a misspelt `got_<tag>` once did nothing, silently), and
the handlers passed run — the answer, the refusal, the newer call superseding the older, and the answer
that lands after the screen was left (said by the app)."""
from __future__ import annotations

import ast
import threading
from pathlib import Path
from typing import Any

from test_app_support import SIZE, app_for, new_home, open_kb, wait_screen, wait_until
from textual.app import ComposeResult
from textual.widgets import Static

import crewlet_tui
from core.pages.model import Page
from crewlet_tui.screens.base import CrewletScreen

PACKAGE = Path(crewlet_tui.__file__).parent
NAME_DISPATCH_PREFIXES = ("got_", "failed_", "gone_")


def name_dispatch(root: Path) -> list[str]:
    """Where code under `root` still dispatches a call's answer by name: a method named got_/failed_/gone_
    (the old handlers, found by name), a getattr/hasattr whose name is built at runtime (an f-string or a
    concatenation), or a call_in_background given a string tag first."""
    found = []
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        where = path.relative_to(root.parent)
        for node in ast.walk(tree):
            if (isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
                    and node.name.startswith(NAME_DISPATCH_PREFIXES)):
                found.append(f"{where}:{node.lineno} def {node.name} (a handler named to be found by name)")
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
            built = len(node.args) >= 2 and isinstance(node.args[1], (ast.JoinedStr, ast.BinOp))
            if name in ("getattr", "hasattr") and built:
                found.append(f"{where}:{node.lineno} {name} with a name built at runtime")
            if (name == "call_in_background" and node.args and isinstance(node.args[0], ast.Constant)
                    and isinstance(node.args[0].value, str)):
                found.append(f"{where}:{node.lineno} call_in_background({node.args[0].value!r}, ...): a tag, "
                             "not handlers")
    return found


def test_no_background_answer_is_dispatched_by_name():
    assert name_dispatch(PACKAGE) == []


HANDLER_KEYWORDS = ("on_done", "on_fail", "on_gone")


def unfollowed_handlers(root: Path) -> list[str]:
    """Handlers passed as `on_done=self.x` (and on_fail, on_gone) where `x` is no method of the class or of a
    class it extends in the package: a misspelt handler fails here, without waiting for the key that runs it."""
    classes: dict[str, ast.ClassDef] = {}
    trees = []
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        trees.append((path, tree))
        classes.update({n.name: n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)})

    def methods(cls: ast.ClassDef) -> set[str]:
        own = {n.name for n in cls.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
        for base in cls.bases:
            if isinstance(base, ast.Name) and base.id in classes and classes[base.id] is not cls:
                own |= methods(classes[base.id])
        return own

    found = []
    for path, tree in trees:
        for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)):
            known = methods(cls)
            for node in ast.walk(cls):
                if not isinstance(node, ast.Call):
                    continue
                for kw in node.keywords:
                    value = kw.value
                    if (kw.arg in HANDLER_KEYWORDS and isinstance(value, ast.Attribute)
                            and isinstance(value.value, ast.Name) and value.value.id == "self"
                            and value.attr not in known):
                        found.append(f"{path.relative_to(root.parent)}:{node.lineno} {kw.arg}=self.{value.attr}")
    return found


def test_every_handler_passed_is_a_method_of_its_screen(tmp_path):
    assert unfollowed_handlers(PACKAGE) == []
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "typo.py").write_text(
        "class S(Base):\n"
        "    def go(self):\n"
        "        self.call_in_background(f, what='x', on_done=self._restord, on_fail=self._failed)\n"
        "    def _restored(self, page): ...\n"
        "class Base:\n"
        "    def _failed(self, error): ...\n", encoding="utf-8")
    assert [f.split(" ", 1)[1] for f in unfollowed_handlers(pkg)] == ["on_done=self._restord"]


def test_the_scan_finds_each_kind_of_name_dispatch(tmp_path):
    """The scan above is no test that cannot fail: each old form is found."""
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "old.py").write_text(
        "class S:\n"
        "    def reload(self):\n"
        "        self.call_in_background('view', read, 1)\n"
        "    def got_view(self, view): ...\n"
        "    def answer(self, tag):\n"
        "        return getattr(self, f'failed_{tag}', None) or hasattr(self, 'gone_' + tag)\n",
        encoding="utf-8")
    found = name_dispatch(pkg)
    assert len(found) == 4, found
    assert any("def got_view" in f for f in found) and any("call_in_background('view'" in f for f in found)
    assert sum("built at runtime" in f for f in found) == 2


class ProbeScreen(CrewletScreen):
    """A screen whose background calls record what reached each handler."""

    def __init__(self) -> None:
        super().__init__()
        self.done: list[Any] = []
        self.refused: list[BaseException] = []

    def compose(self) -> ComposeResult:
        yield from self.compose_header()
        yield Static("probe")
        yield from self.compose_footer()

    def answered(self, value: Any) -> None:
        self.done.append(value)

    def failed(self, error: BaseException) -> None:
        self.refused.append(error)

    def words_when_gone(self, page: Page) -> str:
        return f"probe made {page.title}"


def gated(gate: threading.Event, value: Any, ran: threading.Event | None = None) -> Any:
    """`value`, once `gate` is set (a call still running when the test acts)."""
    assert gate.wait(30), "the gate was never opened"
    if ran is not None:
        ran.set()
    return value


def notified(app: Any, words: str) -> bool:
    return any(words in n.message for n in app._notifications)


async def open_probe(pilot: Any) -> ProbeScreen:
    await wait_screen(pilot, "SpacesScreen")
    probe = ProbeScreen()
    pilot.app.push_screen(probe)
    await wait_screen(pilot, "ProbeScreen")
    return probe


async def test_the_handlers_passed_run_and_a_write_wakes_the_duties(tmp_path):
    home = new_home(tmp_path)
    app = app_for(home, "alex")
    async with app.run_test(size=SIZE) as pilot:
        pokes: list[int] = []
        app.poke_indexer = lambda: pokes.append(1)  # type: ignore[method-assign]
        probe = await open_probe(pilot)
        probe.call_in_background(probe.kb.spaces, actor="alex", what="spaces", on_done=probe.answered)
        await wait_until(pilot, lambda: probe.done, what="the read's answer at on_done")
        assert "ENG" in [row["key"] for row in probe.done[0]] and pokes == []   # a read wakes nothing
        probe.call_in_background(probe.kb.create_page, "ENG", "Runbook", "steps\n", actor="alex", what="created",
                                 on_done=probe.answered, writes=True)
        await wait_until(pilot, lambda: len(probe.done) == 2, what="the write's answer at on_done")
        assert probe.done[1].title == "Runbook" and pokes == [1]
        # a refusal goes to on_fail; without one, a notification says it
        probe.call_in_background(probe.kb.rename_page, "no-such-page", "x", actor="alex", what="renamed",
                                 on_done=probe.answered, on_fail=probe.failed, writes=True)
        await wait_until(pilot, lambda: probe.refused, what="the refusal at on_fail")
        assert "no-such-page" in str(probe.refused[0]) and len(probe.done) == 2
        assert not notified(app, "refused:")
        probe.call_in_background(probe.kb.rename_page, "no-such-page", "x", actor="alex", what="renamed",
                                 on_done=probe.answered, writes=True)
        await wait_until(pilot, lambda: notified(app, "refused:"), what="the unhandled refusal notified")
        assert len(probe.refused) == 1
    with open_kb(home) as kb:
        assert kb.get_page(probe.done[1].id, actor="alex", record_read=False).title == "Runbook"


async def test_a_newer_call_to_the_same_handler_drops_the_older_answer(tmp_path):
    app = app_for(new_home(tmp_path), "alex")
    async with app.run_test(size=SIZE) as pilot:
        probe = await open_probe(pilot)
        gate = threading.Event()
        older = probe.call_in_background(gated, gate, "older", what="probe", on_done=probe.answered)
        other: list[str] = []     # another handler is another slot: its answer still comes
        probe.call_in_background(gated, gate, "other", what="probe", on_done=other.append)
        opened = threading.Event()
        opened.set()
        probe.call_in_background(gated, opened, "newer", what="probe", on_done=probe.answered)
        await wait_until(pilot, lambda: probe.done, what="the newer answer")
        gate.set()
        await older.wait()        # the older call ran to its end...
        await wait_until(pilot, lambda: other, what="the other handler's answer")
        await pilot.pause()
        assert probe.done == ["newer"] and other == ["other"]   # ...and its answer was dropped


async def test_an_answer_landing_after_the_screen_was_left_is_said_by_the_app(tmp_path):
    home = new_home(tmp_path)
    app = app_for(home, "alex")
    async with app.run_test(size=SIZE) as pilot:
        pokes: list[int] = []
        app.poke_indexer = lambda: pokes.append(1)  # type: ignore[method-assign]
        probe = await open_probe(pilot)
        gate = threading.Event()

        created: list[Page] = []
        kb = probe.kb       # taken now, as a screen's calls take their bound method: the screen will be gone

        def create_once_let(title: str) -> Page:
            assert gate.wait(30), "the gate was never opened"
            created.append(kb.create_page("ENG", title, "", actor="alex"))
            return created[-1]

        def refuse_once_let() -> None:
            assert gate.wait(30), "the gate was never opened"
            raise ValueError("the engine refused it")

        probe.call_in_background(create_once_let, "Late Folder", what="created", on_done=probe.answered,
                                 on_gone=probe.words_when_gone, writes=True)
        # (another handler: a call to the same on_done would supersede the one above)
        probe.call_in_background(refuse_once_let, what="purged", on_done=lambda _: probe.done.append("refusal?"),
                                 on_fail=probe.failed, writes=True)
        await app.pop_screen()
        await wait_screen(pilot, "SpacesScreen")
        assert probe.is_gone
        gate.set()          # the screen's workers were cancelled with it; the calls run to their end all the same
        await wait_until(pilot, lambda: notified(app, "probe made Late Folder"), what="on_gone's words, said")
        await wait_until(pilot, lambda: notified(app, "purged: not done — the engine refused it"),
                         what="the late refusal, said")
        assert probe.done == [] and probe.refused == []   # nothing of a gone screen runs
        assert pokes           # the late write still woke the duties
    with open_kb(home) as kb:
        assert kb.get_page(created[0].id, actor="alex", record_read=False).title == "Late Folder"
