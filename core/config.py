"""company.toml: the spaces, actors and knowledge settings a node runs under.

Read with tomllib and written with tomli-w. Every error names the file, the key and the fix,
because an operator fixes it in an editor, not in a stack trace.
"""
from __future__ import annotations

import re
import tomllib
import uuid
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

import tomli_w

from core.durable import write_atomic

from core.embed import LOCAL_DIMENSIONS, LOCAL_MODEL, MAX_BATCH_INPUTS

if TYPE_CHECKING:
    from core.ask.settings import LlmSettings

ACTOR_KINDS = ("person", "agent")
KEY_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
HANDLE_RE = re.compile(r"^[a-z0-9][a-z0-9_.-]{0,63}$")
AUTO_DRAFTED_PARENT = "Auto-Drafted Skills"
AUTO_DRAFT_TITLE_PREFIX = "[Auto-draft]"


class ConfigError(Exception):
    """A configuration problem, told as one line: file, key, what is wrong and the fix."""

    def __init__(self, file: Path | str, key: str, problem: str, fix: str) -> None:
        self.file, self.key, self.problem, self.fix = str(file), key, problem, fix
        super().__init__(f"{file}: {key}: {problem} — {fix}")


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

    @property
    def is_agent(self) -> bool:
        return self.kind == "agent"

    @property
    def holds_knowledge(self) -> bool:
        return self.is_agent or self.admin or self.knowledge


EMBEDDING_PROVIDERS = ("local", "openai")
ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_EMBEDDINGS_KEYS = {
    "local": ("provider", "model", "dimensions", "max_batch_inputs"),
    "openai": ("provider", "base_url", "model", "dimensions", "api_key_env",
               "max_input_tokens", "max_batch_tokens", "max_batch_inputs"),
}


@dataclass(frozen=True)
class EmbeddingsSettings:
    """[providers.embeddings]: which model turns text into vectors. The default is the local model,
    which needs no network and no key."""
    provider: str = "local"       # "local" (embedded, offline) or "openai" (any OpenAI-compatible endpoint)
    base_url: str = ""            # e.g. "http://127.0.0.1:8089/v1"; POST {base_url}/embeddings
    model: str = LOCAL_MODEL      # the local model's name, or the endpoint's model
    dimensions: int = LOCAL_DIMENSIONS   # the stored width (an endpoint is sent it as `dimensions`)
    api_key_env: str = ""         # the NAME of the environment variable holding the key; never the key
    max_input_tokens: int = 8192
    max_batch_tokens: int = 300_000
    max_batch_inputs: int | None = None   # None: the provider's own (128 for an endpoint)


@dataclass(frozen=True)
class Knowledge:
    backend: str = "native"
    root_space: str = "HOME"
    skills_container: str = "SKILLS"
    scope: tuple[str, ...] = ()
    vectors: bool = True          # false: nothing embeds the corpus; searches are keyword and say so


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
    raw: dict[str, Any] = field(default_factory=dict, repr=False)

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
        return frozenset(s.strip() for s in self.knowledge.scope if s.strip())


def _expect(file: Path, key: str, value: Any, typ: type | tuple[type, ...], fix: str) -> Any:
    if not isinstance(value, typ):
        names = typ.__name__ if isinstance(typ, type) else " or ".join(t.__name__ for t in typ)
        raise ConfigError(file, key, f"expected {names}, found {type(value).__name__} {value!r}", fix)
    return value


def _whole(file: Path, key: str, value: Any, *, low: int, high: int | None = None, example: str) -> int:
    """A whole number in [low, high]; a bool is not one (TOML true would otherwise read as 1)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(file, key, f"expected a whole number, found {type(value).__name__} {value!r}",
                          f"write a whole number, e.g. {example}")
    if value < low or (high is not None and value > high):
        bound = f"from {low} to {high}" if high is not None else f"at least {low}"
        raise ConfigError(file, key, f"{value} is out of range", f"use a whole number {bound}, e.g. {example}")
    return value


def _parse_embeddings(file: Path, raw: Any) -> EmbeddingsSettings:
    """[providers.embeddings]; absent means the local model. An endpoint needs base_url, model and
    dimensions; its key is named by api_key_env and read from the environment when it is used."""
    table = "providers.embeddings"
    e = _expect(file, table, raw, dict, "make [providers.embeddings] a table")
    provider = e.get("provider", "local")
    if provider not in EMBEDDING_PROVIDERS:
        raise ConfigError(file, f"{table}.provider", f"{provider!r} is not an embeddings provider",
                          'set it to "local" (the embedded model) or "openai" (any OpenAI-compatible endpoint)')
    allowed = _EMBEDDINGS_KEYS[provider]
    for key in e:
        if key not in allowed:
            hint = (' (it is for provider = "openai")' if key in _EMBEDDINGS_KEYS["openai"] else "")
            raise ConfigError(file, f"{table}.{key}", f"not a setting of provider = {provider!r}{hint}",
                              f"remove it, or use one of: {', '.join(allowed)}")
    batch_inputs = e.get("max_batch_inputs")
    if batch_inputs is not None:
        batch_inputs = _whole(file, f"{table}.max_batch_inputs", batch_inputs, low=1, high=MAX_BATCH_INPUTS,
                              example="max_batch_inputs = 128")
    if provider == "local":
        model = _expect(file, f"{table}.model", e.get("model", LOCAL_MODEL), str, f'model = "{LOCAL_MODEL}"')
        if model != LOCAL_MODEL:
            raise ConfigError(file, f"{table}.model", f"the local provider has no model {model!r}",
                              f'remove model (the local model is "{LOCAL_MODEL}"), or set provider = "openai"')
        dimensions = _whole(file, f"{table}.dimensions", e.get("dimensions", LOCAL_DIMENSIONS), low=1,
                            example=f"dimensions = {LOCAL_DIMENSIONS}")
        if dimensions != LOCAL_DIMENSIONS:
            raise ConfigError(file, f"{table}.dimensions", f"the local model is {LOCAL_DIMENSIONS} wide, not {dimensions}",
                              f"remove dimensions (or set it to {LOCAL_DIMENSIONS})")
        return EmbeddingsSettings(provider="local", model=model, dimensions=dimensions, max_batch_inputs=batch_inputs)

    missing = [k for k in ("base_url", "model", "dimensions") if k not in e]
    if missing:
        examples = {"base_url": 'base_url = "https://api.openai.com/v1"', "model": 'model = "text-embedding-3-small"',
                    "dimensions": "dimensions = 1536"}
        raise ConfigError(file, f"{table}.{missing[0]}", f"provider = \"openai\" needs {', '.join(missing)}",
                          "add " + "; ".join(examples[k] for k in missing))
    base_url = _expect(file, f"{table}.base_url", e["base_url"], str, 'base_url = "http://127.0.0.1:8089/v1"').strip()
    if not re.match(r"^https?://[^/\s]+", base_url):
        raise ConfigError(file, f"{table}.base_url", f"{base_url!r} is not an http(s) URL",
                          'write it with its scheme, e.g. base_url = "http://127.0.0.1:8089/v1" (embeddings are POSTed to {base_url}/embeddings)')
    model = _expect(file, f"{table}.model", e["model"], str, 'model = "text-embedding-3-small"').strip()
    if not model:
        raise ConfigError(file, f"{table}.model", "is empty", 'name the endpoint\'s model, e.g. model = "text-embedding-3-small"')
    dimensions = _whole(file, f"{table}.dimensions", e["dimensions"], low=1, high=65_536, example="dimensions = 1536")
    api_key_env = _expect(file, f"{table}.api_key_env", e.get("api_key_env", ""), str, 'api_key_env = "OPENAI_API_KEY"')
    if api_key_env and not ENV_NAME_RE.match(api_key_env):
        looks_like_key = api_key_env.startswith("sk-") or len(api_key_env) >= 32
        raise ConfigError(file, f"{table}.api_key_env",
                          "looks like a key, not the name of an environment variable" if looks_like_key
                          else "is not an environment variable name",
                          'put the key in an environment variable and name it here, e.g. api_key_env = "OPENAI_API_KEY"'
                          + (" (and rotate the key: it has been written to a file)" if looks_like_key else ""))
    max_input_tokens = _whole(file, f"{table}.max_input_tokens", e.get("max_input_tokens", 8192), low=1,
                              example="max_input_tokens = 8192")
    max_batch_tokens = _whole(file, f"{table}.max_batch_tokens", e.get("max_batch_tokens", 300_000), low=1,
                              example="max_batch_tokens = 300000")
    return EmbeddingsSettings(
        provider="openai", base_url=base_url.rstrip("/"), model=model, dimensions=dimensions, api_key_env=api_key_env,
        max_input_tokens=max_input_tokens, max_batch_tokens=max_batch_tokens,
        max_batch_inputs=batch_inputs if batch_inputs is not None else MAX_BATCH_INPUTS,
    )


def parse(data: dict[str, Any], file: Path, activated_at: int = 0) -> Company:
    known_top = {"operator", "knowledge", "spaces", "actors", "providers", "integrations", "company"}
    for key in data:
        if key not in known_top:
            raise ConfigError(file, key, "unknown setting", f"remove it, or use one of: {', '.join(sorted(known_top))}")

    kn_raw = _expect(file, "knowledge", data.get("knowledge", {}), dict, "make [knowledge] a table")
    backend = kn_raw.get("backend", "native")
    if backend not in ("native", "none"):
        raise ConfigError(file, "knowledge.backend", f"'{backend}' is not a backend this build serves",
                          "set it to \"native\" (or \"none\")")
    integrations = _expect(file, "integrations", data.get("integrations", {}), dict, "make [integrations] a table")
    if backend == "native" and "confluence" in integrations:
        raise ConfigError(file, "integrations.confluence", "declared beside knowledge.backend = \"native\"",
                          "remove one: a company has exactly one knowledge home")
    scope = _expect(file, "knowledge.scope", kn_raw.get("scope", []), list, 'write it as a list, e.g. scope = ["HANDBOOK"]')
    if backend == "none" and scope:
        raise ConfigError(file, "knowledge.scope", "a read scope with no backend behind it narrows nothing",
                          "remove knowledge.scope or set knowledge.backend = \"native\"")
    vectors = _expect(file, "knowledge.vectors", kn_raw.get("vectors", True), bool, "set it to true or false")
    reserved = {}
    for name, default in (("root_space", "HOME"), ("skills_container", "SKILLS")):
        value = _expect(file, f"knowledge.{name}", kn_raw.get(name, default), str, f'e.g. {name} = "{default}"')
        if not KEY_RE.match(value):
            raise ConfigError(file, f"knowledge.{name}", f"'{value}' is not a valid space key",
                              "use letters, digits, '_', '-', '.' (no '/': a page is addressed as KEY/Title)")
        reserved[name] = value
    if reserved["root_space"] == reserved["skills_container"]:
        raise ConfigError(file, "knowledge.skills_container", "is the same container as knowledge.root_space",
                          "give the tool skills a container of their own")
    knowledge = Knowledge(
        backend=backend,
        root_space=reserved["root_space"],
        skills_container=reserved["skills_container"],
        scope=tuple(str(s) for s in scope),
        vectors=vectors,
    )

    actors: dict[str, Actor] = {}
    actors_raw = _expect(file, "actors", data.get("actors", {}), dict, "declare actors as [actors.HANDLE] tables")
    for handle, a in actors_raw.items():
        key = f"actors.{handle}"
        if not HANDLE_RE.match(handle):
            raise ConfigError(file, key, "a handle is lower-case letters, digits, '.', '_' or '-'", "rename the table")
        _expect(file, key, a, dict, f"make [{key}] a table")
        kind = a.get("kind", "person")
        if kind not in ACTOR_KINDS:
            raise ConfigError(file, f"{key}.kind", f"'{kind}' is not an actor kind", 'set it to "person" or "agent"')
        admin = _expect(file, f"{key}.admin", a.get("admin", False), bool, "set it to true or false")
        holds = _expect(file, f"{key}.knowledge", a.get("knowledge", True), bool, "set it to true or false")
        space = a.get("space")
        if space is not None:
            _expect(file, f"{key}.space", space, str, 'e.g. space = "ENG"')
            if not KEY_RE.match(space):
                raise ConfigError(file, f"{key}.space", f"'{space}' is not a valid space key", "use letters, digits, '_', '-', '.'")
        actors[handle] = Actor(handle=handle, kind=kind, admin=admin, space=space, knowledge=holds)

    spaces: dict[str, Space] = {}
    spaces_raw = _expect(file, "spaces", data.get("spaces", {}), dict, "declare spaces as [spaces.KEY] tables")
    for skey, s in spaces_raw.items():
        key = f"spaces.{skey}"
        if not KEY_RE.match(skey):
            raise ConfigError(file, key, f"'{skey}' is not a valid space key", "use letters, digits, '_', '-', '.'")
        _expect(file, key, s, dict, f"make [{key}] a table")
        lead = s.get("lead")
        if lead is not None:
            _expect(file, f"{key}.lead", lead, str, 'name an actor, e.g. lead = "alex"')
        if lead is not None and lead not in actors:
            raise ConfigError(file, f"{key}.lead", f"'{lead}' is not a configured actor",
                              f"add [actors.{lead}] or name one of: {', '.join(sorted(actors)) or 'none'}")
        spaces[skey] = Space(
            key=skey,
            name=_expect(file, f"{key}.name", s.get("name", skey), str, 'e.g. name = "Engineering"'),
            purpose=_expect(file, f"{key}.purpose", s.get("purpose", ""), str, "write the purpose as a string"),
            lead=lead,
        )

    operator = data.get("operator")
    if operator is not None:
        _expect(file, "operator", operator, str, 'e.g. operator = "alex"')
        if operator not in actors:
            raise ConfigError(file, "operator", f"'{operator}' is not a configured actor",
                              f"add [actors.{operator}] or name one of: {', '.join(sorted(actors)) or 'none'}")

    prov = _expect(file, "providers", data.get("providers", {}), dict, "make [providers] a table")
    embeddings = _parse_embeddings(file, prov.get("embeddings", {}))
    from core.ask.settings import parse_llm

    llm = parse_llm(file, prov.get("llm"))

    return Company(file=file, spaces=spaces, actors=actors, knowledge=knowledge, operator=operator,
                   embeddings=embeddings, llm=llm, activated_at=activated_at, raw=data)


def load(file: Path) -> Company:
    try:
        raw_bytes = file.read_bytes()
    except FileNotFoundError:
        raise ConfigError(file, "(file)", "not found", "run `crewlet init` (or `crewlet init --example`), or pass --home") from None
    try:
        data = tomllib.loads(raw_bytes.decode("utf-8"))
    except UnicodeDecodeError:
        raise ConfigError(file, "(file)", "is not UTF-8 text", "save it as UTF-8") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(file, "(syntax)", str(exc), "fix the TOML syntax at that line") from None
    return parse(data, file, activated_at=file.stat().st_mtime_ns // 1_000_000)


# -- node.toml: what is this node's own ------------------------------------------------------------------

NODE_ID_RE = re.compile(r"^[a-z0-9][a-z0-9-]{3,63}$")
_NODE_KEYS = ("node_id", "operator", "shared")


@dataclass(frozen=True)
class NodeSettings:
    """A home's node.toml: the node's id (stamped on every record it writes), its operator (who a CLI
    session acts as by default here, over company.toml's), and the shared directory it joined."""

    node_id: str = ""
    operator: str | None = None
    shared: str | None = None

    def to_toml(self) -> dict[str, Any]:
        return {k: v for k, v in (("node_id", self.node_id), ("operator", self.operator), ("shared", self.shared)) if v}


def new_node_id() -> str:
    return "n" + uuid.uuid4().hex[:11]


def load_node(file: Path) -> NodeSettings:
    """node.toml, strictly (a home without one has no id yet: see `ensure_node_id`)."""
    try:
        text = file.read_text(encoding="utf-8")
    except FileNotFoundError:
        return NodeSettings()
    except UnicodeDecodeError:
        raise ConfigError(file, "(file)", "is not UTF-8 text", "save it as UTF-8") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(file, "(syntax)", str(exc), "fix the TOML syntax at that line") from None
    for key in data:
        if key not in _NODE_KEYS:
            raise ConfigError(file, key, "unknown setting", f"remove it, or use one of: {', '.join(_NODE_KEYS)}")
    node_id = _expect(file, "node_id", data.get("node_id", ""), str, 'e.g. node_id = "n3f2a9c0d1b7e"')
    if node_id and not NODE_ID_RE.match(node_id):
        raise ConfigError(file, "node_id", f"{node_id!r} is not a node id",
                          "use 4-64 lower-case letters, digits or '-' (or remove it: a new one is made)")
    operator = data.get("operator")
    if operator is not None:
        _expect(file, "operator", operator, str, 'e.g. operator = "alex"')
    shared = data.get("shared")
    if shared is not None:
        _expect(file, "shared", shared, str, 'e.g. shared = "/mnt/team/crewlet"')
    return NodeSettings(node_id=node_id, operator=operator or None, shared=shared or None)


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
