"""The company's repositories opened for reading: [repositories.NAME] (core/sections/repos.py) made into the
`core.repos.Repositories` whose citations the bank checks and carries (docs/entries.md)."""
from __future__ import annotations

from core.repos.repositories import Repositories
from core.repos.repository import Repository
from core.sections.repos import RepositoriesSettings


def open_repositories(settings: RepositoriesSettings) -> Repositories:
    """One `Repository` per declared repository (its cat-file process starts at its first read), with the
    folders the configuration lists as modules. Close it (`with open_repositories(…) as repos:`) to end the
    processes."""
    return Repositories({r.name: Repository(r.name, r.path, r.default_branch) for r in settings},
                        listed={r.name: list(r.modules) for r in settings})
