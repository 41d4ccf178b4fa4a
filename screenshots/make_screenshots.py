"""Regenerate the app's screenshots: `python screenshots/make_screenshots.py [--size 120x36] [--out DIR]`.

Builds a temporary home with the bundled example knowledge base (or, in a build without the importer,
a few pages made through KnowledgeBase), drives the app with Pilot at a fixed size with a fixed clock,
fixed record times and page ids, and no cursor blink, and saves an SVG of each screen: spaces, outline,
page, the page's entries (page-entries), an entry, the entry policy dialog (policy), edit, conflict, history,
search, ask, trash, diaries, help, and last the review queue (review: its triage decisions and audit are written
after every other shot, so none of those moves). The same input gives the same SVGs: the entries cite a git repository made
with fixed commit dates, and their ages are on the bank's calendar, which CREWLET_NOW holds at the app's "now".

With no --size it shoots both sizes the app is laid out for: 120x36 (`page.svg`, …) and the smallest
terminal it promises to be usable in, 80x24 (`page-80x24.svg`, …), each from a home of its own.
"""
from __future__ import annotations

import argparse
import asyncio
import hashlib
import itertools
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

# fixed times: 2025-03-03 09:00 UTC, each record 97 s after the one before; shown in UTC
T0_MS = 1_740_992_400_000
CLOCK_S = T0_MS / 1000 + 6 * 3600  # "now" in the app: six hours after the first record
os.environ["TZ"] = "UTC"
# the knowledge bank's calendar (entries' ages: core.clock.calendar_now) at the app's "now"
os.environ["CREWLET_NOW"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(CLOCK_S))
if hasattr(time, "tzset"):
    time.tzset()

from core import config as config_mod  # noqa: E402
from core.log import record as record_mod  # noqa: E402
from core.node import Node, init_home  # noqa: E402
from core.pages import records as records_mod  # noqa: E402
from core.pages import service as service_mod  # noqa: E402
from core.pages.service import KnowledgeBase  # noqa: E402
from core.paths import Home, examples_dir  # noqa: E402
from crewlet_tui.app import make_app  # noqa: E402


_RECORD_NEW = record_mod.Record.new.__func__  # type: ignore[attr-defined]


def fix_the_clock() -> None:
    ticks = itertools.count()
    # the entries' records (built last, in build_home) on a clock of their own, an hour after the first record:
    # the pages' times and ids, and what the app writes later, stay what they were before entries came
    entry_ticks = itertools.count()
    # the background worker's records (vectors, the semantic index) tick a clock of their own: how many it
    # writes between two saves depends on timing, and must not move the times the screens show. A record's
    # time is given here, where it is made (core.clock.now_ms is imported by name wherever it is read)
    background = itertools.count()

    def new(cls, type: str, actor: str, payload: dict, *, at: int | None = None, **kw):  # type: ignore[no-untyped-def]
        if at is None and type.startswith(("entry.", "page.policy", "triage.")):
            at = T0_MS + 3600_000 + next(entry_ticks) * 97_000
        elif at is None:
            at = T0_MS + next(background if type.startswith(("vector.", "index.")) else ticks) * 97_000
        return _RECORD_NEW(cls, type, actor, payload, at=at, **kw)

    record_mod.Record.new = classmethod(new)  # type: ignore[assignment]
    ids = itertools.count(1)

    def new_id() -> str:
        return hashlib.sha1(f"crewlet-screenshot-{next(ids)}".encode()).hexdigest()[:16]

    service_mod.new_id = new_id  # type: ignore[assignment]
    entry_ids = itertools.count(1)
    records_mod.new_id = lambda: hashlib.sha1(f"crewlet-entry-{next(entry_ids)}".encode()).hexdigest()[:16]  # type: ignore[assignment]
    from core.agents import diary as diary_mod
    diary_mod.now_ms = lambda: T0_MS + next(ticks) * 97_000  # a note's written time  # type: ignore[assignment]
    service_mod.now_ms = lambda: T0_MS + next(ticks) * 97_000  # the rescued file's name  # type: ignore[assignment]
    try:
        from core.importer import plan as plan_mod
        plan_mod._new_ids = lambda: iter(new_id, None)  # the importer draws its ids in bulk  # type: ignore[assignment]
    except ImportError:
        pass


def make_repository(path: Path) -> str:
    """A git checkout the entries cite, its one commit made at a fixed date (so its id is the same every run)."""
    (path / "src").mkdir(parents=True)
    (path / "src" / "cache.py").write_text("TTL_SECONDS = 600\n\n\ndef cached(key):\n    return STORE.get(key)\n")
    (path / "src" / "deploy.py").write_text("def deploy(version):\n    require_green_ci(version)\n    roll_out(version)\n")
    env = {**os.environ, "GIT_AUTHOR_NAME": "alex", "GIT_AUTHOR_EMAIL": "alex@example.com",
           "GIT_COMMITTER_NAME": "alex", "GIT_COMMITTER_EMAIL": "alex@example.com", "GIT_CONFIG_NOSYSTEM": "1",
           "GIT_AUTHOR_DATE": "2025-03-03T08:00:00Z", "GIT_COMMITTER_DATE": "2025-03-03T08:00:00Z",
           "HOME": str(path.parent)}
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "cache and deploy"]):
        subprocess.run(["git", "-C", str(path), *args], env=env, check=True, capture_output=True)
    return subprocess.run(["git", "-C", str(path), "rev-parse", "HEAD"], env=env, check=True, capture_output=True,
                          text=True).stdout.strip()


def add_entries(node: Node, page_id: str, sha: str) -> dict[str, str]:
    """Entries under the runbook: one a person wrote citing the code, one verified, two an agent proposed (one
    citing the code and an issue), one archived."""
    from core.bank.entries import EntryBank

    with EntryBank(node) as bank:
        bank.add(page_id, "Deploys wait for a green CI run: deploy() calls require_green_ci() first.",
                 kind="CONVENTION", scope="src",
                 citations=[{"repository": "server", "path": "src/deploy.py", "lines": [1, 2], "commit": sha,
                             "quote": "require_green_ci(version)"}], actor="alex")
        tag = bank.add(page_id, "A rollback needs the previous image tag, from the deploy log.", actor="sam")
        bank.verify(tag.id, actor="alex", reason="checked in the last incident")
        gotcha = bank.add(page_id, "The cache holds a value for ten minutes after a deploy.", kind="GOTCHA",
                          citations=[{"repository": "server", "path": "src/cache.py", "lines": [1, 1], "commit": sha,
                                      "quote": "TTL_SECONDS = 600"},
                                     {"link": "nimbus/api#412", "kind": "issue"}], actor="eng-bot")
        bank.add(page_id, "Friday deploys are frozen after noon.", kind="DECISION", actor="eng-bot")
        old = bank.add(page_id, "The staging database is reset every Sunday.", actor="alex")
        bank.archive(old.id, actor="alex", reason="staging is no longer reset")
    return {"gotcha": gotcha.id}


def build_home(root: Path) -> tuple[Home, dict[str, str]]:
    home = Home(root)
    sha = make_repository(root.parent / "server")
    config = config_mod.example_config()
    config["repositories"] = {"server": {"path": str(root.parent / "server")}}
    config["knowledge"] = {"auto_triage": "on"}   # what the review shot shows: triage acting, and auditing an act
    init_home(home, config)
    node = Node.open(home)
    kb = KnowledgeBase(node)
    try:
        try:
            from core.importer import import_directory
        except ImportError:
            import_directory = None  # type: ignore[assignment]
        if import_directory is not None:
            import_directory(kb, examples_dir(), actor="alex")
        else:
            runbook = kb.create_page("ENG", "Deploy Runbook", "# Deploy Runbook\n\nHow a change reaches production.\n",
                                     actor="alex")
            kb.create_page("ENG", "Rollback", "# Rollback\n\nRoll back first, investigate second.\n", actor="alex",
                           parent=runbook.id)
            kb.create_page("ENG", "Onboarding", "# Onboarding\n\nWelcome to Engineering.\n", actor="alex")
            kb.create_page("HOME", "Onboarding", "# Onboarding\n\nWelcome to Nimbus.\n", actor="alex")
        runbook = kb.resolve("ENG/Deploy Runbook")
        rollback = kb.resolve("ENG/Rollback")
        body = runbook.body.replace(
            "Watch the error rate on the dashboard for ten minutes.",
            "Watch the error rate on the dashboard for **fifteen** minutes, and say so in `#deploys`.\n\n"
            "| step | who | when |\n| --- | --- | --- |\n| deploy | on call | weekdays before 16:00 |\n"
            "| watch | on call | 15 minutes |\n| roll back | anyone | any time |")
        body = body.replace("See the Rollback page filed under this one.",
                            f"See [Rollback](#/knowledge/pages/{rollback.id}), filed under this one.")
        runbook = kb.save_page(runbook.id, body, base_revision=runbook.revision, actor="sam",
                               message="watch for fifteen minutes; add the table")
        onboarding = kb.resolve("ENG/Onboarding")
        kb.save_page(onboarding.id, onboarding.body.rstrip("\n") + f"\n\nStart with the [Deploy Runbook]"
                     f"(#/knowledge/pages/{runbook.id}).\n", base_revision=onboarding.revision, actor="alex",
                     message="link the runbook")
        kb.add_comment(runbook.id, "Should the 16:00 cut-off hold on Fridays too?", actor="sam")
        kb.add_comment(runbook.id, "Yes — and no deploys at all on Friday afternoons.", actor="alex")
        kb.create_page("ENG", "Runbooks", "", actor="alex")  # a folder
        old = kb.create_page("ENG", "Old deploy notes", "# Old deploy notes\n\nSuperseded by the runbook.\n",
                             actor="sam")
        kb.trash_page(old.id, actor="sam")
        scratch = kb.create_page("PROD", "Scratch ideas", "- a dark mode\n", actor="alex")
        kb.trash_page(scratch.id, actor="alex")
        from core.agents.diary import Diary   # eng-bot's diary: what the Diaries screen shows
        diary = Diary(node)
        for fact in ("Deploys to staging need the VPN turned on first",
                     "The billing service restarts cleanly only after its queue drains",
                     "Sam reviews runbook changes; ask in #deploys before editing one"):
            diary.remember(fact, actor="eng-bot")
        entries = add_entries(node, runbook.id, sha)
        return home, {"runbook": runbook.id, "rollback": rollback.id, **entries}
    finally:
        node.close()


async def wait_until(pilot, predicate: Callable[[], bool], timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        await pilot.pause(0.02)
        if predicate():
            return
    raise TimeoutError("the app did not get there in time")


async def settle(pilot) -> None:
    """The background worker has caught up with every write (the status line says so the same way every
    run), then the screen has painted."""
    app = pilot.app

    def caught_up() -> bool:
        index, meaning = app.index_state, app.meaning_state
        return (index.phase == "current" and index.indexed_seq == index.applied_seq
                and meaning.phase == "current" and meaning.covered == meaning.total)

    await wait_until(pilot, caught_up, 120)
    await pilot.pause(0.3)


async def shoot(home: Home, ids: dict[str, str], out: Path, size: tuple[int, int], suffix: str = "") -> list[Path]:
    app = make_app(home, clock=lambda: CLOCK_S, cursor_blink=False, allow_external=False, index_interval=3600)
    saved: list[Path] = []

    def save(name: str) -> None:
        path = Path(app.save_screenshot(f"{name}{suffix}.svg", path=str(out)))
        saved.append(path)
        print(f"  {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}")

    async with app.run_test(size=size) as pilot:
        screen_is = lambda name: type(app.screen).__name__ == name  # noqa: E731
        await wait_until(pilot, lambda: screen_is("SpacesScreen"))
        await wait_until(pilot, lambda: app.index_state.phase in ("current", "failed", "off"), 60)
        # every page embedded by the background worker (the status line says "meaning N of N")
        await wait_until(pilot, lambda: app.meaning_state.phase in ("current", "failed", "off")
                         and app.meaning_state.covered == app.meaning_state.total, 120)
        await wait_until(pilot, lambda: app.screen.query_one("#spaces-table").row_count > 0)
        await settle(pilot)
        save("spaces")

        await pilot.press("enter")  # ENG
        await wait_until(pilot, lambda: screen_is("OutlineScreen") and app.screen.page_tree.first_window_shown)
        tree = app.screen.page_tree
        await pilot.press("j")
        await pilot.press("l")  # open Deploy Runbook's level
        await wait_until(pilot, lambda: any(n.data and n.data.kind == "page" for n in tree.cursor_node.children))
        await settle(pilot)
        save("outline")

        await pilot.press("enter")
        await wait_until(pilot, lambda: screen_is("PageScreen") and app.screen.view is not None
                         and app.screen.entries is not None)
        await settle(pilot)
        save("page")

        await pilot.press("i")   # the page's entries, under its body
        entries = app.screen.query_one("#page-entries")
        gotcha = entries.get_option_index(f"entry:{ids['gotcha']}")
        while entries.highlighted != gotcha:
            await pilot.press("down")
        await settle(pilot)
        save("page-entries")

        await pilot.press("enter")
        await wait_until(pilot, lambda: screen_is("EntryScreen") and app.screen.entry is not None)
        await settle(pilot)
        save("entry")
        await pilot.press("escape")
        await wait_until(pilot, lambda: screen_is("PageScreen"))

        await pilot.press("p")
        await wait_until(pilot, lambda: app.screen.id == "entry-policy")
        await settle(pilot)
        save("policy")
        await pilot.press("escape")
        await wait_until(pilot, lambda: screen_is("PageScreen"))
        app.screen.query_one("#page-main").focus()

        await pilot.press("e")
        await wait_until(pilot, lambda: screen_is("EditScreen"))
        editor = app.screen.editor
        editor.move_cursor((2, 0))
        editor.insert("Ask in `#deploys` before you start; say when you are done.\n\n")
        await settle(pilot)
        save("edit")

        # somebody else saves meanwhile: the app's save is refused and shows both texts
        kb = app.session.kb
        current = kb.resolve(ids["runbook"])
        kb.save_page(current.id, current.body.replace("How a change reaches production.",
                                                      "How a change reaches production, step by step."),
                     base_revision=current.revision, actor="sam", message="wording")
        await pilot.press("ctrl+s")
        await wait_until(pilot, lambda: app.screen.id == "save-note")
        await pilot.press(*"add the #deploys heads-up")
        await pilot.press("enter")
        await wait_until(pilot, lambda: screen_is("ConflictScreen"))
        await settle(pilot)
        save("conflict")
        await pilot.press("m")
        await wait_until(pilot, lambda: screen_is("EditScreen"))
        app.screen.editor.text = app.screen.editor.text.replace(
            "How a change reaches production.", "How a change reaches production, step by step.")
        await pilot.press("ctrl+s")
        await wait_until(pilot, lambda: app.screen.id == "save-note")
        await pilot.press("enter")
        await wait_until(pilot, lambda: screen_is("PageScreen"))
        await settle(pilot)

        await pilot.press("y")
        await wait_until(pilot, lambda: screen_is("HistoryScreen") and app.screen.revisions)
        await pilot.press("j")  # the save that added the table
        await settle(pilot)
        save("history")

        await pilot.press("slash")
        await wait_until(pilot, lambda: screen_is("SearchScreen"))
        await wait_until(pilot, lambda: app.index_state.phase in ("current", "failed", "off"), 60)
        query = "how do we handle rate limits"
        await pilot.press(*query)
        await pilot.press("enter")   # searched as typed, or now: the answer shown is the whole query's
        await wait_until(pilot, lambda: app.screen.last is not None and app.screen.last_text == query
                         and app.screen.last.outcome.served_mode == "hybrid"
                         and "searching for" not in str(app.screen.query_one("#search-outcome").render()))
        await settle(pilot)
        save("search")

        await pilot.press("f3")  # the same words, asked: no model is configured here, so its passages
        await wait_until(pilot, lambda: screen_is("AskScreen") and app.screen.answer is not None)
        await settle(pilot)
        save("ask")
        await pilot.press("escape")
        await wait_until(pilot, lambda: screen_is("SearchScreen"))

        app.show("trash")
        await wait_until(pilot, lambda: screen_is("TrashScreen") and app.screen.pages)
        await settle(pilot)
        save("trash")

        app.show("diaries")
        await wait_until(pilot, lambda: screen_is("DiariesScreen") and app.screen.agents
                         and app.screen.query_one("#notes-table").row_count)
        await settle(pilot)
        save("diaries")

        await pilot.press("question_mark")
        await wait_until(pilot, lambda: screen_is("HelpScreen"))
        await settle(pilot)
        save("help")
        await pilot.press("escape")
        await wait_until(pilot, lambda: screen_is("DiariesScreen"))

        triage_the_entries(app.session.bank, ids)
        app.show("review")
        await wait_until(pilot, lambda: screen_is("ReviewScreen") and app.screen.view is not None
                         and app.screen.view.queue.audits)
        await settle(pilot)
        save("review")
    return saved


def triage_the_entries(bank, ids: dict[str, str]) -> None:  # type: ignore[no-untyped-def]
    """What the review shot shows: triage's decisions on the agent's two proposed entries (no model configured: the
    one citing code escalates with NO_LLM, the one citing nothing with UNGROUNDED), and an agent's repeat of the
    deploy convention that triage folded in on its own and drew for audit (the decision written as triage writes it:
    folding an agent's repeat needs no model)."""
    from core.bank.triage import Triage
    from core.pages import records
    from core.pages.entry_model import SYSTEM_ACTOR

    with Triage(bank, judge=None) as triage:
        triage.run()            # the entries still pending (the app's triage duty may have decided them already)
    convention = bank.conn.execute("SELECT id FROM entries WHERE kind = 'CONVENTION'").fetchone()[0]
    repeat = bank.add(ids["runbook"], "Deploys need a green CI run before they roll out.", kind="CONVENTION",
                      actor="eng-bot", distinct=True)
    version = bank.conn.execute("SELECT version FROM entries WHERE id = ?", (repeat.id,)).fetchone()[0]
    bank.node.submit_one(records.triage_decide(
        SYSTEM_ACTOR, entry_id=repeat.id, entry_version=version, mode="on", decision="corroborate", acted=True,
        reasons=["AUDIT"], held=[], fold_into=convention, refusal=None, inputs={"rules": ["exact repeat"]},
        audited=True, op_id=hashlib.sha1(b"crewlet-screenshot-audit").hexdigest()[:16]))


# (size, what each file's name ends with): the default run's two
SIZES = [((120, 36), ""), ((80, 24), "-80x24")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", default="", help="one terminal size, COLSxROWS, named <screen>-COLSxROWS.svg "
                                                   "(default: 120x36 and 80x24)")
    parser.add_argument("--out", default=str(Path(__file__).resolve().parent), help="where the SVGs go")
    args = parser.parse_args()
    sizes = SIZES
    if args.size:
        cols, rows = (int(x) for x in args.size.lower().split("x"))
        sizes = [((cols, rows), f"-{cols}x{rows}")]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for size, suffix in sizes:
        fix_the_clock()     # each size from the same start: the same ids and times, so its own run repeats
        tmp = Path(tempfile.mkdtemp(prefix="crewlet-shots-"))
        try:
            home, ids = build_home(tmp / "home")
            print(f"screenshots at {size[0]}x{size[1]}:")
            asyncio.run(shoot(home, ids, out, size, suffix))
        finally:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
