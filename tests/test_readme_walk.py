"""The README's five-minute walk, run top to bottom as a newcomer would paste it, each line's exit code as
the README documents it: 0, or 1 where its comment says the command is refused.

The walk's last line opens the app (a terminal program, walked by hand in tmux) and is not run here; its
first line activates the virtualenv, which here is the interpreter running the tests.
"""
from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

from conftest import ROOT

WALK_HEADING = "## A five-minute walk through the CLI"


def walk_lines() -> list[tuple[str, int]]:
    """(command, expected exit code) for each line of the walk's sh block, comments and the app aside."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    block = readme.split(WALK_HEADING, 1)[1].split("```sh", 1)[1].split("```", 1)[0]
    out = []
    for raw in block.splitlines():
        if not raw.strip() or raw.lstrip().startswith("#"):
            continue
        command, _, comment = raw.partition("  #")
        command = command.strip()
        if command in (". .venv/bin/activate", "crewlet"):
            continue
        refused = bool(re.search(r"\brefused\b|exit 1", comment))
        out.append((command, 1 if refused else 0))
    return out


def test_the_readme_walk_has_the_steps_a_newcomer_takes():
    commands = [c for c, _ in walk_lines()]
    assert commands[0].startswith("export CREWLET_HOME") and "crewlet init --example" in commands
    assert [c for c, code in walk_lines() if code == 1], "the walk shows a refusal or two"


def test_the_readme_walk_runs_top_to_bottom_with_the_exit_codes_it_documents(tmp_path):
    bin_dir = Path(sys.executable).parent
    script = ["set -u", f"cd {shlex.quote(str(ROOT))}", f"export PATH={shlex.quote(str(bin_dir))}:$PATH"]
    for i, (command, code) in enumerate(walk_lines()):
        command = command.replace("$PWD/.walk", shlex.quote(str(tmp_path / "walk")))
        command = command.replace("/tmp/body.md", shlex.quote(str(tmp_path / "body.md")))
        script.append(f"{{ {command}; }} >{tmp_path}/out.{i} 2>{tmp_path}/err.{i}; echo \"{i} $? {code}\"")
    env = {k: v for k, v in os.environ.items() if k not in ("CREWLET_HOME", "CREWLET_AS", "COLUMNS")}
    done = subprocess.run(["bash", "-c", "\n".join(script)], capture_output=True, text=True, env=env, timeout=900)
    assert done.returncode == 0, done.stderr
    results = [line.split() for line in done.stdout.splitlines()]
    lines = walk_lines()
    assert len(results) == len(lines), done.stdout
    wrong = []
    for i, got, want in results:
        if got != want:
            err = (tmp_path / f"err.{i}").read_text()
            wrong.append(f"{lines[int(i)][0]}: exit {got}, documented {want}: {err.strip()[:300]}")
    assert not wrong, "\n".join(wrong)
    for i, (command, code) in enumerate(lines):
        if code == 1:   # a refusal is one line on stderr
            assert len((tmp_path / f"err.{i}").read_text().strip().splitlines()) == 1, command
