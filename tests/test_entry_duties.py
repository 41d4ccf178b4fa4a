"""The entries' background duties (issue 35) on real homes and real git repositories made here: the recheck duty
(core/duties/entry_recheck.py over core/bank/recheck.py) carrying citations through commits that shift lines,
rewrite them, move them elsewhere in the file, rename the file and delete it; citations written "not read yet"
read at last; a chat model on 127.0.0.1 (tests/chat_server.py) judging rewritten lines — supports, contradicts,
a broken answer; `crewlet entry recheck` as a separate process; and the decay duty (core/duties/entry_decay.py)
with CREWLET_NOW across its windows and each exception. Every duty runs through the one runner (DutyRunner)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from datetime import timedelta
from pathlib import Path

import pytest
from chat_server import ChatServer, Reply
from conftest import ROOT, config_with, new_home
from test_repos_support import GitRepo, numbered

from core.bank.entries import SYSTEM_ACTOR, EntryBank
from core.bank.trust import GROUNDED, UNGROUNDED
from core.clock import from_ms
from core.duties import ENTRY_DECAY, ENTRY_RECHECK, PAGE_REFRESH, TRIAGE, UPKEEP
from core.duties.entry_decay import EntryDecayDuty
from core.duties.entry_recheck import EntryRecheckDuty
from core.duties.roster import default_duties
from core.duties.runner import DutyReport, DutyRunner
from core.log import Record
from core.node import Node
from core.pages import records
from core.pages.service import KnowledgeBase
from core.repos import HOLDS, CodeCitation, Repository, check_code

CACHE = "TTL_SECONDS = 600\n" + numbered(20) + "def expire(entry):\n    return entry.age > TTL_SECONDS\n" + numbered(
    10, "tail")
CLAIM = "The cache holds an entry for ten minutes."
DAY_MS = 86_400_000


# -- homes with a repository ----------------------------------------------------------------------------------

@pytest.fixture
def git(tmp_path: Path) -> GitRepo:
    g = GitRepo(tmp_path / "server")
    g.write("src/cache.py", CACHE)
    g.write("src/other.py", numbered(30, "other"))
    g.commit("first")
    return g


def _home(tmp_path: Path, repo_path: Path, *, llm: str | None = None, poll: str | None = None):
    repo = {"path": str(repo_path)} | ({"poll_interval": poll} if poll else {})
    config = config_with(repositories={"server": repo})
    if llm is not None:
        config["providers"] = {"llm": {"base_url": llm, "model": "judge-model", "timeout_s": 20}}
    return new_home(tmp_path / "home", config)


@pytest.fixture
def node(tmp_path: Path, git: GitRepo):
    with Node.open(_home(tmp_path, git.path)) as n:
        yield n


@pytest.fixture
def page(node) -> str:
    return KnowledgeBase(node).create_page("ENG", "Caching", "how the cache works", actor="alex").id


def _cite(git: GitRepo, path: str, lines: tuple[int, int], quote: str | None = None) -> dict:
    out = {"repository": "server", "path": path, "lines": list(lines), "commit": git.git("rev-parse", "HEAD").strip()}
    return out | ({"quote": quote} if quote else {})


def _add(node, page: str, body: str, *cites: dict, actor: str = "alex"):
    with EntryBank(node) as bank:
        return bank.add(page, body, citations=list(cites), actor=actor)


def _show(node, entry_id: str):
    with EntryBank(node) as bank:
        return bank.show(entry_id)


def _needs_person(node) -> dict[str, list[str]]:
    with EntryBank(node) as bank:
        return {n.entry.id: n.reasons for n in bank.needs_person()}


def one_pass(node, duty) -> DutyReport:
    """One pass of `duty` through the runner (its lease, its cursor in the duties table), which must run clean."""
    runner = DutyRunner(node, [duty], label="test")
    try:
        report = runner.run_one(duty, stop=threading.Event())
    finally:
        runner.close()
    assert report.ran and not report.error, report.line()
    return report


def _recheck(node, **kw) -> DutyReport:
    return one_pass(node, EntryRecheckDuty(node, **kw))


def _holds_at_head(git: GitRepo, citation) -> bool:
    """A re-anchored citation passes the write check at the commit it was carried to."""
    anchor = citation.anchor or {"path": citation.citation["path"], "lines": citation.citation["lines"]}
    with Repository("server", git.path) as repo:
        cit = CodeCitation("server", anchor["path"], *anchor["lines"], citation.commit, citation.citation.get("quote"))
        return check_code(1, cit, repo).outcome == HOLDS


def _seq(node) -> int:
    return node.applied_seq()


# -- the recheck duty: the code moves ---------------------------------------------------------------------------

def test_the_duties_are_on_the_one_runner_in_tick_order(node):
    names = [d.name for d in default_duties(node)]
    assert names[names.index(ENTRY_DECAY):][:5] == [ENTRY_DECAY, ENTRY_RECHECK, TRIAGE, UPKEEP, PAGE_REFRESH]
    assert {d.scope for d in default_duties(node) if d.name in (ENTRY_DECAY, ENTRY_RECHECK)} == {"fleet"}
    # the poll interval of company.toml is the duty's interval (default 5m)
    assert EntryRecheckDuty(node).interval_s == 300


def test_shifted_lines_are_re_anchored_and_still_held_and_an_untouched_file_writes_nothing(node, page, git):
    entry = _add(node, page, CLAIM, _cite(git, "src/cache.py", (22, 23), "return entry.age > TTL_SECONDS"))
    other = _add(node, page, "Other things hold.", _cite(git, "src/other.py", (3, 4)))
    git.write("src/cache.py", "import time\n# the cache\n" + CACHE)      # two lines above: the range shifts
    head = git.commit("shift")
    report = _recheck(node)
    counts = report.result.counts
    assert (counts["reanchored"], counts["held"], counts["records"]) == (1, 1, 1)
    [c] = _show(node, entry.id).citations
    assert (c.result, c.commit, c.anchor) == ("shifted", head, {"path": "src/cache.py", "lines": [24, 25]})
    assert _show(node, entry.id).tier == GROUNDED and _holds_at_head(git, c)
    # the untouched file's citation keeps its check from the write: nothing was written for it
    assert [len(c.checks) for c in EntryBank(node).show(other.id).citations] == [1]
    # a pass with nothing new writes nothing: the log grows with the code's changes, not with the polls
    before = _seq(node)
    assert _recheck(node).result.counts.get("records", 0) == 0 and _seq(node) == before
    assert json.loads(node.conn.execute("SELECT cursor FROM duties WHERE name = ?",
                                        (ENTRY_RECHECK,)).fetchone()[0]) == {"heads": {"server": head}}


def test_the_next_jump_starts_at_the_head_the_last_pass_checked(node, page, git):
    """Citations written at different commits, their file the same since: one jump (two git diffs) for all."""
    early = _add(node, page, CLAIM, _cite(git, "src/cache.py", (22, 23)))
    git.write("src/other.py", "# elsewhere\n" + numbered(30, "other"))
    git.commit("another file")
    late = _add(node, page, "Expiry compares ages.", _cite(git, "src/cache.py", (22, 22)))
    duty = EntryRecheckDuty(node)
    runner = DutyRunner(node, [duty], label="test")
    try:
        stop = threading.Event()
        assert runner.run_one(duty, stop=stop).result.counts == {"held": 2}    # nothing written: both at c0/c1
        git.write("src/cache.py", "# top\n" + CACHE)
        head = git.commit("shift")
        repo = duty._repos["server"]
        calls = repo.git_calls
        duty.force = True
        runner.run_one(duty, stop=stop)
        assert repo.git_calls - calls == 2          # one --name-status and one -U0 diff, from the last head
    finally:
        runner.close()
    assert [(c.result, c.commit, c.anchor["lines"]) for e in (early, late) for c in _show(node, e.id).citations] == [
        ("shifted", head, [23, 24]), ("shifted", head, [23, 23])]


def test_only_the_default_branch_is_watched(tmp_path, git):
    with Node.open(_home(tmp_path, git.path)) as node:
        page = KnowledgeBase(node).create_page("ENG", "Caching", "", actor="alex").id
        entry = _add(node, page, CLAIM, _cite(git, "src/cache.py", (22, 23)))
        git.git("checkout", "-q", "-b", "feature")                  # the checkout moves to another branch
        git.write("src/cache.py", "# top\n" + CACHE)
        git.commit("on a feature branch")
        with open(node.home.config_file, "a", encoding="utf-8") as f:
            f.write('default_branch = "main"\n')                    # [repositories.server] is the file's last table
        node.refresh_config()
        assert node.company.repositories["server"].default_branch == "main"
        before = _seq(node)
        assert _recheck(node).result.counts == {"held": 1} and _seq(node) == before
        git.git("checkout", "-q", "main")
        git.git("merge", "-q", "--ff-only", "feature")
        _recheck(node)
        assert _show(node, entry.id).citations[0].result == "shifted"


def test_rewritten_lines_without_a_model_ask_a_person_and_change_nothing_else(node, page, git):
    entry = _add(node, page, CLAIM, _cite(git, "src/cache.py", (1, 1), "TTL_SECONDS = 600"))
    git.write("src/cache.py", CACHE.replace("TTL_SECONDS = 600", "TTL_SECONDS = 300"))
    git.commit("shorter")
    counts = _recheck(node).result.counts
    assert (counts["changed"], counts["needs_person"], counts.get("disputed", 0)) == (1, 1, 0)
    shown = _show(node, entry.id)
    assert (shown.status, shown.tier, shown.citations[0].result) == ("STANDING", UNGROUNDED, "changed")
    assert "no chat model is configured" in shown.citations[0].message
    assert _needs_person(node)[entry.id] == ["citation 1: the cited lines changed"]
    # a person decides: the next pass leaves it as it is
    assert _recheck(node).result.counts.get("records", 0) == 0


def test_lines_moved_elsewhere_in_the_file_are_found_once_and_re_anchored(node, page, git):
    entry = _add(node, page, "Expiry compares the age with TTL_SECONDS.",
                 _cite(git, "src/cache.py", (22, 23)))
    lines = CACHE.splitlines(keepends=True)
    block = lines[21:23]
    rest = lines[:21] + lines[23:]
    rest[5] = "line 5 rewritten\n"                                     # an edit above, too
    git.write("src/cache.py", "".join(rest + ["\n"] + block))        # the function cut and pasted at the end
    head = git.commit("move expire")
    assert _recheck(node).result.counts["moved"] == 1
    [c] = _show(node, entry.id).citations
    assert (c.result, c.commit, c.anchor) == ("moved", head, {"path": "src/cache.py", "lines": [33, 34]})
    assert _holds_at_head(git, c) and _show(node, entry.id).tier == GROUNDED


def test_a_renamed_file_is_followed(node, page, git):
    entry = _add(node, page, CLAIM, _cite(git, "src/cache.py", (22, 23), "entry.age > TTL_SECONDS"))
    git.move("src/cache.py", "src/store/cache.py")
    git.write("src/store/cache.py", "# moved\n" + CACHE)
    head = git.commit("rename")
    report = _recheck(node)
    assert report.result.counts["followed"] == 1
    [c] = _show(node, entry.id).citations
    assert (c.result, c.commit, c.anchor) == ("shifted", head, {"path": "src/store/cache.py", "lines": [23, 24]})
    assert "src/cache.py → src/store/cache.py" in c.message and _holds_at_head(git, c)
    # the next change is read at the new path, from where the last pass left it
    git.write("src/store/cache.py", "# moved\n# twice\n" + CACHE)
    head2 = git.commit("another line")
    _recheck(node)
    [c] = _show(node, entry.id).citations
    assert (c.result, c.commit, c.anchor) == ("shifted", head2, {"path": "src/store/cache.py", "lines": [24, 25]})


def test_a_deleted_file_asks_a_person(node, page, git):
    entry = _add(node, page, CLAIM, _cite(git, "src/cache.py", (1, 1)))
    git.remove("src/cache.py")
    git.commit("drop the cache")
    counts = _recheck(node).result.counts
    assert (counts["gone"], counts["needs_person"]) == (1, 1)
    shown = _show(node, entry.id)
    assert (shown.status, shown.citations[0].result) == ("STANDING", "gone")
    assert _needs_person(node)[entry.id] == ["citation 1: the cited lines are gone"]


def test_a_proposed_entry_is_rechecked_and_a_disputed_one_is_left_alone(node, page, git):
    proposed = _add(node, page, CLAIM, _cite(git, "src/cache.py", (22, 23)), actor="eng-bot")
    disputed = _add(node, page, "Expiry is strict.", _cite(git, "src/cache.py", (22, 22)))
    EntryBank(node).dispute(disputed.id, actor="alex", reason="not strict")
    git.write("src/cache.py", "# top\n" + CACHE)
    git.commit("shift")
    _recheck(node)
    assert _show(node, proposed.id).citations[0].result == "shifted"
    assert [len(c.checks) for c in _show(node, disputed.id).citations] == [1]


def test_a_citation_written_not_read_yet_is_read_by_the_duty(tmp_path):
    source = GitRepo(tmp_path / "source")
    source.write("src/cache.py", CACHE)
    sha = source.commit("first")
    checkout = tmp_path / "server"
    checkout.mkdir()                                       # configured, but not a repository yet
    with Node.open(_home(tmp_path, checkout)) as node:
        page = KnowledgeBase(node).create_page("ENG", "Caching", "", actor="alex").id
        good = {"repository": "server", "path": "src/cache.py", "lines": [1, 1], "commit": sha,
                "quote": "TTL_SECONDS = 600"}
        entry = _add(node, page, CLAIM, good)
        wrong = _add(node, page, "Expiry is by minutes.", good | {"quote": "TTL_MINUTES"})
        assert entry.citations[0].result == "not_read_yet" and entry.tier == UNGROUNDED
        # still unreadable: nothing written, said
        report = _recheck(node)
        assert report.result.counts["not_read"] == 2 and report.result.counts.get("records", 0) == 0
        assert "not read" in report.result.summary
        subprocess.run(["git", "clone", "-q", str(source.path), str(checkout)], check=True, capture_output=True)
        counts = _recheck(node).result.counts
        assert (counts["read"], counts["held"], counts["changed"]) == (2, 1, 1)
        shown = _show(node, entry.id)
        assert (shown.citations[0].result, shown.tier) == ("held", GROUNDED)
        bad = _show(node, wrong.id).citations[0]
        assert bad.result == "changed" and "does not hold at its own commit" in bad.message
        assert "the quote is not in lines 1-1" in bad.message
        assert _needs_person(node)[wrong.id] == ["citation 1: the cited lines changed"]


def test_a_repository_unreadable_at_the_poll_writes_nothing_and_says_so(node, page, git, tmp_path):
    entry = _add(node, page, CLAIM, _cite(git, "src/cache.py", (1, 1)))
    git.write("src/cache.py", "# top\n" + CACHE)
    git.commit("shift")
    hidden = tmp_path / "hidden"
    git.path.rename(hidden)
    git.path.mkdir()
    before = _seq(node)
    report = _recheck(node)
    assert report.result.counts["not_read"] == 1 and _seq(node) == before
    assert "repository 'server' not read" in report.result.status["said"][0]
    git.path.rmdir()
    hidden.rename(git.path)
    _recheck(node)
    assert _show(node, entry.id).citations[0].result == "shifted"


def test_each_repository_is_looked_at_on_its_poll_interval(tmp_path, git):
    with Node.open(_home(tmp_path, git.path, poll="10m")) as node:
        page = KnowledgeBase(node).create_page("ENG", "Caching", "", actor="alex").id
        entry = _add(node, page, CLAIM, _cite(git, "src/cache.py", (1, 1)))
        duty = EntryRecheckDuty(node)
        assert duty.interval_s == 600
        runner = DutyRunner(node, [duty], label="test")
        try:
            stop = threading.Event()
            assert runner.run_one(duty, stop=stop).result.counts == {"held": 1}
            git.write("src/cache.py", "# top\n" + CACHE)
            git.commit("shift")
            # within its interval the repository is not looked at again
            assert runner.run_one(duty, stop=stop).result.summary == "no repository due yet"
            assert _show(node, entry.id).citations[0].result == "held"
        finally:
            runner.close()
        _recheck(node, force=True)                          # `crewlet entry recheck`: every repository now
        assert _show(node, entry.id).citations[0].result == "shifted"


# -- the recheck duty: a chat model judges rewritten lines --------------------------------------------------------

@pytest.fixture
def judged(tmp_path: Path, git: GitRepo):
    with ChatServer(model="judge-model") as server, Node.open(_home(tmp_path, git.path, llm=server.url)) as n:
        page = KnowledgeBase(n).create_page("ENG", "Caching", "", actor="alex").id
        yield server, n, page


def _rewrite_ttl(git: GitRepo, value: str = "300") -> str:
    git.write("src/cache.py", CACHE.replace("TTL_SECONDS = 600", f"TTL_SECONDS = {value}"))
    return git.commit("ttl")


def test_a_model_that_finds_the_claim_contradicted_disputes_the_entry(judged, git):
    server, node, page = judged
    entry = _add(node, page, CLAIM, _cite(git, "src/cache.py", (1, 1), "TTL_SECONDS = 600"))
    head = _rewrite_ttl(git)
    server.script = [Reply('{"verdict": "contradicts", "reason": "TTL is now 300 seconds, five minutes."}')]
    report = _recheck(node)
    assert (report.result.counts["changed"], report.result.counts["disputed"]) == (1, 1)
    assert report.result.status["disputed"] == [entry.id]
    # what the model was shown: the claim, the lines as they were and as they are
    sent = server.bodies[0]["messages"][1]["content"]
    assert CLAIM in sent and "TTL_SECONDS = 600" in sent and "TTL_SECONDS = 300" in sent
    shown = _show(node, entry.id)
    assert (shown.status, shown.status_by, shown.citations[0].result) == ("DISPUTED", SYSTEM_ACTOR, "changed")
    assert shown.status_reason == (f"the code it cites changed (src/cache.py lines 1-1 at {head[:7]}) and judge-model "
                                   "judged it contradicts the claim: TTL is now 300 seconds, five minutes.")
    last = shown.history[-1]
    assert (last["actor"], last["actor_kind"], last["action"]) == (SYSTEM_ACTOR, "system", "dispute")
    assert _needs_person(node)[entry.id][0].startswith("disputed: the code it cites changed")


def test_a_model_that_finds_the_claim_still_supported_keeps_it_grounded_at_the_new_lines(judged, git):
    server, node, page = judged
    entry = _add(node, page, "Entries expire by TTL_SECONDS.", _cite(git, "src/cache.py", (1, 1)))
    head = _rewrite_ttl(git)
    server.script = [Reply('```json\n{"verdict": "supports", "reason": "Still a TTL in seconds."}\n```')]
    counts = _recheck(node).result.counts
    assert (counts["changed"], counts["judged_held"], counts.get("needs_person", 0)) == (1, 1, 0)
    shown = _show(node, entry.id)
    [c] = shown.citations
    assert (shown.status, shown.tier, c.result, c.commit) == ("STANDING", GROUNDED, "held", head)
    assert "judge-model judged they still support the claim: Still a TTL in seconds." in c.message
    assert entry.id not in _needs_person(node)


@pytest.mark.parametrize("reply, said", [
    (Reply("I think the claim is probably fine."), "holds no JSON verdict"),
    (Reply('{"verdict": "maybe", "reason": "hard to say"}'), "'maybe' is not one of supports, contradicts, unclear"),
    (Reply(garbage=b"<html>oops</html>"), "the model gave no verdict (garbage)"),
    (Reply(status=500), "the model gave no verdict (http)"),
    (Reply(refusal="I cannot help with that."), "the model refused to judge"),
])
def test_a_broken_answer_is_said_and_changes_nothing_but_asking_a_person(judged, git, reply, said):
    server, node, page = judged
    entry = _add(node, page, CLAIM, _cite(git, "src/cache.py", (1, 1)))
    _rewrite_ttl(git)
    server.script = [reply]
    report = _recheck(node)
    counts = report.result.counts
    assert (counts["judge_failed"], counts["needs_person"], counts.get("disputed", 0)) == (1, 1, 0)
    assert any(said in line for line in report.result.status["said"]), report.result.status["said"]
    shown = _show(node, entry.id)
    assert (shown.status, shown.citations[0].result) == ("STANDING", "changed")
    assert said in shown.citations[0].message and "a person decides" in shown.citations[0].message
    assert _needs_person(node)[entry.id] == ["citation 1: the cited lines changed"]


def test_an_entry_a_person_archived_mid_pass_is_not_disputed_and_the_pass_goes_on(judged, git):
    server, node, page = judged
    entry = _add(node, page, CLAIM, _cite(git, "src/cache.py", (1, 1)))
    other = _add(node, page, "Other things hold.", _cite(git, "src/other.py", (3, 4)))
    _rewrite_ttl(git)
    git.write("src/other.py", "# top\n" + numbered(30, "other"))
    git.commit("and the other file")
    server.script = [Reply('{"verdict": "contradicts", "reason": "TTL is 300 now."}')]
    archived = []

    def progress(_duty: str, done: int, total: int, label: str) -> None:
        if not archived:        # the first word of the pass: the entries are read; a person archives one now
            archived.append(EntryBank(node).archive(entry.id, actor="alex", reason="out of date").status)

    duty = EntryRecheckDuty(node)
    runner = DutyRunner(node, [duty], label="test")
    try:
        report = runner.run_one(duty, stop=threading.Event(), progress=progress)
    finally:
        runner.close()
    assert archived == ["ARCHIVED"] and not report.error
    counts = report.result.counts
    assert (counts.get("disputed", 0), counts["refused"], report.result.status["disputed"]) == (0, 1, [])
    shown = _show(node, entry.id)
    assert (shown.status, shown.status_reason, shown.citations[0].result) == ("ARCHIVED", "out of date", "changed")
    assert _show(node, other.id).citations[0].result == "shifted"


def test_an_unclear_verdict_asks_a_person(judged, git):
    server, node, page = judged
    entry = _add(node, page, CLAIM, _cite(git, "src/cache.py", (1, 1)))
    _rewrite_ttl(git)
    server.script = [Reply('{"verdict": "unclear", "reason": "The TTL moved to config."}')]
    assert _recheck(node).result.counts["needs_person"] == 1
    shown = _show(node, entry.id)
    assert shown.status == "STANDING" and "neither support nor contradict the claim" in shown.citations[0].message


def test_judgments_past_the_pass_budget_wait_for_the_next_pass(judged, git):
    server, node, page = judged
    a = _add(node, page, CLAIM, _cite(git, "src/cache.py", (1, 1)))
    b = _add(node, page, "Entries expire by TTL_SECONDS.", _cite(git, "src/cache.py", (1, 1)))
    _rewrite_ttl(git)
    server.default = Reply('{"verdict": "supports", "reason": "fine"}')
    runner = DutyRunner(node, [EntryRecheckDuty(node, max_judged=1)], label="test")
    try:
        reports = runner.run_until_idle()
    finally:
        runner.close()
    assert reports[0].more and reports[0].result.counts["left_for_next_pass"] == 1
    assert server.requests == 2
    assert {_show(node, e.id).citations[0].result for e in (a, b)} == {"held"}


# -- `crewlet entry recheck` ------------------------------------------------------------------------------------

def _crewlet(home: Path, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, CREWLET_HOME=str(home), PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "crewlet_tui.cli", *args], env=env, capture_output=True, text=True,
                          timeout=120)


def test_crewlet_entry_recheck_runs_it_now_and_sums_it_up(node, page, git):
    shifted = _add(node, page, CLAIM, _cite(git, "src/cache.py", (22, 23)))
    changed = _add(node, page, "The TTL is 600 seconds.", _cite(git, "src/cache.py", (1, 1)))
    kept = _add(node, page, "Other things hold.", _cite(git, "src/other.py", (3, 4)))
    git.write("src/cache.py", "# top\n" + CACHE.replace("TTL_SECONDS = 600", "TTL_SECONDS = 300"))
    head = git.commit("shift and rewrite")
    home = node.home.root
    node.close()
    out = _crewlet(home, "entry", "recheck", "--json")
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    assert {k: got["counts"][k] for k in ("held", "reanchored", "changed", "needs_person", "disputed")} == {
        "held": 1, "reanchored": 1, "changed": 1, "needs_person": 1, "disputed": 0}
    assert got["heads"] == {"server": head}
    git.write("src/other.py", "# top\n" + numbered(30, "other"))
    head2 = git.commit("shift the other file")
    human = _crewlet(home, "entry", "recheck")
    assert human.returncode == 0, human.stderr
    lines = [" ".join(line.split()) for line in human.stdout.splitlines()]
    assert f"server: checked at {head2[:7]}" in lines
    assert {"held where they were: 1", "re-anchored (lines shifted): 1", "changed (lines rewritten): 0",
            "waiting for a person: 0", "1 check written"} <= set(lines), lines
    again = _crewlet(home, "entry", "recheck")
    assert again.returncode == 0 and "nothing new since the last recheck: nothing written" in again.stdout
    with Node.open(node.home) as again:
        assert _show(again, shifted.id).citations[0].result == "shifted"
        assert _show(again, changed.id).citations[0].result == "changed"
        assert [c["result"] for c in _show(again, kept.id).citations[0].checks] == ["held", "shifted"]
    assert _crewlet(home, "entry", "recheck", "--help").returncode == 0
    assert _crewlet(home, "entry", "recheck", "--bogus").returncode == 2


def test_crewlet_entry_recheck_leaves_a_recheck_running_elsewhere_and_says_what_it_could_not_read(node, page, git,
                                                                                                   tmp_path):
    _add(node, page, CLAIM, _cite(git, "src/cache.py", (1, 1)))
    holder = DutyRunner(node, [EntryRecheckDuty(node)], label="the app")
    assert holder.leases[ENTRY_RECHECK].acquire() is None           # the app's worker holds the duty
    try:
        busy = _crewlet(node.home.root, "entry", "recheck")
        assert busy.returncode == 1 and "the recheck runs elsewhere just now" in busy.stderr
        assert "the app" in busy.stderr and len(busy.stderr.strip().splitlines()) == 1
    finally:
        holder.close()
    git.write("src/cache.py", "# top\n" + CACHE)
    git.commit("shift")
    git.path.rename(tmp_path / "hidden")
    git.path.mkdir()
    unread = _crewlet(node.home.root, "entry", "recheck")
    assert unread.returncode == 1 and "not read (repository unreadable): 1" in " ".join(unread.stdout.split())
    assert "1 citation not read: repository 'server' not read" in " ".join(unread.stderr.split())


def test_crewlet_entry_recheck_without_repositories_says_so(tmp_path):
    home = new_home(tmp_path / "bare")
    out = _crewlet(home.root, "entry", "recheck")
    assert out.returncode == 0 and "no repositories configured ([repositories.NAME] in company.toml)" in out.stdout


# -- the decay duty --------------------------------------------------------------------------------------------

def _iso(ms: int) -> str:
    return from_ms(ms).isoformat().replace("+00:00", "Z")


def _aged_entry(node, page: str, body: str, *, at: int, by: str = "agent", cites: list[dict] | None = None,
                checks: list[dict] | None = None) -> str:
    """An entry written at `at` (the writer's clock): what a drill of old knowledge starts from."""
    entry_id = records.new_id()
    rec = records.entry_add("eng-bot" if by == "agent" else "alex", entry_id=entry_id, page_id=page, kind="FACT",
                            body=body, by=by, citations=cites or [], checks=checks or [])
    out = node.submit_one(Record(rec.type, rec.op_id, rec.actor, at, rec.payload))
    assert out.status == "applied", out
    return entry_id


def _decay(node) -> DutyReport:
    return one_pass(node, EntryDecayDuty(node))


def _status(node, entry_id: str) -> str:
    return node.conn.execute("SELECT status FROM entries WHERE id = ?", (entry_id,)).fetchone()[0]


@pytest.fixture
def plain(tmp_path: Path):
    with Node.open(new_home(tmp_path / "plain")) as n:
        yield n, KnowledgeBase(n).create_page("ENG", "Caching", "", actor="alex").id


def test_decay_archives_a_proposed_entry_past_its_expiry_on_the_calendar(plain, monkeypatch):
    node, page = plain
    entry = _add(node, page, CLAIM, actor="eng-bot")
    created = _show(node, entry.id).created_at
    monkeypatch.setenv("CREWLET_NOW", _iso(created + 29 * DAY_MS))
    report = _decay(node)
    assert report.result.counts["archived"] == 0 and _status(node, entry.id) == "PROPOSED"
    monkeypatch.setenv("CREWLET_NOW", _iso(created + 31 * DAY_MS))
    report = _decay(node)
    assert report.result.counts["archived"] == 1 and _status(node, entry.id) == "ARCHIVED"
    shown = _show(node, entry.id)
    assert (shown.status_by, shown.history[-1]["actor_kind"]) == (SYSTEM_ACTOR, "system")
    assert shown.status_reason == ("decay: proposed 31 days ago and not accepted within "
                                   "PAGE_PROPOSED_ENTRY_EXPIRY_DAYS (30)")


def test_a_persons_accept_appended_between_decays_look_and_its_write_wins(plain, monkeypatch):
    """On a shared log another node's accept can be appended after decay looked and before its archive is: the
    archive then finds the entry STANDING, not the PROPOSED it judged, and leaves it (a no-op saying why)."""
    from core.bank.decay import ARCHIVED, archive_record, decide
    from core.sections.bank import BankSettings

    node, page = plain
    entry = _add(node, page, CLAIM, actor="eng-bot")
    now = _show(node, entry.id).created_at + 31 * DAY_MS
    with node.lock:
        looked = [d for d in decide(node.conn, BankSettings(), now) if d.outcome == ARCHIVED]
    assert [d.entry_id for d in looked] == [entry.id]
    EntryBank(node).accept(entry.id, actor="alex")               # the person's accept lands first
    out = node.submit_one(archive_record(looked[0]))
    assert out.status == "noop" and "is STANDING now, not PROPOSED" in (out.reason or "")
    assert _status(node, entry.id) == "STANDING"


def test_decay_archives_a_standing_entry_not_served_within_its_window(plain, monkeypatch):
    node, page = plain
    now = _show(node, _add(node, page, "A first fact.").id).created_at
    idle = _aged_entry(node, page, "Nobody asks about this.", at=now - 100 * DAY_MS, by="person")
    served = _aged_entry(node, page, "Agents ask about this.", at=now - 100 * DAY_MS, by="person")
    serve = records.entry_serve("eng-bot", via="load_context", entries=[{"entry_id": served, "rank": 1}])
    node.submit_one(Record(serve.type, serve.op_id, serve.actor, now - 20 * DAY_MS, serve.payload))
    served_long_ago = _aged_entry(node, page, "Agents asked about this once.", at=now - 200 * DAY_MS, by="person")
    old = records.entry_serve("eng-bot", via="load_context", entries=[{"entry_id": served_long_ago, "rank": 1}])
    node.submit_one(Record(old.type, old.op_id, old.actor, now - 95 * DAY_MS, old.payload))
    monkeypatch.setenv("CREWLET_NOW", _iso(now))
    report = _decay(node)
    assert report.result.counts["archived"] == 2
    assert (_status(node, idle), _status(node, served), _status(node, served_long_ago)) == (
        "ARCHIVED", "STANDING", "ARCHIVED")
    assert _show(node, idle).status_reason == ("decay: never served in 100 days in use: not served within "
                                               "PAGE_STANDING_ENTRY_DECAY_DAYS (90)")
    assert _show(node, served_long_ago).status_reason.startswith("decay: last served 95 days ago")
    # the window counts from when a person put it in use: an old proposal accepted today is not stale
    late = _aged_entry(node, page, "Accepted only today.", at=now - 100 * DAY_MS)
    EntryBank(node).accept(late, actor="alex")
    monkeypatch.setenv("CREWLET_NOW", _iso(now + DAY_MS))        # the next night
    _decay(node)
    assert _status(node, late) == "STANDING"


def test_decay_keeps_an_entry_whose_citation_held_within_the_window(plain, monkeypatch):
    node, page = plain
    now = _show(node, _add(node, page, "A first fact.").id).created_at
    cite = [{"link": "acme/api#12", "kind": "issue"}]
    held = [{"index": 1, "result": "held"}]
    checked = _aged_entry(node, page, "Checked lately.", at=now - 40 * DAY_MS, cites=cite, checks=held)
    unchecked = _aged_entry(node, page, "Checked long ago.", at=now - 40 * DAY_MS, cites=cite, checks=held)
    lost = _aged_entry(node, page, "Checked lately, and lost.", at=now - 40 * DAY_MS, cites=cite, checks=held)
    EntryBank(node).record_check(checked, 1, "shifted", commit="c" * 40, blob="d" * 40)   # now: within the window
    EntryBank(node).record_check(lost, 1, "gone", commit="c" * 40)                       # its last check: gone
    monkeypatch.setenv("CREWLET_NOW", _iso(now))
    report = _decay(node)
    assert (_status(node, checked), _status(node, unchecked), _status(node, lost)) == (
        "PROPOSED", "ARCHIVED", "ARCHIVED")
    assert report.result.counts["kept_held"] == 1


def test_decay_keeps_an_entry_a_page_links_to_outside_code(plain, monkeypatch):
    node, page = plain
    kb = KnowledgeBase(node)
    now = _show(node, _add(node, page, "A first fact.").id).created_at
    linked = _aged_entry(node, page, "Linked from a page.", at=now - 40 * DAY_MS)
    in_code = _aged_entry(node, page, "Linked only inside code.", at=now - 40 * DAY_MS)
    from_trash = _aged_entry(node, page, "Linked from a trashed page.", at=now - 40 * DAY_MS)
    kb.create_page("ENG", "Runbook", f"See [the TTL](#/knowledge/entries/{linked}).\n\n"
                   f"```\n#/knowledge/entries/{in_code}\n```\n", actor="alex")
    trashed = kb.create_page("ENG", "Old runbook", f"[x](#/knowledge/entries/{from_trash})", actor="alex")
    kb.trash_page(trashed.id, actor="alex")
    monkeypatch.setenv("CREWLET_NOW", _iso(now))
    report = _decay(node)
    assert (_status(node, linked), _status(node, in_code), _status(node, from_trash)) == (
        "PROPOSED", "ARCHIVED", "ARCHIVED")
    assert report.result.counts["kept_linked"] == 1


def test_decay_never_archives_a_verified_entry_and_asks_a_person(plain, monkeypatch):
    node, page = plain
    now = _show(node, _add(node, page, "A first fact.").id).created_at
    entry = _aged_entry(node, page, "Verified long ago.", at=now - 200 * DAY_MS, by="person")
    verify = records.entry_status("alex", entry_id=entry, action="verify", by="person")
    node.submit_one(Record(verify.type, verify.op_id, verify.actor, now - 150 * DAY_MS, verify.payload))
    monkeypatch.setenv("CREWLET_NOW", _iso(now))
    report = _decay(node)
    assert report.result.counts["ask_person"] == 1 and _status(node, entry) == "STANDING"
    reasons = _needs_person(node)[entry]
    assert reasons == ["decay: never served in 150 days in use: not served within PAGE_STANDING_ENTRY_DECAY_DAYS "
                       "(90); verified by alex, so a person decides whether to archive it"]


def test_decay_runs_on_its_cron_on_the_calendar_and_not_when_off(plain, monkeypatch):
    node, page = plain
    entry = _add(node, page, CLAIM, actor="eng-bot")
    created = _show(node, entry.id).created_at
    day = from_ms(created + 10 * DAY_MS).replace(hour=4, minute=0, second=0, microsecond=0)
    monkeypatch.setenv("CREWLET_NOW", day.isoformat())
    assert _decay(node).result.counts["archived"] == 0             # the first run: due at once, nothing stale
    # later that day 03:00 has not come since the last run: not due
    later = day + timedelta(days=30)
    monkeypatch.setenv("CREWLET_NOW", day.replace(hour=23).isoformat())
    assert _decay(node).result.summary.startswith("not due: next at ")
    monkeypatch.setenv("CREWLET_NOW", later.isoformat())
    assert _decay(node).result.counts["archived"] == 1 and _status(node, entry.id) == "ARCHIVED"


def test_a_drill_that_moved_the_calendar_ahead_does_not_stop_decay_once_it_ends(plain, monkeypatch):
    node, page = plain
    entry = _add(node, page, CLAIM, actor="eng-bot")
    monkeypatch.setenv("CREWLET_NOW", _iso(_show(node, entry.id).created_at + 10 * DAY_MS))
    _decay(node)                                    # the last run now stands ten days ahead of the real clock
    monkeypatch.delenv("CREWLET_NOW")
    report = _decay(node)
    assert report.result.summary.startswith("as of ") and _status(node, entry.id) == "PROPOSED"


def test_decay_off_does_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("PAGE_DECAY_CRON", "off")
    with Node.open(new_home(tmp_path / "off")) as node:
        page = KnowledgeBase(node).create_page("ENG", "Caching", "", actor="alex").id
        entry = _add(node, page, CLAIM, actor="eng-bot")
        monkeypatch.setenv("CREWLET_NOW", _iso(_show(node, entry.id).created_at + 400 * DAY_MS))
        assert _decay(node).result.summary == "off (PAGE_DECAY_CRON = off)"
        assert _status(node, entry.id) == "PROPOSED"


def test_decay_reads_its_windows_from_the_settings(tmp_path, monkeypatch):
    monkeypatch.setenv("PAGE_PROPOSED_ENTRY_EXPIRY_DAYS", "2")
    with Node.open(new_home(tmp_path / "short")) as node:
        page = KnowledgeBase(node).create_page("ENG", "Caching", "", actor="alex").id
        entry = _add(node, page, CLAIM, actor="eng-bot")
        monkeypatch.setenv("CREWLET_NOW", _iso(_show(node, entry.id).created_at + 3 * DAY_MS))
        _decay(node)
        assert _show(node, entry.id).status_reason.endswith("PAGE_PROPOSED_ENTRY_EXPIRY_DAYS (2)")
