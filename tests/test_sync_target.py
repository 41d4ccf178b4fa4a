"""What `crewlet sync join TARGET` takes TARGET for: a `scheme://` argument is a URL, never a directory
(issue 26: `sync join nats://127.0.0.1:4222` made a local directory `nats:` and joined it)."""
from __future__ import annotations

import os
from pathlib import Path

import pytest
from conftest import new_home
from typer.testing import CliRunner

from core.paths import Home
from crewlet_tui.cli import app

ENV = {"CREWLET_HOME": None, "CREWLET_AS": None, "COLUMNS": "200"}


def cli(root: Path, *args: str, cwd: Path):
    old = os.getcwd()
    os.chdir(cwd)
    try:
        return CliRunner().invoke(app, ["--home", str(root), *args], env=ENV)
    finally:
        os.chdir(old)


@pytest.mark.parametrize("url", ["http://127.0.0.1:4222", "s3://bucket/crewlet", "file:///tmp/x", "ws://h:443"])
def test_an_unknown_scheme_is_refused_in_one_line_and_nothing_is_made(tmp_path, url):
    a = new_home(tmp_path / "A")
    before = sorted(p.name for p in tmp_path.iterdir())
    res = cli(a.root, "sync", "join", url, cwd=tmp_path)
    assert res.exit_code == 1, (res.stdout, res.stderr)
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("crewlet: "), res.stderr
    assert url.split(":")[0] in lines[0] and "nats://" in lines[0]      # names the scheme and what works
    assert sorted(p.name for p in tmp_path.iterdir()) == before          # no directory named `http:` appeared
    assert Home(a.root).shared is None and (a.root / "company.toml").is_file()


def test_a_nats_url_is_never_taken_for_a_directory(tmp_path):
    a = new_home(tmp_path / "A")
    before = sorted(p.name for p in tmp_path.iterdir())
    # nothing listens on port 1: whatever the outcome, no local directory `nats:` may be made or joined
    res = cli(a.root, "sync", "join", "nats://127.0.0.1:1", cwd=tmp_path)
    assert res.exit_code == 1, (res.stdout, res.stderr)
    assert len(res.stderr.strip().splitlines()) == 1, res.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    assert not (tmp_path / "nats:").exists()
    assert Home(a.root).shared is None and (a.root / "company.toml").is_file()


def test_targets_are_told_apart():
    from core.sync.target import LogUrl, parse_target

    assert parse_target("/mnt/team/crewlet") == Path("/mnt/team/crewlet")
    assert parse_target("relative/dir") == Path("relative/dir")
    assert parse_target("a:b") == Path("a:b")                      # a colon alone is a file name
    url = parse_target("nats://127.0.0.1:4222")
    assert isinstance(url, LogUrl) and url.servers == ("nats://127.0.0.1:4222",) and not url.tls
    several = parse_target("nats://a:4222,nats://b:4222, nats://c:4222")
    assert isinstance(several, LogUrl) and several.servers == ("nats://a:4222", "nats://b:4222", "nats://c:4222")
    assert parse_target("tls://nats.example.com:4222").tls
    assert parse_target("NATS://H:4222").servers == ("nats://H:4222",)
