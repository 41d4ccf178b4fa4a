"""`crewlet search eval`: reads a store file (not a running node), prints the report, and its exit code
follows its verdict. Real homes, run through the installed CLI."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from core.evaluate import evaluate, render
from core.node import Node
from test_ivf import DIMS, make_home, run, topical, duty_for

ROOT = Path(__file__).resolve().parent.parent


def crewlet(*args: str, home: Path | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    if home is not None:
        env["CREWLET_HOME"] = str(home)
    return subprocess.run([sys.executable, "-m", "crewlet_tui.cli", *args], capture_output=True, text=True,
                          cwd=ROOT, env=env, timeout=300)


@pytest.fixture(scope="module")
def indexed(tmp_path_factory) -> Path:
    """A topical corpus of 1,600 sources with its semantic index trained, installed and re-filed."""
    home = make_home(tmp_path_factory.mktemp("eval") / "h", topical(1600))
    with Node.open(home) as node:
        duty = duty_for(node)
        first = run(duty)
        run(duty, first.cursor)
    return home.root


def test_a_passing_corpus_prints_the_report_and_exits_0(indexed):
    out = crewlet("search", "eval", "--store", str(indexed / "crewlet.db"))
    assert out.returncode == 0, out.stderr
    keys = [line.split(None, 1)[0] + (" " + line.split()[1] if line.startswith(("first", "worst", "head", "scan",
                                                                                "past")) else "")
            for line in out.stdout.splitlines()]
    assert keys == ["corpus", "measured", "first stage", "index", "recall", "worst query", "head misses",
                    "scan recall", "narrowed", "narrowed", "verdict", "window", "past window"]
    assert "1600 pages, fake at 128 dimensions" in out.stdout
    assert "the semantic index:" in out.stdout and "recovers the exact ranking" in out.stdout
    assert "narrowed     source:page" in out.stdout and "narrowed     container:page" in out.stdout


def test_the_default_store_is_this_homes_and_json_says_the_same(indexed):
    out = crewlet("search", "eval", "--json", home=indexed)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["passed"] is True and data["sources"] == 1600 and data["queries"] == 25
    assert data["through_index"]["shapes"]["unfiltered"]["recall"] >= data["through_index"]["shapes"]["unfiltered"]["floor"]


def test_reading_too_few_lists_fails_and_exits_1(indexed):
    # one list cannot hold a document's 150 nearest: the verdict fails and the exit code says so
    out = crewlet("search", "eval", "--store", str(indexed / "crewlet.db"), "--probes", "1")
    assert out.returncode == 1
    assert "FAILS" in out.stdout and "below the floor" in out.stderr
    report = evaluate(indexed / "crewlet.db", probes=1)
    assert not report.passed and report.through is not None and report.through.probes == 1


def test_codes_that_fail_the_corpus_fail_the_scan_too(tmp_path):
    rng = np.random.default_rng(3)
    noise = rng.standard_normal((5000, DIMS)).astype(np.float32)   # no topics, and 1,200 candidates of 5,000
    home = make_home(tmp_path / "h", noise / np.linalg.norm(noise, axis=1, keepdims=True))
    report = evaluate(home.db_file)
    assert report.index is None and not report.passed
    assert report.scan.shapes["unfiltered"].recall < report.scan.shapes["unfiltered"].floor
    out = crewlet("search", "eval", "--store", str(home.db_file))
    assert out.returncode == 1 and "the full scan" in out.stdout


def test_no_vectors_or_too_few_sources_say_so_in_one_line(tmp_path):
    home = make_home(tmp_path / "few", topical(100))
    out = crewlet("search", "eval", "--store", str(home.db_file))
    assert out.returncode == 1 and len(out.stderr.strip().splitlines()) == 1
    assert "a measurement needs at least 175" in out.stderr
    empty = make_home(tmp_path / "none", topical(0))
    out = crewlet("search", "eval", home=empty.root)
    assert out.returncode == 1 and "holds no vectors" in out.stderr
    out = crewlet("search", "eval", "--store", str(tmp_path / "missing.db"))
    assert out.returncode == 1 and "no such file" in out.stderr


def test_a_copy_of_the_store_is_measured_with_nothing_running(indexed, tmp_path):
    copy = tmp_path / "backup" / "crewlet.db"
    copy.parent.mkdir()
    with Node.open(__import__("core.paths", fromlist=["Home"]).Home(indexed)) as node:
        node.conn.execute(f"VACUUM INTO '{copy}'")   # what a backup holds: one file, no -wal beside it
    report = evaluate(copy)
    assert report.passed and report.index is not None
    assert render(report)[0].startswith("corpus       1600 pages")


def test_search_still_searches(indexed):
    out = crewlet("search", "--mode", "keyword", "eval", "--json", home=indexed)   # an option first: the word is searched
    assert out.returncode == 0, out.stderr
    answer = json.loads(out.stdout)
    assert answer["outcome"]["served_mode"] == "keyword" and "hits" in answer and "corpus" not in out.stdout
    out = crewlet("search", "eval", "--help")
    assert out.returncode == 0 and "--store" in out.stdout and "--probes" in out.stdout
