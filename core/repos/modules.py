"""Modules and scopes.

A **module** is a folder of a repository that holds a package manifest (below), or one the configuration
lists. A **scope** is a folder, `apps/server`, or `NAME:apps/server` where several repositories are
configured. An entry scoped to `apps/server` serves work in `apps/server/prisma` and the reverse (the one
contains the other); an entry with no scope serves every query. A scope **reaches** the modules under its
folder, or, when there are none, the module its folder lies in: what triage counts to call a scope broad.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from core.errors import Invalid

MANIFESTS = frozenset({
    "pyproject.toml", "setup.py", "setup.cfg", "Pipfile",
    "package.json", "deno.json",
    "go.mod", "Cargo.toml",
    "pom.xml", "build.gradle", "build.gradle.kts", "build.sbt",
    "Gemfile", "composer.json", "mix.exs", "Package.swift", "pubspec.yaml", "rebar.config", "stack.yaml",
    "cabal.project", "dune-project", "Makefile.PL", "DESCRIPTION",
})
MANIFEST_SUFFIXES = (".csproj", ".fsproj", ".vbproj", ".gemspec", ".cabal", ".nimble")
# vendored dependencies carry manifests of their own that are not the repository's modules
_NOT_MODULES = frozenset({"node_modules", "vendor", "third_party", ".git"})
ROOT = ""  # the repository's top folder, as a module and as a scope's folder


def is_manifest(name: str) -> bool:
    return name in MANIFESTS or name.endswith(MANIFEST_SUFFIXES)


def find_modules(files: Iterable[str], listed: Iterable[str] = ()) -> list[str]:
    """The module folders of a tree given its file paths, and the folders the configuration lists."""
    found = {norm_folder(f) for f in listed}
    for path in files:
        folder, _, name = path.rpartition("/")
        if is_manifest(name) and not _NOT_MODULES.intersection(folder.split("/")):
            found.add(folder)
    return sorted(found)


def norm_folder(text: str) -> str:
    """A folder as scopes and modules compare it: no leading `./` or `/` ends, `.` the top; `..` refused."""
    raw = text.strip().replace("\\", "/")
    parts = [p for p in raw.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise Invalid(f"folder '{text}' climbs out of the repository ('..'); name a folder inside it")
    return "/".join(parts)


def contains(outer: str, inner: str) -> bool:
    """Whether folder `outer` is `inner` or holds it (by whole names: apps/server does not hold
    apps/serverless)."""
    return outer == ROOT or inner == outer or inner.startswith(outer + "/")


@dataclass(frozen=True)
class Scope:
    """A folder of one repository (`repository` None where only one is configured)."""

    repository: str | None
    folder: str

    def __str__(self) -> str:
        folder = self.folder or "."
        return f"{self.repository}:{folder}" if self.repository else folder


def stored_scope(text: str | None) -> Scope | None:
    """A scope as an entry or a run stores it ('NAME:folder', or a bare folder written where no repository was
    configured), read without the configuration: None for no scope, or for one that no longer reads."""
    if text is None:
        return None
    name, sep, folder = text.partition(":")
    if not sep:
        name, folder = "", text
    try:
        return Scope(name or None, norm_folder(folder))
    except Invalid:
        return None


def parse_scope(text: str | None, repositories: Iterable[str]) -> Scope | None:
    """`apps/server` or `NAME:apps/server` read against the configured repository names; empty → None
    (no scope). A bare folder where several repositories are configured is refused (it would name no one)."""
    if text is None or not text.strip():
        return None
    names = sorted(repositories)
    name, sep, folder = text.strip().partition(":")
    if sep:
        if name not in names:
            known = ", ".join(names) or "none"
            raise Invalid(f"scope '{text}' names no configured repository '{name}' (configured: {known})")
        return Scope(name, norm_folder(folder))
    if len(names) > 1:
        raise Invalid(f"scope '{text}' does not say which repository; several are configured: write "
                      f"NAME:{text.strip()} with NAME one of {', '.join(names)}")
    return Scope(names[0] if names else None, norm_folder(text))


def scope_matches(entry_scope: Scope | None, work_area: Scope | None) -> bool:
    """Whether an entry with `entry_scope` serves work in `work_area`: no entry scope serves every query,
    no work area takes every entry; otherwise the same repository and one folder holding the other."""
    if entry_scope is None or work_area is None:
        return True
    if entry_scope.repository and work_area.repository and entry_scope.repository != work_area.repository:
        return False
    return contains(entry_scope.folder, work_area.folder) or contains(work_area.folder, entry_scope.folder)


def written_scopes_meet(a: str | None, b: str | None) -> bool:
    """Whether two entries' scopes as stored ('NAME:folder' or 'folder'; None for none) meet, as
    `scope_matches` decides, without asking the configuration: two entries can say the same thing only where their
    scopes meet (the same words can hold of one module and not of another)."""
    return scope_matches(stored_scope(a), stored_scope(b))


def modules_reached(scope: Scope | None, modules: Mapping[str, list[str]]) -> list[tuple[str, str]]:
    """The (repository, module folder) pairs a scope reaches: the modules under its folder, else the
    innermost module its folder lies in. No scope reaches every module of every repository."""
    if scope is None:
        return [(repo, m) for repo in sorted(modules) for m in modules[repo]]
    repos = [scope.repository] if scope.repository else sorted(modules)
    reached: list[tuple[str, str]] = []
    for repo in repos:
        folders = modules.get(repo or "", [])
        under = [m for m in folders if contains(scope.folder, m)]
        if under:
            reached.extend((repo or "", m) for m in under)
            continue
        around = [m for m in folders if contains(m, scope.folder)]
        if around:
            reached.append((repo or "", max(around, key=len)))
    return reached
