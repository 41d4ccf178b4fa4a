"""The settings kit: what every section of company.toml is checked with, and its one error.

A feature owns its section (`core/sections/embed.py`, `core/sections/chat.py`, `core/sections/log.py`,
`core/sections/remote.py`, `core/sections/pages.py`): the dataclass and a `parse(file, raw)` built from these
checks. `core/config.py` composes the sections (`config.SECTIONS`). Every check fails with a `ConfigError`
that names the file, the key and the fix, because an operator fixes it in an editor, not in a stack trace;
and every table refuses a key it does not know, with the keys it does (a typo that loads is a setting
silently not set: `admn = true` would remove an admin without a word).

This module stands on the bottom floor: it imports nothing of crewlet but the refusals' model (core.errors,
on the same floor), so a feature's settings module on any floor can use it.
"""
from __future__ import annotations

import difflib
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from .errors import CrewletError

ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
HTTP_URL_RE = re.compile(r"^https?://[^/\s]+")


class ConfigError(CrewletError):
    """A configuration problem, told as one line: file, key, what is wrong and the fix."""

    code = "config"

    def __init__(self, file: Path | str, key: str, problem: str, fix: str) -> None:
        super().__init__(f"{file}: {key}: {problem}", fix=fix, file=str(file), key=key)
        self.file, self.key, self.problem = str(file), key, problem


def key_in(table: str, key: str) -> str:
    """`table.key` ("key" alone at the top level)."""
    return f"{table}.{key}" if table else key


def only_known(file: Path, table: str, raw: dict[str, Any], allowed: Iterable[str], *,
               problem: str = "unknown setting", what: str = "use one of", shown: Iterable[str] | None = None) -> None:
    """Refuse the first key of `raw` that is not in `allowed`, naming the keys that are (and the closest one,
    when a typo is likely). `table` is the dotted name ("" for the top level); `shown`: how the fix writes
    the allowed keys (the keys themselves unless given)."""
    allowed = tuple(allowed)
    listed = tuple(shown) if shown is not None else allowed
    for key in raw:
        if key in allowed:
            continue
        close = difflib.get_close_matches(str(key), allowed, n=1, cutoff=0.6)
        said = f"{problem} (did you mean '{close[0]}'?)" if close else problem
        raise ConfigError(file, key_in(table, str(key)), said,
                          f"remove it, or {what}: {', '.join(listed) if listed else 'none'}")


def expect(file: Path, key: str, value: Any, typ: type | tuple[type, ...], fix: str) -> Any:
    """`value` when it is of `typ`; a bool is not taken for an int (TOML true would otherwise pass)."""
    types = typ if isinstance(typ, tuple) else (typ,)
    if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
        names = " or ".join(t.__name__ for t in types)
        raise ConfigError(file, key, f"expected {names}, found {type(value).__name__} {value!r}", fix)
    return value


def table(file: Path, key: str, value: Any, fix: str | None = None) -> dict[str, Any]:
    """A table's dict (a section that is absent arrives as {})."""
    return expect(file, key, {} if value is None else value, dict, fix or f"make [{key}] a table")


def whole(file: Path, key: str, value: Any, *, low: int, high: int | None = None, example: str) -> int:
    """A whole number in [low, high]; a bool is not one (TOML true would otherwise read as 1)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(file, key, f"expected a whole number, found {type(value).__name__} {value!r}",
                          f"write a whole number, e.g. {example}")
    if value < low or (high is not None and value > high):
        bound = f"from {low} to {high}" if high is not None else f"at least {low}"
        raise ConfigError(file, key, f"{value} is out of range", f"use a whole number {bound}, e.g. {example}")
    return value


def seconds(file: Path, key: str, value: Any, default: float, *, high: float = 300) -> float:
    """A number of seconds above 0 and at most `high`; None is the default."""
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= high:
        raise ConfigError(file, key, f"expected seconds above 0 and at most {high:g}, found {value!r}",
                          f"write a number of seconds, e.g. {key.rsplit('.', 1)[-1]} = {default:g}")
    return float(value)


def http_url(file: Path, key: str, value: Any, example: str) -> str:
    """An http(s) URL, without its trailing '/'."""
    name = key.rsplit(".", 1)[-1]
    url = expect(file, key, value, str, f'{name} = "{example}"').strip()
    if not HTTP_URL_RE.match(url):
        raise ConfigError(file, key, f"{url!r} is not an http(s) URL", f'write it with its scheme, e.g. {name} = "{example}"')
    return url.rstrip("/")


def server_urls(file: Path, key: str, value: Any, schemes: tuple[str, ...], example: str) -> tuple[str, ...]:
    """A URL of a server, or a list of them (each may hold several, comma-separated)."""
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not items or not all(isinstance(u, str) for u in items):
        raise ConfigError(file, key, "is not a URL or a list of URLs", f"e.g. {key.split('.')[-1]} = {example}")
    out = []
    for u in (part.strip() for item in items for part in item.split(",")):
        if u and not re.match(rf"^({'|'.join(schemes)})://[^/\s]+/?$", u, re.IGNORECASE):
            raise ConfigError(file, key, f"{u!r} is not a {' or '.join(s + '://' for s in schemes)} URL of a server",
                              f"e.g. {key.split('.')[-1]} = {example}")
        if u:
            out.append(u.rstrip("/"))
    return tuple(out)


def api_key_env(file: Path, table_name: str, raw: dict[str, Any]) -> str:
    """The name of the environment variable holding a provider's key: a key written here instead is refused
    (and said to be rotated: it is in a file now)."""
    key = f"{table_name}.api_key_env"
    name = expect(file, key, raw.get("api_key_env", ""), str, 'api_key_env = "OPENAI_API_KEY"')
    if name and not ENV_NAME_RE.match(name):
        looks_like_key = name.startswith("sk-") or len(name) >= 32
        raise ConfigError(file, key,
                          "looks like a key, not the name of an environment variable" if looks_like_key
                          else "is not an environment variable name",
                          'put the key in an environment variable and name it here, e.g. api_key_env = "OPENAI_API_KEY"'
                          + (" (and rotate the key: it has been written to a file)" if looks_like_key else ""))
    return name


def env_name(file: Path, key: str, value: Any, example: str) -> str:
    """The NAME of an environment variable holding a secret (a value that looks like the secret is refused)."""
    name = expect(file, key, value, str, f'{key.rsplit(".", 1)[-1]} = "{example}"').strip()
    # a secret pasted where its variable's name goes: a known token prefix, or a long run with lower-case
    # letters and digits (variable names are conventionally upper-case words)
    looks_like_key = name.startswith(("ATATT", "plane_api_", "sk-")) or (
        len(name) >= 24 and any(c.islower() for c in name) and any(c.isdigit() for c in name))
    if looks_like_key or not ENV_NAME_RE.match(name):
        raise ConfigError(file, key, "looks like a secret, not the name of an environment variable" if looks_like_key
                          else f"{name!r} is not an environment variable name",
                          f'put the secret in an environment variable and name it here, e.g. '
                          f'{key.rsplit(".", 1)[-1]} = "{example}"' + (" (and rotate it: it has been written to a file)"
                                                                        if looks_like_key else ""))
    return name
