"""The repositories a company configures, by name: one `Repository` (one cat-file process) each, their
modules at the branch head, and scopes read against them."""
from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping

from core.errors import NotFound
from core.repos.modules import Scope, find_modules, modules_reached, parse_scope
from core.repos.repository import Repository


class Repositories(Mapping[str, Repository]):
    """`Repositories({name: Repository}, listed={name: [folders]})`: read-only by name; `close()` ends
    every cat-file process."""

    def __init__(self, repos: Mapping[str, Repository] | None = None,
                 listed: Mapping[str, list[str]] | None = None) -> None:
        self._repos = dict(repos or {})
        self._listed = {k: list(v) for k, v in (listed or {}).items()}
        self._modules: dict[tuple[str, str], list[str]] = {}
        self._lock = threading.Lock()

    def __getitem__(self, name: str) -> Repository:
        return self._repos[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._repos)

    def __len__(self) -> int:
        return len(self._repos)

    def close(self) -> None:
        for repo in self._repos.values():
            repo.close()

    def __enter__(self) -> Repositories:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def modules(self, name: str, commit: str | None = None) -> list[str]:
        """The module folders of repository `name` at `commit` (default: its branch head), kept per commit."""
        repo = self._repos[name]
        at = repo.commit(commit) if commit else repo.head()
        if at is None:
            raise NotFound(f"no commit {commit} in repository '{name}'; name a commit it holds")
        key = (name, at)
        with self._lock:
            cached = self._modules.get(key)
        if cached is None:
            cached = find_modules(repo.files(at), self._listed.get(name, ()))
            with self._lock:
                if len(self._modules) >= 64:  # a long-running process sees many heads: keep the recent ones
                    self._modules.pop(next(iter(self._modules)))
                self._modules[key] = cached
        return cached

    def scope(self, text: str | None) -> Scope | None:
        """A scope as written (`apps/server`, `NAME:apps/server`) read against these repositories."""
        return parse_scope(text, self._repos)

    def reached(self, scope: Scope | None) -> list[tuple[str, str]]:
        """The (repository, module) pairs a scope reaches at each branch head (triage's BROAD_SCOPE counts
        them)."""
        names = [scope.repository] if scope is not None and scope.repository else list(self._repos)
        return modules_reached(scope, {n: self.modules(n) for n in names})
