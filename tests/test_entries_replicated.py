"""Entries across nodes (issue 35, "entries on a second node through sync and back after `log repair`"): every
entry record kind — an add with a code citation read in a real git repository and one not read yet, a repeat
folded (by the writer, and racing it, by the applier), a correction accepted, a verify, a dispute, an edit, an
archive, a recheck's citation check, a serve, a page's policy — written on one node reaches another through a
shared log directory (`crewlet sync join DIR`) and through NATS JetStream, with the same content digest on both
and the same entries read back; a node made from a snapshot holds them without applying their records; and a
`crewlet log repair` after the pages log lost or damaged any of them gives every one back, the digest unchanged,
on every node."""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from conftest import config_with, new_home
from test_log_repair import _flip_seq
from test_repos_support import GitRepo, numbered
from test_sync import cli, ok

from core.bank.entries import EntryBank
from core.bank.trust import GROUNDED, HUMAN_VERIFIED
from core.errors import Refused
from core.log import FileLog
from core.node import Node
from core.pages import records
from core.pages.service import KnowledgeBase
from core.paths import Home
from core.store.digest import content_digest

ENTRY_KINDS = ("entry.add", "entry.edit", "entry.status", "entry.corroborate", "entry.citation_check",
               "entry.serve", "page.policy", "page.about")
# a fixed instant for the entries' JSON (their ages are said against it)
NOW = 4_102_444_800_000


def _company(tmp_path: Path) -> tuple[dict[str, Any], GitRepo, str]:
    """The example company with two repositories: `server` (a real git checkout) and `mirror` (a folder that is no
    checkout: a citation there is written as not read yet)."""
    g = GitRepo(tmp_path / "server")
    g.write("src/cache.py", "TTL_SECONDS = 600\n" + numbered(9))
    sha = g.commit("first")
    (tmp_path / "mirror").mkdir()
    return config_with(repositories={"server": {"path": str(g.path)}, "mirror": {"path": str(tmp_path / "mirror")}}), \
        g, sha


def _write_every_entry_kind(home: Home, sha: str) -> dict[str, str]:
    """On `home`: a page's policy set, and every entry record kind, the ids of what was written returned."""
    with Node.open(home) as node, EntryBank(node) as bank:
        kb = KnowledgeBase(node)
        page = kb.create_page("ENG", "Caching", "how the cache works", actor="alex").id
        locked = kb.create_page("ENG", "Release Rules", "", actor="alex").id
        bank.set_policy(page, "open", actor="alex")
        bank.set_policy(page, "curated", actor="sam")
        cite = {"repository": "server", "path": "src/cache.py", "lines": [1, 1], "commit": sha, "quote": "TTL_SECONDS"}
        cached = bank.add(page, "The cache holds for ten minutes.", kind="gotcha", scope="server:src",
                          citations=[cite], distinct=True, actor="eng-bot")
        assert cached.citations[0].result == "held"
        deploys = bank.add(page, "Deploys happen on Tuesdays.", kind="CONVENTION",
                           citations=[{"link": "acme/api#12", "kind": "issue"}], distinct=True, actor="alex")
        # an exact repeat: entry.corroborate
        assert bank.add(page, "deploys  happen on TUESDAYS.", distinct=True, actor="eng-bot").folded
        racing = node.submit_one(records.entry_add("eng-bot", entry_id="racing-repeat-1", page_id=page, kind="FACT",
                                                   body="Deploys happen on tuesdays.", by="agent", citations=[],
                                                   budget=10))
        assert racing.result["folded"]                                                   # folded by the applier
        fix = bank.supersede(cached.id, "The cache holds for five minutes.", actor="eng-bot",
                             citations=[dict(cite, lines=[1, 2], quote="TTL_SECONDS = 600")])
        bank.accept(fix.id, actor="alex", reason="read cache.py")
        bank.verify(deploys.id, actor="sam")
        disputed = bank.add(page, "Retries double the load.", distinct=True, actor="eng-bot")
        bank.dispute(disputed.id, actor="alex", reason="they triple it")
        queue = bank.add(page, "The queue drains nightly.", distinct=True, actor="eng-bot")
        bank.edit(queue.id, body="The queue drains every night at 02:00.", kind="gotcha", actor="eng-bot",
                  reason="the hour")
        bank.archive(queue.id, actor="eng-bot")
        unread = bank.add(page, "The mirror keeps a week of builds.", distinct=True, actor="alex",
                          citations=[{"repository": "mirror", "path": "keep.txt", "lines": [1, 1], "commit": sha}])
        assert unread.citations[0].result == "not_read_yet"
        bank.record_check(unread.id, 1, "held", commit=sha, blob="b" * 40)                # the recheck duty read it
        bank.record_check(fix.id, 1, "shifted", commit=sha, blob="c" * 40,
                          anchor={"path": "src/cache.py", "lines": [2, 3]}, message="two lines above")
        bank.record_serve("eng-bot", "load_context", [bank.show(deploys.id), bank.show(fix.id)], query="cache",
                          run="run-1")
        bank.set_policy(locked, "locked", actor="alex")
        bank.link_page(page, module="server:src", actor="alex")
        bank.link_page(page, page_ref=locked, actor="alex")
        bank.link_page(page, page_ref=locked, remove=True, actor="sam")
        with pytest.raises(Refused):
            bank.add(locked, "Releases wait for a green build.", distinct=True, actor="eng-bot")
        return {"page": page, "locked": locked, "cached": cached.id, "deploys": deploys.id, "fix": fix.id,
                "disputed": disputed.id, "queue": queue.id, "unread": unread.id}


def _said(home: Home, page: str) -> tuple[str, list[dict[str, Any]], str, list[str]]:
    """(the content digest, every entry of the page as it says itself in JSON, the page's policy, its links)."""
    with Node.open(home) as node, EntryBank(node) as bank:
        assert node.damage is None, node.damage
        entries = [bank.show(e.id).to_json(NOW) for e in sorted(bank.entries(page, statuses=None), key=lambda e: e.id)]
        links = sorted(str(link) for link in bank.links(page))
        return content_digest(node.conn).content, entries, bank.policy(page), links


def _entry_seqs(log: Path) -> dict[int, str]:
    with FileLog(log, readonly=True) as flog:
        return {r.seq: r.type for r, _ in flog.read() if r.type in ENTRY_KINDS}


def _shared_fleet(tmp_path: Path) -> tuple[Home, Home, Path, str]:
    config, _g, sha = _company(tmp_path)
    a = new_home(tmp_path / "A", config)
    shared = tmp_path / "shared"
    ok(cli(a.root, "sync", "join", str(shared)))
    ok(cli(tmp_path / "B", "sync", "join", str(shared), "--operator", "sam"))
    return Home(a.root), Home(tmp_path / "B"), shared, sha


def _both_ways(a: Home, b: Home, ids: dict[str, str]) -> None:
    """What B writes reaches A: a person on B verifies, an agent on B repeats A's entry (a corroboration), and the
    LOCKED page set on A refuses B's agent in B's applier too."""
    with Node.open(b) as node, EntryBank(node) as bank:
        assert bank.policy(ids["locked"]) == "LOCKED"
        assert bank.verify(ids["fix"], actor="sam").tier == HUMAN_VERIFIED
        again = bank.add(ids["page"], "The cache holds for FIVE minutes.", distinct=True, actor="eng-bot")
        assert again.id == ids["fix"]
        out = node.submit_one(records.entry_add("eng-bot", entry_id="on-b-locked", page_id=ids["locked"], kind="FACT",
                                                body="Releases wait for a green build.", by="agent", citations=[]))
        assert (out.status, out.code) == ("refused", "locked")
    with Node.open(a) as node, EntryBank(node) as bank:
        shown = bank.show(ids["fix"])
        assert (shown.verified_by, shown.corroborations, shown.tier) == ("sam", 1, HUMAN_VERIFIED)


# -- a shared directory ------------------------------------------------------------------------------------------

def test_every_entry_kind_written_on_one_node_reads_the_same_on_another_through_a_shared_directory(tmp_path):
    a, b, shared, sha = _shared_fleet(tmp_path)
    ids = _write_every_entry_kind(a, sha)
    seen = set(_entry_seqs(shared / "pages.log").values())
    assert seen == set(ENTRY_KINDS), f"not written: {set(ENTRY_KINDS) - seen}"
    on_a, on_b = _said(a, ids["page"]), _said(b, ids["page"])
    assert on_a == on_b
    digest, entries, policy, links = on_b
    assert policy == "CURATED" and len(links) == 1
    by_id = {e["id"]: e for e in entries}
    assert (by_id[ids["cached"]]["status"], by_id[ids["fix"]]["status"]) == ("SUPERSEDED", "STANDING")
    assert by_id[ids["deploys"]]["corroborations"] == 2 and by_id[ids["deploys"]]["tier"] == HUMAN_VERIFIED
    assert by_id[ids["unread"]]["tier"] == GROUNDED           # read later by the recheck: held
    assert by_id[ids["fix"]]["citations"][0]["anchor"] == {"path": "src/cache.py", "lines": [2, 3]}
    with Node.open(b) as node:
        serves = [tuple(r) for r in node.conn.execute("SELECT entry_id, actor, via, rank FROM entry_serves "
                                                      "ORDER BY rank")]
    assert serves == [(ids["deploys"], "eng-bot", "load_context", 1), (ids["fix"], "eng-bot", "load_context", 2)]
    _both_ways(a, b, ids)
    assert _said(a, ids["page"]) == _said(b, ids["page"])
    # a node made from a snapshot of B holds every entry without applying their records
    snap = tmp_path / "b.snapshot"
    ok(cli(b.root, "sync", "snapshot", str(snap)))
    joined = json.loads(ok(cli(tmp_path / "C", "sync", "join", str(shared), "--snapshot", str(snap), "--json")))
    assert joined["joined"] == "new" and joined["applied"] == 0
    assert _said(Home(tmp_path / "C"), ids["page"]) == _said(a, ids["page"])


# -- NATS JetStream ----------------------------------------------------------------------------------------------

def test_every_entry_kind_reaches_a_node_on_jetstream_and_one_made_from_a_snapshot(tmp_path, nats_server):
    config, _g, sha = _company(tmp_path)
    a = new_home(tmp_path / "A", config)
    assert json.loads(ok(cli(a.root, "sync", "join", nats_server.url, "--json")))["joined"] == "first"
    a = Home(a.root)
    ids = _write_every_entry_kind(a, sha)
    out = json.loads(ok(cli(tmp_path / "B", "sync", "join", nats_server.url, "--operator", "sam", "--json")))
    assert out["joined"] == "new" and out["applied"] > 0
    b = Home(tmp_path / "B")
    assert _said(a, ids["page"]) == _said(b, ids["page"])
    _both_ways(a, b, ids)
    assert _said(a, ids["page"]) == _said(b, ids["page"])
    snap = tmp_path / "a.snapshot"
    ok(cli(a.root, "sync", "snapshot", str(snap)))
    with Node.open(a) as node, EntryBank(node) as bank:                 # written after the snapshot
        bank.archive(ids["disputed"], actor="alex", reason="superseded by the retry doc")
    joined = json.loads(ok(cli(tmp_path / "C", "sync", "join", nats_server.url, "--snapshot", str(snap), "--json")))
    assert joined["joined"] == "new" and joined["applied"] == 1
    c = Home(tmp_path / "C")
    assert _said(c, ids["page"]) == _said(a, ids["page"]) == _said(b, ids["page"])


# -- back after a repair -----------------------------------------------------------------------------------------

def test_a_repair_gives_back_each_entry_record_the_shared_log_lost_and_every_node_keeps_its_digest(tmp_path):
    """One flipped byte in each entry record of the shared log in turn, each repaired by `crewlet log repair` on A:
    every record given back (by A's database, or by B's where only B applied it), nothing lost, nothing rebuilt,
    and A, B and a fresh replay of the repaired log all hold the digest they held before."""
    a, b, shared, sha = _shared_fleet(tmp_path)
    ids = _write_every_entry_kind(a, sha)
    _both_ways(a, b, ids)
    with Node.open(b) as node, EntryBank(node) as bank:           # written on B, not yet applied by A
        bank.accept(ids["disputed"], actor="sam", reason="measured: it doubles")
        bank.record_serve("eng-bot", "get_page", [bank.show(ids["disputed"])])
    before = _said(b, ids["page"])
    seqs = _entry_seqs(shared / "pages.log")
    only_b = max(seqs)
    with Node.open(b) as node:
        refused_seqs = {r[0] for r in node.conn.execute("SELECT seq FROM applied_ops WHERE status != 'applied'")}
    assert refused_seqs & set(seqs)
    # B's last record first: A has not applied it yet (every repair ends with A opened, caught up)
    for seq in [only_b, *sorted(set(seqs) - {only_b})]:
        kind = seqs[seq]
        _flip_seq(shared / "pages.log", seq)
        out = json.loads(ok(cli(a.root, "log", "repair", "--yes", "--json")))
        assert (out["records_lost"], out["rebuilt"]) == (0, False), (seq, kind, out)
        [given] = out["rewritten"]
        # a refused record (B's agent on the LOCKED page) is given back as the outcome it was given
        assert (given["seq"], given["how"]) == (seq, "outcome" if seq in refused_seqs else "recovered"), (kind, given)
        if seq == only_b:
            assert given["source"] != "this node's database", given     # only B applied it: B's gave it back
    assert _said(a, ids["page"]) == before == _said(b, ids["page"])
    replay = tmp_path / "R"
    ok(cli(replay, "sync", "join", str(shared)))
    assert _said(Home(replay), ids["page"]) == before


def test_a_pages_log_that_lost_its_last_records_gets_every_entry_back_from_the_databases(tmp_path):
    """The shared log lost its tail (an older copy of the file put back): the entry records past it are given back
    by the databases that applied them, A's and B's digests stay, and the repaired log replays to them."""
    a, b, shared, sha = _shared_fleet(tmp_path)
    log = shared / "pages.log"
    with Node.open(a) as node:
        KnowledgeBase(node).create_page("ENG", "Before", "", actor="alex")
    older = log.read_bytes()
    ids = _write_every_entry_kind(a, sha)
    _both_ways(a, b, ids)
    before = _said(a, ids["page"])
    assert before == _said(b, ids["page"])
    log.write_bytes(older)
    os.utime(log)
    res = cli(a.root, "log", "repair", "--yes", "--json")
    out = json.loads(ok(res))
    assert out["records_lost"] == 0 and not out["rebuilt"]
    assert {r["how"] for r in out["rewritten"]} == {"recovered", "outcome"}     # outcome: B's refused record
    assert set(_entry_seqs(log)) <= {r["seq"] for r in out["rewritten"]}
    assert _said(a, ids["page"]) == before == _said(b, ids["page"])
    replay = tmp_path / "R"
    ok(cli(replay, "sync", "join", str(shared)))
    assert _said(Home(replay), ids["page"]) == before


def test_a_pages_log_file_lost_whole_is_written_again_with_every_entry_from_the_databases(tmp_path):
    """The shared pages.log itself is gone (deleted by mistake). `crewlet log check` says what a repair gives back
    rather than "no such file — check the path" (which no path a person can give fixes), and `crewlet log repair`
    — the first command run after the loss — writes it again from the databases that applied it: every entry
    back, A's and B's digests as before, and a fresh node replays the new log to the same digest."""
    a, b, shared, sha = _shared_fleet(tmp_path)
    ids = _write_every_entry_kind(a, sha)
    _both_ways(a, b, ids)
    before = _said(a, ids["page"])
    log = shared / "pages.log"
    with FileLog(log, readonly=True) as flog:
        last = flog.last_seq()
    log.unlink()
    check = cli(a.root, "log", "check", "--json")
    assert check.exit_code == 1, (check.stdout, check.stderr)
    [pages] = [r for r in json.loads(check.stdout)["logs"] if r["log"] == "pages"]
    assert pages["records_lost"] == 0 and pages["spots"][0]["records_given_back"] == pages["applied"]["seq"]
    out = json.loads(ok(cli(a.root, "log", "repair", "--yes", "--json")))
    assert out["records_lost"] == 0 and not out["rebuilt"]
    with FileLog(log, readonly=True) as flog:
        assert flog.last_seq() == last
    assert _said(a, ids["page"]) == before == _said(b, ids["page"])
    replay = tmp_path / "R"
    ok(cli(replay, "sync", "join", str(shared)))
    assert _said(Home(replay), ids["page"]) == before




def _purged_fleet(tmp_path: Path) -> tuple[Home, Home, Path, str]:
    """Two nodes; on A a page's entries — added, repeated (by the writer, and racing it: folded by the applier),
    edited twice, accepted, checked, served (alone, and beside an entry of a page that stays), its policy — and then
    the page purged, which takes every row under it. Returns
    (A, B, the shared directory, the page that stays)."""
    a, b, shared, sha = _shared_fleet(tmp_path)
    with Node.open(a) as node, EntryBank(node) as bank:
        kb = KnowledgeBase(node)
        gone = kb.create_page("ENG", "Old Cache", "", actor="alex").id
        kept = kb.create_page("ENG", "Queues", "", actor="alex").id
        bank.set_policy(gone, "open", actor="alex")
        bank.link_page(gone, space="ENG", actor="alex")
        bank.link_page(kept, page_ref=gone, actor="alex")
        first = bank.add(gone, "The old cache held for an hour.", citations=[{"link": "acme/api#4", "kind": "issue"}],
                         distinct=True, actor="eng-bot")
        bank.set_policy(gone, "curated", actor="alex")
        assert bank.add(gone, "the old cache held for an HOUR.", distinct=True, actor="eng-bot").folded
        repeats = (("The old cache held for an hour!", "The old cache held for ninety minutes."),
                   ("the old cache held for NINETY minutes.", "It held for two hours."))
        for n, (body, edited) in enumerate(repeats):
            # a repeat racing the writer's look, folded by the applier: the log keeps the text it repeated
            out = node.submit_one(records.entry_add("eng-bot", entry_id=f"racing-{n}", page_id=gone, kind="FACT",
                                                    body=body.replace("!", "."), by="agent", citations=[]))
            assert out.result["folded"] and out.result["entry_id"] == first.id
            bank.edit(first.id, body=edited, actor="eng-bot")
        bank.accept(first.id, actor="alex")
        bank.record_check(first.id, 1, "held", commit=sha, blob="e" * 40)
        stays = bank.add(kept, "The queue drains nightly.", distinct=True, actor="alex")
        bank.record_serve("eng-bot", "get_page", [bank.show(first.id)])
        bank.record_serve("eng-bot", "load_context", [bank.show(stays.id), bank.show(first.id)], query="cache")
        kb.trash_page(gone, actor="alex")
        kb.purge_page(gone, actor="alex")
    with Node.open(b) as node:
        assert node.conn.execute("SELECT count(*) FROM entries").fetchone()[0] == 1
        assert node.conn.execute("SELECT count(*) FROM entry_serves").fetchone()[0] == 1   # the kept page's
    return a, b, shared, kept


def test_entry_records_of_a_page_purged_since_are_given_back_each_in_turn(tmp_path):
    """The entry records of a page purged since, their rows gone with it: one flipped byte in each in turn, each
    given back (a stand-in that the purge then removes, proved by the replay), on both nodes the digest as before,
    nothing rebuilt."""
    a, b, shared, kept = _purged_fleet(tmp_path)
    before = (_said(a, kept), _said(b, kept))
    assert before[0] == before[1]
    seqs = _entry_seqs(shared / "pages.log")
    assert set(seqs.values()) == set(ENTRY_KINDS)
    for seq, kind in sorted(seqs.items()):
        _flip_seq(shared / "pages.log", seq)
        res = cli(a.root, "log", "repair", "--yes", "--json")
        out = json.loads(res.stdout)
        assert (res.exit_code, out["records_lost"], out["rebuilt"]) == (0, 0, False), (
            seq, kind, [r["why"] for r in out["rewritten"]])
    assert (_said(a, kept), _said(b, kept)) == before


def test_what_depends_on_order_is_decided_in_log_order_whichever_node_wrote_it(tmp_path):
    """B writes without having looked at A's latest records: its applier decides in the log's order, as A's does —
    an agent's second proposal past its budget (PAGE_PROPOSED_ENTRY_BUDGET = 1) refused, an exact repeat folded into
    A's entry, a person's accept of an entry A's person archived meanwhile refused — and both digests agree."""
    config, _g, _sha = _company(tmp_path)
    config["knowledge"] = {**config.get("knowledge", {}), "page_proposed_entry_budget": 1}
    a = new_home(tmp_path / "A", config)
    shared = tmp_path / "shared"
    ok(cli(a.root, "sync", "join", str(shared)))
    ok(cli(tmp_path / "B", "sync", "join", str(shared), "--operator", "sam"))
    a, b = Home(a.root), Home(tmp_path / "B")
    with Node.open(a) as node, EntryBank(node) as bank:
        page = KnowledgeBase(node).create_page("ENG", "Caching", "", actor="alex").id
        proposed = bank.add(page, "The cache holds for ten minutes.", distinct=True, actor="eng-bot")
    with Node.open(b, catch_up=False) as nb, Node.open(a) as na:
        bank_a = EntryBank(na)
        # A moves on while B has not looked: a person archives the proposal, and a standing fact is written
        bank_a.archive(proposed.id, actor="alex", reason="not what we measured")
        standing = bank_a.add(page, "Deploys happen on Tuesdays.", distinct=True, actor="alex")
        out = nb.submit_one(records.entry_add("eng-bot", entry_id="b-second", page_id=page, kind="FACT",
                                              body="The cache is per process.", by="agent", citations=[], budget=1))
        # applied after A's archive: eng-bot holds no proposal any more, so its budget allows this one
        assert out.status == "applied"
        out = nb.submit_one(records.entry_add("eng-bot", entry_id="b-third", page_id=page, kind="FACT",
                                              body="The cache is warmed at start.", by="agent", citations=[], budget=1))
        assert (out.status, out.code) == ("refused", "budget")
        out = nb.submit_one(records.entry_add("sam", entry_id="b-repeat", page_id=page, kind="FACT",
                                              body="deploys happen on tuesdays.", by="person", citations=[]))
        assert out.result == {"entry_id": standing.id, "page_id": page, "folded": True}
        out = nb.submit_one(records.entry_status("sam", entry_id=proposed.id, action="accept", by="person"))
        assert out.status == "applied" and out.result["from"] == "ARCHIVED"     # accept applies from ARCHIVED too
    assert _said(a, page) == _said(b, page)


def test_a_shared_directory_gone_whole_is_said_and_no_log_is_made_in_its_place(tmp_path):
    """Not a lost log: the directory itself is not there (not mounted, moved). The repair makes nothing where it
    was — a new empty log there would pass for the company's — and says which path is missing."""
    a, _b, shared, sha = _shared_fleet(tmp_path)
    _write_every_entry_kind(a, sha)
    shared.rename(tmp_path / "elsewhere")
    res = cli(a.root, "log", "repair", "--yes")
    assert res.exit_code == 1 and str(shared) in res.stderr and res.stderr.count("\n") == 1
    assert not shared.exists()
