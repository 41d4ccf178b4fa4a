"""Two homes making one empty directory their shared directory (review follow-up to issue 34): only one of them is
its first node, and the other is left as it was — its logs never removed because a company.toml it did not copy
is there.

Reproduction: a first node's join written down and stopped before it copied anything (killed), another home then
joins the same empty directory as its first node; the first home's next command finished its join by the existence
of DIR/company.toml alone — node.toml named DIR and the home's own logs were removed, its pages on no log any more
(the database then disagreed with DIR's log: damage, writes refused). And two first joins at once copied their logs
over each other's."""
from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
from conftest import new_home
from test_adopt_killed import PROC_ENV
from test_sync import cli, ok, refused

from core.log import joining
from core.node import Node
from core.pages.service import KnowledgeBase
from core.paths import Home
from core.sync import join as join_mod


class Stopped(Exception):
    """Stands for the process killed right after its join was written down."""


def _home_with_page(root, title: str) -> Home:
    home = new_home(root)
    with Node.open(home) as node:
        KnowledgeBase(node).create_page("ENG", title, f"{title} body", actor="alex")
    return home


def test_a_stopped_first_join_finished_after_another_home_took_the_directory_keeps_its_logs(tmp_path, monkeypatch):
    a = _home_with_page(tmp_path / "A", "Only On A")
    a_log = a.log_file.read_bytes()
    shared = tmp_path / "shared"

    def stopped(root, plan):
        raise Stopped()

    with monkeypatch.context() as m:
        m.setattr(joining, "first_steps", stopped)
        with pytest.raises(Stopped):
            join_mod.join(Home(a.root), shared)
    assert Home(a.root).join_note.exists()                 # written down, nothing done
    b = _home_with_page(tmp_path / "B", "Only On B")
    assert ok(cli(b.root, "sync", "join", str(shared), "--json"))
    b_log = (shared / "pages.log").read_bytes()
    # A's next command finishes (here: undoes) its join before it reads anything
    shown = ok(cli(a.root, "page", "show", "ENG/only on a"))
    assert "Only On A body" in shown
    a = Home(a.root)
    assert a.shared is None and not a.join_note.exists()
    assert a.log_file.read_bytes() == a_log and (a.root / "company.toml").is_file()
    assert (shared / "pages.log").read_bytes() == b_log   # B's directory as B made it
    ok(cli(a.root, "page", "create", "ENG", "Written After"))   # A's log is sound: writes go on
    # and A joining again is told why it cannot: the directory is B's, and A has pages of its own
    assert "of its own" in refused(cli(a.root, "sync", "join", str(shared)))


# `crewlet ARGS` whose first copy into the shared directory waits: it says "paused" on stdout, then copies once a
# line comes on stdin (the first node's join of another process, stopped where a race would interleave)
PAUSING_CLI = textwrap.dedent("""
    import sys
    from core.log import joining
    real, paused = joining.copy_durably, []

    def pause_then_copy(src, dest):
        if not paused:
            paused.append(True)
            print("paused", flush=True)
            sys.stdin.readline()
        real(src, dest)

    joining.copy_durably = pause_then_copy
    from crewlet_tui.cli import main
    sys.argv = ["crewlet", *sys.argv[1:]]
    main()
""")
PLAIN_CLI = "import sys\nfrom crewlet_tui.cli import main\nsys.argv = ['crewlet', *sys.argv[1:]]\nmain()\n"


def test_two_first_joins_at_once_one_wins_and_the_other_is_left_as_it_was(tmp_path):
    """Two processes both found the directory empty; A pauses just before its first copy, and B's join waits for
    A's (it says so on stderr), then finds the directory A's and is refused, its home untouched. Before: B copied
    its logs and company.toml in meanwhile, A then copied its own over them, and both homes became "first" nodes of
    a directory holding a mix of the two, each with its own logs removed."""
    a = _home_with_page(tmp_path / "A", "Only On A")
    b = _home_with_page(tmp_path / "B", "Only On B")
    b_log, b_config = b.log_file.read_bytes(), (b.root / "company.toml").read_bytes()
    shared = tmp_path / "shared"
    pa = subprocess.Popen([sys.executable, "-c", PAUSING_CLI, "--home", str(a.root), "sync", "join", str(shared)],
                          env=PROC_ENV, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True)
    pb = None
    try:
        assert pa.stdout.readline().strip() == "paused", pa.stderr.read()
        pb = subprocess.Popen([sys.executable, "-c", PLAIN_CLI, "--home", str(b.root), "sync", "join", str(shared)],
                              env=PROC_ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        # B either says it waits for A's join (fixed), or, before the fix, runs to its end meanwhile
        said = []
        for line in pb.stderr:
            said.append(line)
            if "waiting for another home" in line:
                break
        pa.stdin.write("go\n")
        pa.stdin.flush()
        a_out, a_err = pa.communicate(timeout=180)
        b_out, b_err = pb.communicate(timeout=180)
    finally:
        for proc in (pa, pb):
            if proc is not None and proc.poll() is None:
                proc.kill()
    b_err = "".join(said) + b_err
    assert pa.returncode == 0, a_err
    assert pb.returncode == 1, (b_out, b_err)
    assert "became another home's shared directory" in b_err and "is as it was" in b_err
    b = Home(b.root)
    assert b.shared is None and not b.join_note.exists()
    assert b.log_file.read_bytes() == b_log and (b.root / "company.toml").read_bytes() == b_config
    ok(cli(b.root, "page", "show", "ENG/only on b"))
    ok(cli(a.root, "page", "show", "ENG/only on a"))
    ok(cli(tmp_path / "C", "sync", "join", str(shared)))                 # a new node of the directory: A's alone
    with Node.open(Home(tmp_path / "C")) as node:
        titles = {r[0] for r in node.conn.execute("SELECT title FROM pages")}
    assert "Only On A" in titles and "Only On B" not in titles
