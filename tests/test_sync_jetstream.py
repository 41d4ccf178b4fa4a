"""A company on NATS JetStream (issue 26): real nats-servers (tests/nats_server.py), real homes, every command
through the CLI where a person would use it."""
from __future__ import annotations

import json
import tomllib
from pathlib import Path

import tomli_w
from conftest import new_home
from test_sync import cli, ok, refused

from core import config as config_mod
from core.log.jetstream import Connection, StreamWant
from core.node import Node
from core.pages.service import KnowledgeBase
from core.paths import Home
from core.store.digest import content_digest
from core.log.jetstream_company import read_company


def digest(home: Home) -> str:
    with Node.open(home) as node:
        return content_digest(node.conn).content


def first_node(tmp_path: Path, url: str, *extra: str) -> Home:
    a = new_home(tmp_path / "A")
    with Node.open(a) as node:
        KnowledgeBase(node).create_page("ENG", "Before Moving", "written before the move")
    out = json.loads(ok(cli(a.root, "sync", "join", url, "--json", *extra)))
    assert out["joined"] == "first", out
    return Home(a.root)


def test_an_existing_home_moves_its_company_onto_jetstream_and_a_rerun_is_a_no_op(tmp_path, nats_server):
    a = new_home(tmp_path / "A")
    with Node.open(a) as node:
        KnowledgeBase(node).create_page("ENG", "Before Moving", "written before the move")
        records = node.log.last_seq()
    before = digest(a)
    out = json.loads(ok(cli(a.root, "sync", "join", nats_server.url, "--json")))
    assert out["joined"] == "first" and out["copied"] == {"pages": records, "vectors": 0}
    assert out["digest"] == before and sorted(out["created"]) == ["crewlet-pages", "crewlet-vectors"]
    a = Home(a.root)
    company = config_mod.load(a.config_file)
    assert company.log.backend == "jetstream" and company.log.url == (nats_server.url,)
    assert all(Path(p).is_file() and ".before-jetstream-" in p for p in out["kept_aside"])   # nothing deleted
    assert not a.log_file.exists()
    assert digest(a) == before
    # the configuration travelled: the company bucket holds the switched company.toml
    conn = Connection(company.log)
    conn.connect()
    text, activated = read_company(conn.retain(), company.log.stream_prefix)
    conn.release()
    assert tomllib.loads(text)["log"]["backend"] == "jetstream" and activated == company.activated_at
    again = json.loads(ok(cli(a.root, "sync", "join", nats_server.url, "--json")))
    assert again["joined"] == "already" and again["applied"] == 0 and digest(a) == before
    assert "Before Moving" in ok(cli(a.root, "page", "show", "ENG/before moving"))


def test_a_new_node_needs_only_the_url_and_both_nodes_see_each_others_writes(tmp_path, nats_server):
    a = first_node(tmp_path, nats_server.url)
    out = json.loads(ok(cli(tmp_path / "B", "sync", "join", nats_server.url, "--operator", "sam", "--json")))
    assert out["joined"] == "new" and out["applied"] > 0
    b = Home(tmp_path / "B")
    assert config_mod.load(b.config_file).log.backend == "jetstream"
    assert config_mod.load_node(b.node_file).operator == "sam"
    assert "Before Moving" in ok(cli(b.root, "page", "show", "ENG/before moving"))
    ok(cli(b.root, "page", "create", "ENG", "Written On B"))
    assert "Written On B" in ok(cli(a.root, "page", "show", "ENG/written on b"))
    ok(cli(a.root, "page", "create", "ENG", "Written On A"))
    assert "Written On A" in ok(cli(b.root, "page", "show", "ENG/written on a"))
    assert digest(a) == digest(b)
    # a title claimed on both: the applier decides the same on both nodes
    first = cli(a.root, "page", "create", "ENG", "Rota", "--json")
    second = cli(b.root, "page", "create", "ENG", "Rota", "--json")
    assert first.exit_code == 0 and second.exit_code == 1
    assert digest(a) == digest(b)


def test_a_new_home_on_servers_with_no_company_is_refused(tmp_path, nats_server):
    line = refused(cli(tmp_path / "B", "sync", "join", nats_server.url))
    assert "no company" in line and "first node" in line
    assert not (tmp_path / "B").exists()


def test_existing_streams_with_other_settings_are_refused_naming_the_setting(tmp_path, nats_server):
    conn = Connection(config_mod.LogSettings("jetstream", (nats_server.url,)))
    conn.connect()
    cfg = StreamWant("crewlet-pages", "crewlet.pages", 1, 600).config()
    cfg.max_age = 86400.0

    async def add():
        await conn.js.add_stream(cfg)

    conn.run(add())
    conn.close()
    a = new_home(tmp_path / "A")
    line = refused(cli(a.root, "sync", "join", nats_server.url))
    assert "crewlet-pages" in line and "max_age" in line
    assert config_mod.load(a.config_file).log.backend == "file" and a.log_file.is_file()   # nothing switched


def test_a_company_on_a_shared_directory_moves_and_its_other_nodes_follow_at_their_next_open(tmp_path, nats_server):
    a = new_home(tmp_path / "A")
    shared = tmp_path / "shared"
    ok(cli(a.root, "sync", "join", str(shared)))
    ok(cli(tmp_path / "B", "sync", "join", str(shared)))
    b = Home(tmp_path / "B")
    ok(cli(b.root, "page", "create", "ENG", "Written On The Directory"))
    ok(cli(a.root, "sync", "join", nats_server.url))
    a = Home(a.root)
    assert a.shared is None and config_mod.load(a.config_file).log.backend == "jetstream"
    assert config_mod.load(shared / "company.toml").log.backend == "jetstream"   # where B reads the switch
    # B follows when it next opens: its next command reads and writes on JetStream
    ok(cli(b.root, "page", "create", "ENG", "Written After The Move"))
    b = Home(b.root)
    assert b.shared is None and config_mod.load(b.config_file).log.backend == "jetstream"
    assert "Written After The Move" in ok(cli(a.root, "page", "show", "ENG/written after the move"))
    assert digest(a) == digest(b)


def test_a_node_that_cannot_reach_the_servers_reads_says_since_when_and_refuses_writes(tmp_path, nats_server):
    a = first_node(tmp_path, nats_server.url)
    nats_server.kill()
    res = cli(a.root, "page", "create", "ENG", "Offline Write")
    line = refused(res)
    assert "cannot be reached" in line and "behind since" in line and "nothing was written" in line
    shown = cli(a.root, "page", "show", "ENG/before moving")
    assert shown.exit_code == 0 and "Before Moving" in shown.stdout
    assert "offline" in shown.stderr and "applied through seq" in shown.stderr
    nats_server.start()
    ok(cli(a.root, "page", "create", "ENG", "Back Online"))
    assert "Offline Write" not in ok(cli(a.root, "pages", "ENG"))


def _with_monitor(home: Home, monitor: str) -> None:
    data = tomllib.loads(home.config_file.read_text())
    data["log"]["monitor"] = monitor
    home.config_file.write_text(tomli_w.dumps(data))


def test_sync_status_says_what_the_servers_promise_and_warns_at_the_lazy_default(tmp_path):
    from nats_server import NatsServer

    for sync, lazy in (("default", True), ("always", False)):
        with NatsServer(tmp_path / f"nats-{sync}", sync=sync) as server:
            a = first_node(tmp_path / sync, server.url)
            _with_monitor(a, server.monitor)
            res = cli(a.root, "sync", "status")
            assert res.exit_code == 0, res.stderr
            if lazy:
                assert "sync_interval 120 s" in res.stdout and "Jepsen" in res.stdout
                assert "warning" in res.stderr
            else:
                assert "sync_interval always" in res.stdout and "warning" not in res.stderr
            st = json.loads(ok(cli(a.root, "sync", "status", "--json")))
            assert st["jetstream"]["lazy"] is lazy and st["behind"] == 0
            assert st["logs"][0]["log_seq"] == st["logs"][0]["applied_seq"] > 0


def test_sync_status_lists_the_peers_and_their_digests_from_the_nodes_bucket(tmp_path, nats_server):
    """Nodes that share nothing but the servers say where they are in the company's nodes bucket: sync status
    lists them with their lag, and names a node whose content differs at the same positions."""
    import sqlite3

    a = first_node(tmp_path, nats_server.url)
    b = Home(tmp_path / "B")
    ok(cli(b.root, "sync", "join", nats_server.url))
    a_id, b_id = (config_mod.load_node(h.node_file).node_id for h in (a, b))
    ok(cli(b.root, "page", "create", "ENG", "Written On B"))
    st = json.loads(ok(cli(a.root, "sync", "status", "--json")))     # read as it is: A has not applied B's page
    peers = {p["node_id"]: p for p in st["peers"]}
    assert set(peers) == {a_id, b_id}
    assert st["behind"] == 1 and peers[b_id]["logs"]["applier"]["seq"] == st["logs"][0]["log_seq"]
    ok(cli(a.root, "spaces"))                                        # A applies it
    ok(cli(a.root, "sync", "status"))                                # and says its digest there
    st = json.loads(ok(cli(b.root, "sync", "status", "--json")))
    assert st["digests_disagree"] == [] and st["digests_agree"] == 1 and st["behind"] == 0
    text = ok(cli(b.root, "sync", "status"))
    assert "peers     2 seen" in text and a_id in text and "1 peer at this node's position hold the same content" in text
    conn = sqlite3.connect(a.db_file)                                # A's rows changed behind the log's back
    conn.execute("UPDATE pages SET body = 'changed by hand' WHERE title = 'Written On B'")
    conn.commit()
    conn.close()
    res = cli(a.root, "sync", "status", "--json")
    [d] = json.loads(res.stdout)["digests_disagree"]
    assert set(d["digests"]) == {a_id, b_id} and "disagree" in res.stderr


def test_a_new_node_starts_from_a_snapshot_of_stream_positions_and_adopt_works_there(tmp_path, nats_server):
    a = first_node(tmp_path, nats_server.url)
    for i in range(5):
        ok(cli(a.root, "page", "create", "ENG", f"Early {i}"))
    snap = tmp_path / "snap.db"
    info = json.loads(ok(cli(a.root, "sync", "snapshot", str(snap), "--json")))
    pos = info["positions"]["pages"]
    assert pos["byte_offset"] == pos["seq"] and pos["frame_offset"] == pos["seq"] - 1   # a stream position
    ok(cli(a.root, "page", "create", "ENG", "After The Snapshot"))
    out = json.loads(ok(cli(tmp_path / "B", "sync", "join", nats_server.url, "--snapshot", str(snap), "--json")))
    assert out["joined"] == "new" and out["applied"] == 1          # only the record after the snapshot
    b = Home(tmp_path / "B")
    assert "After The Snapshot" in ok(cli(b.root, "page", "show", "ENG/after the snapshot"))
    assert digest(a) == digest(b)
    adopted = json.loads(ok(cli(b.root, "sync", "adopt", str(snap), "--yes", "--json")))
    assert adopted["applied"] == 1 and digest(a) == digest(b)


def test_a_snapshot_of_another_company_is_refused_against_the_streams(tmp_path, nats_server):
    from nats_server import NatsServer

    first_node(tmp_path, nats_server.url)
    with NatsServer(tmp_path / "other-nats") as other:
        o = first_node(tmp_path / "other", other.url)
        ok(cli(o.root, "page", "create", "ENG", "Elsewhere"))
        snap = tmp_path / "other.db"
        ok(cli(o.root, "sync", "snapshot", str(snap)))
    line = refused(cli(tmp_path / "B", "sync", "join", nats_server.url, "--snapshot", str(snap)))
    assert "does not match crewlet-pages" in line
    assert not (tmp_path / "B").exists()


def test_a_live_watch_wakes_a_node_when_another_writes_and_after_the_server_comes_back(tmp_path, nats_server):
    import threading

    from core.sync import watch

    a = first_node(tmp_path, nats_server.url)
    ok(cli(tmp_path / "B", "sync", "join", nats_server.url))
    wake, stop = threading.Event(), threading.Event()
    with Node.open(Home(tmp_path / "B")) as b:
        watch.start_node(b, wake, stop)
        assert wake.wait(10)              # the consumer says once it is listening
        wake.clear()
        ok(cli(a.root, "page", "create", "ENG", "Heard On B"))
        assert wake.wait(10), "a write on A did not wake B"
        assert b.catch_up() >= 1
        nats_server.kill()
        nats_server.start()
        wake.clear()
        ok(cli(a.root, "page", "create", "ENG", "Heard After A Restart"))
        assert wake.wait(20), "a write after the server restarted did not wake B"
        b.catch_up()
        assert KnowledgeBase(b).resolve("ENG/heard after a restart").title == "Heard After A Restart"
        stop.set()


def test_a_fleet_duty_runs_on_one_node_of_the_company_whatever_machine_each_is_on(tmp_path, nats_server):
    import threading

    from core.duties.runner import Duty, DutyPass, DutyRunner

    class Reaper(Duty):
        name, scope, interval_s = "fleet-probe", "fleet", 1.0

        def run_pass(self, ctx):
            return DutyPass("probed")

    class Indexer(Duty):
        name, scope, interval_s = "node-probe", "node", 1.0

        def run_pass(self, ctx):
            return DutyPass("indexed")

    first_node(tmp_path, nats_server.url)
    ok(cli(tmp_path / "B", "sync", "join", nats_server.url))
    stop = threading.Event()
    with Node.open(Home(tmp_path / "A")) as a, Node.open(Home(tmp_path / "B")) as b:
        ra, rb = DutyRunner(a, [Reaper(), Indexer()], label="A"), DutyRunner(b, [Reaper(), Indexer()], label="B")
        assert ra.run_one(ra.duties[0], stop=stop).ran
        other = rb.run_one(rb.duties[0], stop=stop)
        assert not other.ran and "run by A" in other.skipped     # the lease is a key both nodes read
        assert rb.run_one(rb.duties[1], stop=stop).ran            # a node duty is each node's own
        ra.leases["fleet-probe"].release()
        assert rb.run_one(rb.duties[0], stop=stop).ran

        from core.duties.kv_lease import KvLease

        t = [10**13]
        mine, theirs = (KvLease(n.log.conn, n.company.log.stream_prefix, "expiry-probe", owner, owner, 5,
                                clock=lambda: t[0]) for n, owner in ((a, "node-a"), (b, "node-b")))
        assert mine.acquire() is None
        assert theirs.acquire().owner == "node-a"          # alive and unexpired: the other waits
        t[0] += 6_000
        assert theirs.acquire() is None                    # expired: taken over
        assert theirs.holder().since == t[0]               # its holding starts at the takeover
        assert mine.acquire().owner == "node-b"


def test_log_check_reads_the_streams_back_and_a_stream_that_lost_what_a_node_applied_is_damage(tmp_path, nats_server):
    from nats_server import NatsServer

    a = first_node(tmp_path, nats_server.url)
    out = json.loads(ok(cli(a.root, "log", "check", "--json")))
    assert out["ok"] and out["logs"][0]["records"] == out["logs"][0]["applied_seq"] > 0
    line = refused(cli(a.root, "log", "repair", "--yes"))
    assert "not cut from a node" in line and "sync adopt" in line
    # the servers lose the stream's records (a restored backup, storage wiped): A applied more than they hold
    with NatsServer(tmp_path / "other") as other:
        first_node(tmp_path / "elsewhere", other.url)        # another company's shorter streams there
        data = tomllib.loads(a.config_file.read_text())
        data["log"]["url"] = [other.url]
        a.config_file.write_text(tomli_w.dumps(data))
        res = cli(a.root, "log", "check")
        assert res.exit_code == 1 and "disagrees" in res.stderr
        line = refused(cli(a.root, "page", "create", "ENG", "Must Not Land"))
        assert "damaged" in line and "sync adopt" in line


def test_an_edit_of_company_toml_on_one_node_reaches_the_others_when_they_next_open(tmp_path, nats_server):
    from conftest import bump_mtime

    a = first_node(tmp_path, nats_server.url)
    ok(cli(tmp_path / "B", "sync", "join", nats_server.url))
    b = Home(tmp_path / "B")
    data = tomllib.loads(a.config_file.read_text())
    data["spaces"]["OPS"] = {"name": "Operations", "purpose": "Keeps it running", "lead": "sam"}
    a.config_file.write_text(tomli_w.dumps(data))
    bump_mtime(a.config_file, 1000)        # a later activation than the one the bucket holds
    ok(cli(a.root, "spaces"))              # A opens: its edit goes to the bucket
    assert "OPS" in ok(cli(b.root, "spaces"))   # B opens: it takes the newer configuration
    assert config_mod.load(b.config_file).activated_at == config_mod.load(a.config_file).activated_at
    ok(cli(b.root, "page", "create", "OPS", "Runbook"))
    assert "Runbook" in ok(cli(a.root, "page", "show", "OPS/runbook"))
    assert digest(a) == digest(b)


def test_a_server_that_asks_for_a_token_gets_it_from_the_variable_named_never_from_the_file(tmp_path):
    from nats_server import NatsServer

    env = {"CREWLET_TEST_NATS_TOKEN": "s3cret-token"}
    with NatsServer(tmp_path / "nats", token="s3cret-token") as server:
        a = new_home(tmp_path / "A")
        line = refused(cli(a.root, "sync", "join", server.url))            # no credentials: refused, nothing moved
        assert "cannot be reached" in line and config_mod.load(a.config_file).log.backend == "file"
        line = refused(cli(a.root, "sync", "join", server.url, "--token-env", "CREWLET_TEST_NATS_TOKEN"))
        assert "CREWLET_TEST_NATS_TOKEN" in line and "not set" in line
        ok(cli(a.root, "sync", "join", server.url, "--token-env", "CREWLET_TEST_NATS_TOKEN", env=env))
        a = Home(a.root)
        assert config_mod.load(a.config_file).log.token_env == "CREWLET_TEST_NATS_TOKEN"
        assert "s3cret-token" not in a.config_file.read_text()
        ok(cli(tmp_path / "B", "sync", "join", server.url, "--token-env", "CREWLET_TEST_NATS_TOKEN", env=env))
        ok(cli(tmp_path / "B", "page", "create", "ENG", "Behind A Token", env=env))
        assert "Behind A Token" in ok(cli(a.root, "page", "show", "ENG/behind a token", env=env))
        line = refused(cli(a.root, "page", "create", "ENG", "No Token Here"))   # the variable unset: refused
        assert "CREWLET_TEST_NATS_TOKEN" in line


def test_a_server_in_operator_mode_is_joined_with_a_creds_file_named_never_copied(tmp_path):
    """A company's servers as `nsc` sets them up (operator, account with JetStream, user): a node reaches them
    with the user's .creds file (its JWT signed by the account, its seed signing the server's nonce)."""
    from nats_server import NatsServer, make_creds

    auth, creds = make_creds(tmp_path / "auth")
    _, stranger = make_creds(tmp_path / "other")          # a user of another operator: the server knows no such account
    with NatsServer(tmp_path / "nats", auth=auth) as server:
        a = new_home(tmp_path / "A")
        line = refused(cli(a.root, "sync", "join", server.url))            # no credentials: refused, nothing moved
        assert "cannot be reached" in line and "uthorization" in line
        assert config_mod.load(a.config_file).log.backend == "file"
        line = refused(cli(a.root, "sync", "join", server.url, "--creds", str(tmp_path / "missing.creds")))
        assert "missing.creds" in line and "does not exist" in line
        line = refused(cli(a.root, "sync", "join", server.url, "--creds", str(stranger)))
        assert "uthorization" in line and config_mod.load(a.config_file).log.backend == "file"
        ok(cli(a.root, "sync", "join", server.url, "--creds", str(creds)))
        a = Home(a.root)
        assert config_mod.load(a.config_file).log.creds == str(creds)
        secret = creds.read_text().split("-----BEGIN USER NKEY SEED-----")[1].split()[0]
        assert secret not in a.config_file.read_text()                     # the path is kept, never the seed
        ok(cli(tmp_path / "B", "sync", "join", server.url, "--creds", str(creds)))
        ok(cli(tmp_path / "B", "page", "create", "ENG", "Behind A Creds File"))
        assert "Behind A Creds File" in ok(cli(a.root, "page", "show", "ENG/behind a creds file"))
        assert json.loads(ok(cli(a.root, "sync", "status", "--json")))["behind"] == 0


def test_tls_servers_signed_by_a_private_ca(tmp_path):
    from nats_server import NatsServer, make_tls

    ca, cert, key = make_tls(tmp_path / "tls")
    with NatsServer(tmp_path / "nats", tls=(cert, key)) as server:
        assert server.url.startswith("tls://")
        a = new_home(tmp_path / "A")
        line = refused(cli(a.root, "sync", "join", server.url))          # the CA is not one the system trusts
        assert "CERTIFICATE_VERIFY_FAILED" in line or "certificate" in line.lower()
        ok(cli(a.root, "sync", "join", server.url, "--tls-ca", str(ca)))
        ok(cli(tmp_path / "B", "sync", "join", server.url, "--tls-ca", str(ca)))
        ok(cli(tmp_path / "B", "page", "create", "ENG", "Over TLS"))
        assert "Over TLS" in ok(cli(a.root, "page", "show", "ENG/over tls"))


def test_adopt_refuses_a_snapshot_whose_content_a_peer_in_the_nodes_bucket_contradicts(tmp_path, nats_server):
    """A hand-edited snapshot whose stored digest was rewritten too passes every check against the streams: the
    digest a node said in the company's nodes bucket, at the very positions the snapshot stands for, still tells."""
    import sqlite3

    from core.store import connect

    a = first_node(tmp_path, nats_server.url)
    b = Home(tmp_path / "B")
    ok(cli(b.root, "sync", "join", nats_server.url))
    ok(cli(a.root, "sync", "status"))                        # A says its digest at this position in the bucket
    snap = tmp_path / "snap.db"
    ok(cli(a.root, "sync", "snapshot", str(snap)))
    conn = sqlite3.connect(snap)
    conn.execute("UPDATE pages SET body = 'changed by hand' WHERE title = 'Before Moving'")
    conn.commit()
    conn.close()
    c = connect(snap, migrate_schema=False)
    c.execute("UPDATE crewlet_snapshot SET value = ? WHERE key = 'content_digest'", (content_digest(c).content,))
    c.close()
    before = digest(b)
    res = cli(b.root, "sync", "adopt", str(snap), "--yes")
    a_id = config_mod.load_node(a.node_file).node_id
    assert res.exit_code == 1 and "does not hold what the log made" in res.stderr and a_id in res.stderr
    assert digest(b) == before                               # nothing was changed
    line = refused(cli(tmp_path / "C", "sync", "join", nats_server.url, "--snapshot", str(snap)))
    assert "does not hold what the log made" in line and not (tmp_path / "C").exists()
