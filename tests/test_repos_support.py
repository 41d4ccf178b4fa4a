"""Real git repositories for the tests of core/repos: made with the git executable in tmp_path, each commit
a real commit (no test here; the test modules import it)."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

GIT_ENV = {"GIT_AUTHOR_NAME": "Test", "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "Test",
           "GIT_COMMITTER_EMAIL": "t@example.com", "GIT_CONFIG_NOSYSTEM": "1"}


class GitRepo:
    """A working tree with a `main` branch: write, remove and move files, then commit."""

    def __init__(self, path: Path, branch: str = "main") -> None:
        self.path = path
        path.mkdir(parents=True, exist_ok=True)
        self.git("init", "-q", "-b", branch)
        self.git("config", "core.autocrlf", "false")

    def git(self, *args: str) -> str:
        env = {**os.environ, **GIT_ENV, "HOME": str(self.path.parent)}
        done = subprocess.run(["git", "-C", str(self.path), *args], capture_output=True, env=env, check=True)
        return done.stdout.decode()

    def write(self, rel: str, content: str | bytes) -> None:
        target = self.path / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, str):
            target.write_bytes(content.encode())
        else:
            target.write_bytes(content)

    def remove(self, rel: str) -> None:
        self.git("rm", "-q", rel)

    def move(self, old: str, new: str) -> None:
        (self.path / new).parent.mkdir(parents=True, exist_ok=True)
        self.git("mv", old, new)

    def commit(self, message: str = "change") -> str:
        self.git("add", "-A")
        self.git("commit", "-q", "--allow-empty", "-m", message)
        return self.git("rev-parse", "HEAD").strip()


def numbered(n: int, prefix: str = "line") -> str:
    """n distinct lines, `line 1` … `line n`, each ending in a newline."""
    return "".join(f"{prefix} {i}\n" for i in range(1, n + 1))
