"""company.toml: the spaces, actors and knowledge settings a node runs under — its sections composed.

Read with tomllib and written with tomli-w. A feature owns its section: its settings and their parser live in
the feature's `settings.py` (core/embed, core/chat, core/log, core/remote, core/pages, core/repos), built with
the kit (core/settings.py), and `SECTIONS` below composes them; this module parses the rest (operator, knowledge,
spaces, actors), the knowledge bank's keys of [knowledge] excepted (core/sections/bank.py). Every error names
the file, the key and the fix, because an operator fixes it in an editor, not in a stack trace; and every table
refuses a key it does not know.
"""
from __future__ import annotations

import os
import re
import tomllib
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import Any

import tomli_w

import core.sections.bank as bank_settings
import core.sections.chat as chat_settings
import core.sections.embed as embed_settings
import core.sections.log as log_settings
import core.sections.pages as pages_settings
import core.sections.remote as remote_settings
import core.sections.repos as repos_settings
from core.sections.bank import BankSettings
from core.sections.chat import LlmSettings
from core.durable import write_atomic
from core.sections.embed import EmbeddingsSettings
from core.errors import KnowledgeElsewhere
from core.sections.log import LogSettings
from core.sections.pages import PageLimits
from core.paths import read_node_file
from core.sections.remote import (REMOTE_BACKENDS, REMOTE_LABELS, ConfluenceSettings, Credentials, Integrations,
                                  PlaneSettings)
from core.sections.repos import RepositoriesSettings
from core.settings import ConfigError, expect, only_known, table, whole

__all__ = ["ConfigError", "Company", "Actor", "Space", "Knowledge", "LogSettings", "EmbeddingsSettings", "LlmSettings",
           "PageLimits", "Credentials", "ConfluenceSettings", "PlaneSettings", "Integrations", "REMOTE_LABELS",
           "REMOTE_BACKENDS", "SECTIONS", "Section", "load", "parse", "remote_site", "RemoteSite", "BankSettings",
           "RepositoriesSettings"]

ACTOR_KINDS = ("person", "agent")
KEY_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
HANDLE_RE = re.compile(r"^[a-z0-9][a-z0-9_.-]{0,63}$")
AUTO_DRAFTED_PARENT = "Auto-Drafted Skills"
AUTO_DRAFT_TITLE_PREFIX = "[Auto-draft]"
BACKENDS = ("native", "confluence", "plane", "none")
SCOPE_KEYS = {"native": "scope", "confluence": "confluence_spaces", "plane": "plane_projects"}

@dataclass(frozen=True)
class Space:
    key: str
    name: str
    purpose: str = ""
    lead: str | None = None


@dataclass(frozen=True)
class Actor:
    handle: str
    kind: str = "person"
    admin: bool = False
    space: str | None = None
    # the knowledge app: reading and authoring pages. Every agent holds it; a person holds it unless
    # an admin unticks it (`knowledge = false`); admin includes it.
    knowledge: bool = True
    credentials: Credentials = field(default_factory=lambda: Credentials())   # its own, for a remote backend

    @property
    def is_agent(self) -> bool:
        return self.kind == "agent"

    @property
    def holds_knowledge(self) -> bool:
        return self.is_agent or self.admin or self.knowledge


@dataclass(frozen=True)
class Knowledge:
    backend: str = "native"       # native | confluence | plane | none (empty in the file: derived)
    root_space: str = "HOME"
    skills_container: str = "SKILLS"
    scope: tuple[str, ...] = ()   # the native backend's read floor
    vectors: bool = True          # false: nothing embeds the corpus; searches are keyword and say so
    confluence_spaces: tuple[str, ...] = ()   # the Confluence backend's read floor (space keys)
    plane_projects: tuple[str, ...] = ()      # the Plane backend's read floor (project identifiers)


@dataclass(frozen=True)
class Company:
    file: Path
    spaces: dict[str, Space]
    actors: dict[str, Actor]
    knowledge: Knowledge = field(default_factory=Knowledge)
    operator: str | None = None
    embeddings: EmbeddingsSettings = field(default_factory=EmbeddingsSettings)
    llm: LlmSettings | None = None   # [providers.llm]: the chat model answers are written by (optional)
    activated_at: int = 0          # ms; the instant this configuration was activated (the file's mtime)
    integrations: Integrations = field(default_factory=Integrations)
    raw: dict[str, Any] = field(default_factory=dict, repr=False)
    log: LogSettings = field(default_factory=LogSettings)
    limits: PageLimits = field(default_factory=PageLimits)   # [limits]: the most one write may hold
    # the knowledge bank's part of [knowledge] over its environment variables (core/sections/bank.py)
    bank: BankSettings = field(default_factory=BankSettings)
    repositories: RepositoriesSettings = field(default_factory=RepositoriesSettings)   # [repositories.NAME]

    # -- declared containers -------------------------------------------------------------
    def declared_containers(self) -> dict[str, Space]:
        return self._declared

    @cached_property
    def _declared(self) -> dict[str, Space]:
        """Every space a page may be created in: units' spaces, actors' own spaces, and the two
        reserved containers. Each carries its lead (a unit's lead, or the actor whose space it is)."""
        out: dict[str, Space] = {}
        out[self.knowledge.root_space] = Space(self.knowledge.root_space, "Company", "What is true of the whole company")
        out[self.knowledge.skills_container] = Space(
            self.knowledge.skills_container, "Tool skills", "Instructions injected into a phase of every seat's turn"
        )
        for actor in self.actors.values():
            if actor.space:
                out[actor.space] = Space(actor.space, f"{actor.handle}'s space", "", actor.handle)
        out.update(self.spaces)
        return out

    def is_declared(self, container: str) -> bool:
        return container in self.declared_containers()

    def lead_of(self, container: str) -> str | None:
        space = self.declared_containers().get(container)
        return space.lead if space else None

    def actor(self, handle: str) -> Actor:
        try:
            return self.actors[handle]
        except KeyError:
            known = ", ".join(sorted(self.actors)) or "none"
            raise ConfigError(
                self.file, f"actors.{handle}", f"no actor '{handle}' is configured",
                f"use one of: {known}, or add [actors.{handle}] to the file",
            ) from None

    def scope(self) -> frozenset[str]:
        """The active backend's read floor: knowledge.scope, confluence_spaces or plane_projects."""
        k = self.knowledge
        listed = {"confluence": k.confluence_spaces, "plane": k.plane_projects}.get(k.backend, k.scope)
        return frozenset(s.strip() for s in listed if s.strip())


@dataclass(frozen=True)
class RemoteSite:
    """Where a company whose knowledge.backend is remote keeps its knowledge: the backend, its name in
    words and the site's url. It stands here, beside the configuration that says it, so the knowledge base
    (which refuses a local write on such a company) and every surface read it alike (core.knowledge)."""

    backend: str
    label: str
    url: str

    @property
    def where(self) -> str:
        """"Confluence at https://…" (the label alone when no integration names a url)."""
        return f"{self.label} at {self.url}" if self.url else self.label

    def refusal(self, what: str = "", *, write: bool) -> KnowledgeElsewhere:
        """The one line a local write (write=True) or a listing of this node's own copy is refused with:
        where the knowledge lives and to write there. `what`: the copy's part that is not here ("spaces",
        "outline", "history"…)."""
        if write:
            words = (f"this company's knowledge lives in {self.where}, not on this node, and crewlet does not "
                     "write to it — write it there")
        else:
            words = (f"this company's knowledge lives in {self.where}, read live: this node keeps no copy of "
                     f"{'its ' + what if what else 'it'}")
        return KnowledgeElsewhere(words, backend=self.backend, url=self.url, write=write)


def remote_site(company: Company) -> RemoteSite | None:
    """Where the company's knowledge lives when knowledge.backend is remote; None for this node's own."""
    backend = company.knowledge.backend
    if backend not in REMOTE_LABELS:
        return None
    settings = getattr(company.integrations, backend, None)
    return RemoteSite(backend, REMOTE_LABELS[backend], settings.url if settings is not None else "")


# -- the sections: each feature's own table, parsed by its own module --------------------------------------

@dataclass(frozen=True)
class Section:
    """One feature's table of company.toml: where it stands ("log", "providers.llm": a dotted name is a
    table inside a table), the Company field it fills, and the feature's parser — `parse(file, raw)`, raw
    None when the table is absent, returning the settings (its defaults when absent)."""

    table: str
    field: str
    parse: Callable[[Path, Any], Any]


# Adding a section: a `settings.py` in the feature's package (its dataclass and `parse`, built with
# core/settings.py), a line here, and a field of Company above holding what its parse gives when absent
# (tests/test_settings_tables.py holds the two together).
SECTIONS: tuple[Section, ...] = (
    Section("integrations", "integrations", remote_settings.parse),
    Section("providers.embeddings", "embeddings", embed_settings.parse),
    Section("providers.llm", "llm", chat_settings.parse),
    Section("log", "log", log_settings.parse),
    Section("limits", "limits", pages_settings.parse),
    Section("repositories", "repositories", repos_settings.parse),
)
# the tables this module parses itself, and the one it keeps for the company's own words
_OWN_TABLES = ("operator", "knowledge", "spaces", "actors", "company")
_KNOWLEDGE_KEYS = ("backend", "root_space", "skills_container", "scope", "vectors", "confluence_spaces",
                   "plane_projects")
_SPACE_KEYS = ("name", "purpose", "lead")
_ACTOR_KEYS = ("kind", "admin", "space", "knowledge", "credentials")
_COMPANY_KEYS = ("name",)


def _sections(file: Path, data: dict[str, Any]) -> dict[str, Any]:
    """Each section parsed by its feature, by Company field. A table that only holds sections ([providers])
    refuses any other key, as the top level does."""
    holders: dict[str, list[str]] = {}
    for section in SECTIONS:
        outer, _, inner = section.table.partition(".")
        if inner:
            holders.setdefault(outer, []).append(inner)
    for outer, inner_names in holders.items():
        only_known(file, outer, table(file, outer, data.get(outer)), inner_names)
    out: dict[str, Any] = {}
    for section in SECTIONS:
        outer, _, inner = section.table.partition(".")
        raw = data.get(outer)
        if inner:
            raw = table(file, outer, raw).get(inner)
        out[section.field] = section.parse(file, raw)
    return out


def _scope_lists(file: Path, kn_raw: dict[str, Any], backend: str) -> dict[str, list[str]]:
    scopes: dict[str, list[Any]] = {}
    for name, key in SCOPE_KEYS.items():
        example = {"native": '["HANDBOOK"]', "confluence": '["ENG", "HOME"]', "plane": '["ENG"]'}[name]
        scopes[name] = expect(file, f"knowledge.{key}", kn_raw.get(key, []), list, f"write it as a list, e.g. {key} = {example}")
        for item in scopes[name]:
            expect(file, f"knowledge.{key}", item, str, f"write each entry as a quoted key, e.g. {key} = {example}")
        if scopes[name] and backend != name:
            active = SCOPE_KEYS.get(backend)
            raise ConfigError(file, f"knowledge.{key}",
                              f"is the {name} backend's read scope, and knowledge.backend is \"{backend}\"",
                              f"remove knowledge.{key}" + (f" (this backend's scope is knowledge.{active})" if active else
                                                         " (backend \"none\" searches nothing, so nothing narrows)"))
    return scopes


def _parse_knowledge(file: Path, kn_raw: dict[str, Any], backend: str, embeddings: EmbeddingsSettings) -> Knowledge:
    """[knowledge] (its backend derived and checked first: `_knowledge_backend`)."""
    scopes = _scope_lists(file, kn_raw, backend)
    remote = backend in REMOTE_BACKENDS
    if remote and kn_raw.get("vectors") is True:
        raise ConfigError(file, "knowledge.vectors", f"vectors = true with knowledge.backend = \"{backend}\", which keeps "
                          "no local copy to embed (the backend ranks by its own search)", "remove knowledge.vectors")
    # knowledge.vectors derives from whether there is an embeddings provider (spec 000, Configuration)
    no_provider = embeddings.provider == "none"
    if no_provider and kn_raw.get("vectors") is True:
        raise ConfigError(file, "knowledge.vectors", 'vectors = true with providers.embeddings provider = "none": '
                          "there is no model to embed with", 'remove knowledge.vectors, or name a provider '
                          '(provider = "local" is the embedded model)')
    vectors = expect(file, "knowledge.vectors", kn_raw.get("vectors", not remote and not no_provider), bool,
                     "set it to true or false")
    reserved = {}
    for name, default in (("root_space", "HOME"), ("skills_container", "SKILLS")):
        value = expect(file, f"knowledge.{name}", kn_raw.get(name, default), str, f'e.g. {name} = "{default}"')
        if not KEY_RE.match(value):
            raise ConfigError(file, f"knowledge.{name}", f"'{value}' is not a valid space key",
                              "use letters, digits, '_', '-', '.' (no '/': a page is addressed as KEY/Title)")
        reserved[name] = value
    if reserved["root_space"] == reserved["skills_container"]:
        raise ConfigError(file, "knowledge.skills_container", "is the same container as knowledge.root_space",
                          "give the tool skills a container of their own")
    return Knowledge(backend=backend, root_space=reserved["root_space"], skills_container=reserved["skills_container"],
                     scope=tuple(scopes["native"]), vectors=vectors, confluence_spaces=tuple(scopes["confluence"]),
                     plane_projects=tuple(scopes["plane"]))


def _parse_actors(file: Path, data: dict[str, Any]) -> dict[str, Actor]:
    actors: dict[str, Actor] = {}
    actors_raw = expect(file, "actors", data.get("actors", {}), dict, "declare actors as [actors.HANDLE] tables")
    for handle, a in actors_raw.items():
        key = f"actors.{handle}"
        if not HANDLE_RE.match(handle):
            raise ConfigError(file, key, "a handle is lower-case letters, digits, '.', '_' or '-'", "rename the table")
        expect(file, key, a, dict, f"make [{key}] a table")
        only_known(file, key, a, _ACTOR_KEYS)
        kind = a.get("kind", "person")
        if kind not in ACTOR_KINDS:
            raise ConfigError(file, f"{key}.kind", f"'{kind}' is not an actor kind", 'set it to "person" or "agent"')
        admin = expect(file, f"{key}.admin", a.get("admin", False), bool, "set it to true or false")
        holds = expect(file, f"{key}.knowledge", a.get("knowledge", True), bool, "set it to true or false")
        space = a.get("space")
        if space is not None:
            expect(file, f"{key}.space", space, str, 'e.g. space = "ENG"')
            if not KEY_RE.match(space):
                raise ConfigError(file, f"{key}.space", f"'{space}' is not a valid space key", "use letters, digits, '_', '-', '.'")
        credentials = remote_settings.parse_credentials(file, key, a.get("credentials", {}))
        actors[handle] = Actor(handle=handle, kind=kind, admin=admin, space=space, knowledge=holds,
                               credentials=credentials)
    return actors


def _parse_spaces(file: Path, data: dict[str, Any], actors: dict[str, Actor]) -> dict[str, Space]:
    spaces: dict[str, Space] = {}
    spaces_raw = expect(file, "spaces", data.get("spaces", {}), dict, "declare spaces as [spaces.KEY] tables")
    for skey, s in spaces_raw.items():
        key = f"spaces.{skey}"
        if not KEY_RE.match(skey):
            raise ConfigError(file, key, f"'{skey}' is not a valid space key", "use letters, digits, '_', '-', '.'")
        expect(file, key, s, dict, f"make [{key}] a table")
        only_known(file, key, s, _SPACE_KEYS)
        lead = s.get("lead")
        if lead is not None:
            expect(file, f"{key}.lead", lead, str, 'name an actor, e.g. lead = "alex"')
        if lead is not None and lead not in actors:
            raise ConfigError(file, f"{key}.lead", f"'{lead}' is not a configured actor",
                              f"add [actors.{lead}] or name one of: {', '.join(sorted(actors)) or 'none'}")
        spaces[skey] = Space(
            key=skey,
            name=expect(file, f"{key}.name", s.get("name", skey), str, 'e.g. name = "Engineering"'),
            purpose=expect(file, f"{key}.purpose", s.get("purpose", ""), str, "write the purpose as a string"),
            lead=lead,
        )
    return spaces


def parse(data: dict[str, Any], file: Path, activated_at: int = 0) -> Company:
    known_top = sorted({*_OWN_TABLES, *(s.table.partition(".")[0] for s in SECTIONS)})
    only_known(file, "", data, known_top)
    company_raw = table(file, "company", data.get("company"))
    only_known(file, "company", company_raw, _COMPANY_KEYS)

    kn_raw = expect(file, "knowledge", data.get("knowledge", {}), dict, "make [knowledge] a table")
    only_known(file, "knowledge", kn_raw, (*_KNOWLEDGE_KEYS, *bank_settings.KEYS))   # the bank's keys: its room
    integrations_raw = expect(file, "integrations", data.get("integrations", {}), dict, "make [integrations] a table")
    backend = _knowledge_backend(file, kn_raw, integrations_raw)   # single-homed first: the table's own
    sections = _sections(file, data)                                # problems matter once it belongs here
    knowledge = _parse_knowledge(file, kn_raw, backend, sections["embeddings"])
    actors = _parse_actors(file, data)
    spaces = _parse_spaces(file, data, actors)

    operator = data.get("operator")
    if operator is not None:
        expect(file, "operator", operator, str, 'e.g. operator = "alex"')
        if operator not in actors:
            raise ConfigError(file, "operator", f"'{operator}' is not a configured actor",
                              f"add [actors.{operator}] or name one of: {', '.join(sorted(actors)) or 'none'}")
    # last, once the file is known to load: an unreadable value of the bank is warned about, not refused
    bank = bank_settings.parse(file, kn_raw, os.environ)
    return Company(file=file, spaces=spaces, actors=actors, knowledge=knowledge, operator=operator,
                   activated_at=activated_at, raw=data, bank=bank, **sections)


def _knowledge_backend(file: Path, kn_raw: dict[str, Any], integrations: dict[str, Any]) -> str:
    """knowledge.backend, single-homed: one knowledge home, so the answer to "what do we already know"
    never depends on which searcher was asked. Empty derives: confluence when [integrations.confluence]
    is declared, plane when an enabled [integrations.plane] is, native otherwise."""
    plane = integrations.get("plane")
    plane_off = isinstance(plane, dict) and plane.get("enabled", True) is False
    declared = [name for name in REMOTE_BACKENDS if name in integrations and not (name == "plane" and plane_off)]
    if len(declared) > 1:
        raise ConfigError(file, "integrations", "declares both [integrations.confluence] and an enabled "
                          "[integrations.plane]", "remove one (or set enabled = false under [integrations.plane]): "
                          "a company has exactly one knowledge home")
    backend = expect(file, "knowledge.backend", kn_raw.get("backend", ""), str, 'e.g. backend = "native"').strip()
    if not backend:
        return declared[0] if declared else "native"
    if backend not in BACKENDS:
        raise ConfigError(file, "knowledge.backend", f"'{backend}' is not a backend this build serves",
                          "set it to \"native\", \"confluence\", \"plane\" or \"none\"")
    if backend in ("native", "none") and declared:
        other = declared[0]
        raise ConfigError(file, f"integrations.{other}", f"declared beside knowledge.backend = \"{backend}\"",
                          f"remove one: a company has exactly one knowledge home (or set knowledge.backend = \"{other}\")")
    if backend in REMOTE_BACKENDS and backend not in declared:
        beside = declared[0] if declared else None
        if beside:
            raise ConfigError(file, f"integrations.{beside}", f"declared beside knowledge.backend = \"{backend}\"",
                              "remove one: a company has exactly one knowledge home")
        example = ('url = "https://example.atlassian.net/wiki" and token_env = "CONFLUENCE_API_TOKEN"'
                   if backend == "confluence" else
                   'url = "https://plane.example.com", workspace = "acme" and token_env = "PLANE_API_KEY"')
        if backend == "plane" and plane_off:
            raise ConfigError(file, "knowledge.backend", "\"plane\" needs [integrations.plane], which is enabled = false",
                              "set enabled = true under [integrations.plane], or set knowledge.backend = \"native\"")
        raise ConfigError(file, "knowledge.backend", f"\"{backend}\" needs [integrations.{backend}]",
                          f"add [integrations.{backend}] with {example}, or set knowledge.backend = \"native\"")
    return backend


def load(file: Path) -> Company:
    try:
        raw_bytes = file.read_bytes()
    except FileNotFoundError:
        raise ConfigError(file, "(file)", "not found", "run `crewlet init` (or `crewlet init --example`), or pass --home") from None
    except OSError as exc:
        # a READ failure, said as one: the file is there and this process cannot read it
        raise ConfigError(file, "(file)", f"cannot be read ({exc.strerror or exc})", unreadable_fix(file, exc)) from None
    try:
        data = tomllib.loads(raw_bytes.decode("utf-8"))
    except UnicodeDecodeError:
        raise ConfigError(file, "(file)", "is not UTF-8 text", "save it as UTF-8") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(file, "(syntax)", str(exc), "fix the TOML syntax at that line") from None
    return parse(data, file, activated_at=file.stat().st_mtime_ns // 1_000_000)


def unreadable_fix(file: Path, exc: OSError) -> str:
    """What to do about a company.toml this process cannot read."""
    if isinstance(exc, IsADirectoryError):
        return f"{file.name} must be a file: move the directory aside and put the file back"
    if isinstance(exc, PermissionError):
        return f"let this user read it (e.g. chmod u+r {file}), or run crewlet as the user who owns the home"
    return "check the disk and the file, then retry"


# -- node.toml: what is this node's own ------------------------------------------------------------------

NODE_ID_RE = re.compile(r"^[a-z0-9][a-z0-9-]{3,63}$")
_NODE_KEYS = ("node_id", "operator", "shared", "rerank_memory_mb")


@dataclass(frozen=True)
class NodeSettings:
    """A home's node.toml: the node's id (stamped on every record it writes), its operator (who a CLI
    session acts as by default here, over company.toml's), and the shared directory it joined."""

    node_id: str = ""
    operator: str | None = None
    shared: str | None = None
    # the memory a search by meaning may hold for its compact copy of the vectors (core/search/vector_file.py);
    # None: its default. Past it, stage two reads its candidates from the database and the answer says so
    rerank_memory_mb: int | None = None

    def to_toml(self) -> dict[str, Any]:
        out = {k: v for k, v in (("node_id", self.node_id), ("operator", self.operator), ("shared", self.shared)) if v}
        return out if self.rerank_memory_mb is None else out | {"rerank_memory_mb": self.rerank_memory_mb}


def new_node_id() -> str:
    return "n" + uuid.uuid4().hex[:11]


def load_node(file: Path) -> NodeSettings:
    """node.toml, strictly (a home without one has no id yet: see `ensure_node_id`)."""
    try:
        data = read_node_file(file, cached=False)
    except OSError as exc:
        raise ConfigError(file, "(file)", f"cannot be read ({exc.strerror or exc})", unreadable_fix(file, exc)) from None
    except UnicodeDecodeError:
        raise ConfigError(file, "(file)", "is not UTF-8 text", "save it as UTF-8") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(file, "(syntax)", str(exc), "fix the TOML syntax at that line") from None
    only_known(file, "", data, _NODE_KEYS)
    node_id = expect(file, "node_id", data.get("node_id", ""), str, 'e.g. node_id = "n3f2a9c0d1b7e"')
    if node_id and not NODE_ID_RE.match(node_id):
        raise ConfigError(file, "node_id", f"{node_id!r} is not a node id",
                          "use 4-64 lower-case letters, digits or '-' (or remove it: a new one is made)")
    operator = data.get("operator")
    if operator is not None:
        expect(file, "operator", operator, str, 'e.g. operator = "alex"')
    shared = data.get("shared")
    if shared is not None:
        expect(file, "shared", shared, str, 'e.g. shared = "/mnt/team/crewlet"')
    memory = data.get("rerank_memory_mb")
    if memory is not None:
        whole(file, "rerank_memory_mb", memory, low=0, example="rerank_memory_mb = 2048")
    return NodeSettings(node_id=node_id, operator=operator or None, shared=shared or None, rerank_memory_mb=memory)


def write_node(file: Path, settings: NodeSettings) -> None:
    """Write atomically and durably: node.toml is what makes a home a node of a shared directory."""
    write_atomic(file, tomli_w.dumps(settings.to_toml()).encode("utf-8"))


def with_operator(company: Company, settings: NodeSettings, node_file: Path) -> Company:
    """The company as this node runs it: node.toml's operator, when it names one, over company.toml's
    (the company file is shared by every node; who sits at this one is the node's own)."""
    if not settings.operator:
        return company
    if settings.operator not in company.actors:
        raise ConfigError(node_file, "operator", f"'{settings.operator}' is not an actor of {company.file}",
                          f"name one of: {', '.join(sorted(company.actors)) or 'none'} (or add [actors.{settings.operator}])")
    return replace(company, operator=settings.operator)


def write(file: Path, data: dict[str, Any]) -> None:
    """Write atomically and durably, so a crash never leaves a half-written company.toml."""
    write_atomic(file, tomli_w.dumps(data).encode("utf-8"))


def declare_spaces(file: Path, keys: list[str]) -> list[str]:
    """Add [spaces.KEY] for each key not yet declared. The tables are appended as text, so the
    file's comments and layout stay as the operator wrote them; the result is parsed before it
    replaces the file."""
    company = load(file)
    added: list[str] = []
    for key in keys:
        if not company.is_declared(key) and key not in added:
            if not KEY_RE.match(key):
                raise ConfigError(file, f"spaces.{key}", f"'{key}' is not a valid space key", "rename the directory")
            added.append(key)
    if not added:
        return []
    text = file.read_text(encoding="utf-8")
    tables = "".join(tomli_w.dumps({"spaces": {key: {"name": key, "purpose": "declared by crewlet import"}}})
                     + "\n" for key in added)
    new_text = text + ("" if text.endswith("\n") else "\n") + "\n" + tables
    try:
        parse(tomllib.loads(new_text), file)  # never write a file that would not load
    except tomllib.TOMLDecodeError:
        # e.g. spaces written as an inline table: rewrite the whole file (its comments are lost)
        data = dict(company.raw)
        data["spaces"] = dict(data.get("spaces", {})) | {
            key: {"name": key, "purpose": "declared by crewlet import"} for key in added}
        write(file, data)
        return added
    tmp = file.with_suffix(".toml.tmp")
    tmp.write_text(new_text, encoding="utf-8")
    tmp.replace(file)
    return added


def example_config() -> dict[str, Any]:
    return {
        "operator": "alex",
        "knowledge": {"backend": "native", "root_space": "HOME", "skills_container": "SKILLS", "scope": []},
        "spaces": {
            "ENG": {"name": "Engineering", "purpose": "Builds and runs the product", "lead": "alex"},
            "LEAD": {"name": "Leadership", "purpose": "How the company is run", "lead": "alex"},
            "PROD": {"name": "Product", "purpose": "What we build next and why", "lead": "sam"},
        },
        "actors": {
            "alex": {"kind": "person", "admin": True},
            "sam": {"kind": "person", "admin": False},
            "eng-bot": {"kind": "agent", "admin": False, "space": "ENG"},
        },
    }


def empty_config(operator: str = "admin") -> dict[str, Any]:
    return {
        "operator": operator,
        "knowledge": {"backend": "native", "root_space": "HOME", "skills_container": "SKILLS", "scope": []},
        "spaces": {},
        "actors": {operator: {"kind": "person", "admin": True}},
    }
