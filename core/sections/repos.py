"""[repositories.NAME]: the local git checkouts entries cite (docs/entries.md), as company.toml declares them.

```toml
[repositories.server]
path = "../server"            # a local git checkout: relative to company.toml's folder, or absolute
default_branch = "main"       # optional: else the branch its HEAD is on
modules = ["apps/web"]        # optional: folders that are modules besides those holding a package manifest
poll_interval = "5m"          # optional: how often the recheck duty looks at the default branch
```

Like every table but the bank's settings, a problem refuses the file with one line naming the key and the fix:
a key the table does not know, a path missing or not a directory (a typo would otherwise leave every citation
"not read yet" without a word). Whether it is a git repository is not asked here: `core.repos` reads it, and a
checkout that cannot be read just then is "not read yet", not a refusal. `core.bank.repositories.open_repositories`
turns these settings into the `core.repos.Repositories` the bank reads.

A room of floor 1 (docs/architecture.md, "The floors"): like every section it imports the kit and the floor
below, not its feature (which `config` would then load for every command).
"""
from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.clock import duration_text, parse_duration
from core.settings import ConfigError, expect, only_known, table

TABLE = "repositories"
KEYS = ("path", "default_branch", "modules", "poll_interval")
DEFAULT_POLL_INTERVAL_S = 300
MIN_POLL_INTERVAL_S = 10          # a git call per repository each time: more often is load for nothing
MAX_POLL_INTERVAL_S = 7 * 86_400
# a name a scope can carry (`NAME:apps/server`): no ':' or '/', and not an option git would read
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
# a branch name as git allows one, and never one that starts with '-' (git would read it as an option)
BRANCH_RE = re.compile(r"^(?!-)(?!.*\.\.)(?!.*//)[A-Za-z0-9._/-]+(?<![./])$")


@dataclass(frozen=True)
class RepositorySettings:
    name: str
    path: Path                     # absolute
    default_branch: str | None = None
    modules: tuple[str, ...] = ()  # folders, as core.repos.modules.norm_folder writes them
    poll_interval_s: int = DEFAULT_POLL_INTERVAL_S

    @property
    def poll_interval(self) -> str:
        return duration_text(self.poll_interval_s)


@dataclass(frozen=True)
class RepositoriesSettings:
    """The repositories declared, in the file's order."""

    declared: tuple[RepositorySettings, ...] = ()

    def __iter__(self) -> Iterator[RepositorySettings]:
        return iter(self.declared)

    def __len__(self) -> int:
        return len(self.declared)

    def __getitem__(self, name: str) -> RepositorySettings:
        for repo in self.declared:
            if repo.name == name:
                return repo
        raise KeyError(name)

    def names(self) -> list[str]:
        return [r.name for r in self.declared]


def parse(file: Path, raw: Any) -> RepositoriesSettings:
    """[repositories] (None when absent: no repositories)."""
    if raw is None:
        return RepositoriesSettings()
    repos = table(file, TABLE, raw, 'declare each repository as a table: [repositories.NAME] path = "…"')
    return RepositoriesSettings(tuple(_repository(file, name, value) for name, value in repos.items()))


def _repository(file: Path, name: str, raw: Any) -> RepositorySettings:
    key = f"{TABLE}.{name}"
    example = f'[{key}] path = "../{name}"'
    if not isinstance(raw, dict):
        raise ConfigError(file, key, f"is a {type(raw).__name__}, not a repository's table",
                          f"declare it as a table: {example}")
    if not NAME_RE.match(name):
        raise ConfigError(file, key, f"{name!r} is not a repository name a scope can carry (NAME:folder)",
                          "use letters, digits, '_', '-' or '.', starting with a letter or digit")
    only_known(file, key, raw, KEYS, problem="not a setting of a repository")
    if "path" not in raw:
        raise ConfigError(file, f"{key}.path", "a repository needs the path of its local git checkout",
                          f"add it: {example}")
    written = expect(file, f"{key}.path", raw["path"], str, f'path = "../{name}"').strip()
    if not written:
        raise ConfigError(file, f"{key}.path", "is empty",
                          f'write the path of a local git checkout, e.g. path = "../{name}"')
    path = Path(written).expanduser()
    if not path.is_absolute():
        path = file.parent / path
    path = Path(_absolute(path))
    if not path.is_dir():
        problem = "is not a directory" if path.exists() else "does not exist"
        raise ConfigError(file, f"{key}.path", f"{path} {problem}",
                          f"write the path of a local git checkout, absolute or relative to {file.parent}")
    branch = raw.get("default_branch")
    if branch is not None:
        branch = expect(file, f"{key}.default_branch", branch, str, 'e.g. default_branch = "main"').strip()
        if not BRANCH_RE.match(branch):
            raise ConfigError(file, f"{key}.default_branch", f"{branch!r} is not a branch name",
                              'name the branch its entries are checked on, e.g. default_branch = "main" '
                              "(or remove it: the branch HEAD is on)")
    modules = expect(file, f"{key}.modules", raw.get("modules", []), list,
                     'write it as a list of folders, e.g. modules = ["apps/web"]')
    folders: list[str] = []
    for item in modules:
        expect(file, f"{key}.modules", item, str, 'write each folder as a quoted path, e.g. modules = ["apps/web"]')
        folder = _folder(item)
        if folder is None:
            raise ConfigError(file, f"{key}.modules", f"folder {item!r} climbs out of the repository ('..')",
                              'list folders inside the repository, e.g. modules = ["apps/web"]')
        if folder not in folders:
            folders.append(folder)
    return RepositorySettings(name=name, path=path, default_branch=branch or None, modules=tuple(folders),
                              poll_interval_s=_poll_interval(file, f"{key}.poll_interval", raw.get("poll_interval")))


def _folder(text: str) -> str | None:
    """A folder as core.repos.modules.norm_folder writes it (no leading `./`, no `/` at either end, `.` the
    top: tests/test_bank_settings.py holds the two together); None when it climbs out with `..`."""
    parts = [p for p in text.strip().replace("\\", "/").split("/") if p not in ("", ".")]
    return None if ".." in parts else "/".join(parts)


def _absolute(path: Path) -> str:
    """The path made absolute with '..' folded as written (not resolved through symlinks: the operator's
    path is the one shown back)."""
    return os.path.normpath(os.path.abspath(path))


def _poll_interval(file: Path, key: str, value: Any) -> int:
    if value is None:
        return DEFAULT_POLL_INTERVAL_S
    fix = (f'write a duration from {duration_text(MIN_POLL_INTERVAL_S)} to {duration_text(MAX_POLL_INTERVAL_S)}, '
           f'e.g. poll_interval = "{duration_text(DEFAULT_POLL_INTERVAL_S)}"')
    text = expect(file, key, value, str, fix)
    try:
        seconds = parse_duration(text)
    except ValueError as exc:
        raise ConfigError(file, key, str(exc), fix) from None
    if not MIN_POLL_INTERVAL_S <= seconds <= MAX_POLL_INTERVAL_S:
        raise ConfigError(file, key, f"{text.strip()} is out of range", fix)
    return seconds
