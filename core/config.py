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
from typing import Any

import tomli_w

from core.durable import write_atomic
from core.errors import KnowledgeElsewhere

from core.embed import LOCAL_DIMENSIONS, LOCAL_MODEL, MAX_BATCH_INPUTS, EmbeddingsSettings
from core.paths import read_node_file

from core.chat import DEFAULT_MAX_OUTPUT_TOKENS, DEFAULT_MAX_SOURCES, DEFAULT_SOURCE_TOKENS, DEFAULT_TIMEOUT_S
from core.chat import KEYS as LLM_KEYS
from core.chat import MAX_TIMEOUT_S, WINDOWS, LlmSettings

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
    credentials: Credentials = field(default_factory=lambda: Credentials())   # its own, for a remote backend

    @property
    def is_agent(self) -> bool:
        return self.kind == "agent"

    @property
    def holds_knowledge(self) -> bool:
        return self.is_agent or self.admin or self.knowledge


# "none": no embeddings provider at all — nothing embeds (searches are keyword, agents' diaries recency
# alone), knowledge.vectors derives false, and vectors = true beside it is refused
EMBEDDING_PROVIDERS = ("local", "openai", "none")
ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_EMBEDDINGS_KEYS = {
    "local": ("provider", "model", "dimensions", "max_batch_inputs"),
    "none": ("provider",),
    "openai": ("provider", "base_url", "model", "dimensions", "api_key_env",
               "max_input_tokens", "max_batch_tokens", "max_batch_inputs"),
}


LOG_BACKENDS = ("file", "jetstream")
STREAM_PREFIX_RE = re.compile(r"^[A-Za-z0-9_-]{1,32}$")
_LOG_KEYS = ("backend", "url", "stream_prefix", "replicas", "creds", "token_env", "tls_ca", "monitor",
             "duplicate_window_s")


@dataclass(frozen=True)
class LogSettings:
    """[log]: where the company's ordered logs live. "file": a file per log in the home (or the shared
    directory it joined); "jetstream": a stream per log on NATS JetStream (core/log/jetstream.py)."""
    backend: str = "file"
    url: tuple[str, ...] = ()      # NATS servers, nats:// or tls:// (one, or a cluster's several)
    stream_prefix: str = "crewlet"  # streams PREFIX-pages and PREFIX-vectors, key-value bucket PREFIX-company
    replicas: int = 1             # 1 for a single server, 3 for a cluster
    creds: str = ""               # a NATS credentials file (JWT + seed, or an nkey seed), read on each node
    token_env: str = ""           # the NAME of the environment variable holding a token; never the token
    tls_ca: str = ""              # a CA file for tls:// servers signed by a private CA
    monitor: tuple[str, ...] = ()  # the servers' monitoring URLs (http://HOST:8222), where /varz says sync_interval
    duplicate_window_s: int = 600  # how long a record's op_id is remembered against a retried append


@dataclass(frozen=True)
class Knowledge:
    backend: str = "native"       # native | confluence | plane | none (empty in the file: derived)
    root_space: str = "HOME"
    skills_container: str = "SKILLS"
    scope: tuple[str, ...] = ()   # the native backend's read floor
    vectors: bool = True          # false: nothing embeds the corpus; searches are keyword and say so
    confluence_spaces: tuple[str, ...] = ()   # the Confluence backend's read floor (space keys)
    plane_projects: tuple[str, ...] = ()      # the Plane backend's read floor (project identifiers)


# -- the remote knowledge backends: [integrations.*] and an actor's own credentials ---------------------
BACKENDS = ("native", "confluence", "plane", "none")
# a remote backend and its name in words: the one list (core.knowledge asks it for every surface)
REMOTE_LABELS = {"confluence": "Confluence", "plane": "Plane"}
REMOTE_BACKENDS = tuple(REMOTE_LABELS)
SCOPE_KEYS = {"native": "scope", "confluence": "confluence_spaces", "plane": "plane_projects"}
DEFAULT_CONNECT_TIMEOUT_S = 3.0
DEFAULT_READ_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class Credentials:
    """[actors.HANDLE.credentials]: the NAMES of the environment variables holding an actor's own
    credential for a remote backend (never the secret itself)."""

    confluence_token_env: str = ""
    confluence_username_env: str = ""
    plane_token_env: str = ""


@dataclass(frozen=True)
class ConfluenceSettings:
    """[integrations.confluence]: the site, and the company's read credential (by variable name).
    With username_env it is Cloud (basic auth: username + API token); without, Data Center (bearer
    personal access token)."""

    url: str
    token_env: str
    username_env: str = ""
    connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S
    read_timeout_s: float = DEFAULT_READ_TIMEOUT_S

    @property
    def cloud(self) -> bool:
        return bool(self.username_env)


@dataclass(frozen=True)
class PlaneSettings:
    """[integrations.plane]: the instance, the workspace, the company's read key (by variable name) and
    the project holding tool skills (dropped from every search, the target of `trigger:` files)."""

    url: str
    workspace: str
    token_env: str
    skills_project: str = "SKILLS"
    enabled: bool = True
    connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S
    read_timeout_s: float = DEFAULT_READ_TIMEOUT_S


@dataclass(frozen=True)
class Integrations:
    confluence: ConfluenceSettings | None = None
    plane: PlaneSettings | None = None


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


def _api_key_env(file: Path, table: str, e: dict[str, Any]) -> str:
    """The name of the environment variable holding a provider's key: a key written here instead is refused
    (and said to be rotated: it is in a file now)."""
    api_key_env = _expect(file, f"{table}.api_key_env", e.get("api_key_env", ""), str, 'api_key_env = "OPENAI_API_KEY"')
    if api_key_env and not ENV_NAME_RE.match(api_key_env):
        looks_like_key = api_key_env.startswith("sk-") or len(api_key_env) >= 32
        raise ConfigError(file, f"{table}.api_key_env",
                          "looks like a key, not the name of an environment variable" if looks_like_key
                          else "is not an environment variable name",
                          'put the key in an environment variable and name it here, e.g. api_key_env = "OPENAI_API_KEY"'
                          + (" (and rotate the key: it has been written to a file)" if looks_like_key else ""))
    return api_key_env


def _parse_embeddings(file: Path, raw: Any) -> EmbeddingsSettings:
    """[providers.embeddings]; absent means the local model. An endpoint needs base_url, model and
    dimensions; its key is named by api_key_env and read from the environment when it is used."""
    table = "providers.embeddings"
    e = _expect(file, table, raw, dict, "make [providers.embeddings] a table")
    provider = e.get("provider", "local")
    if provider not in EMBEDDING_PROVIDERS:
        raise ConfigError(file, f"{table}.provider", f"{provider!r} is not an embeddings provider",
                          'set it to "local" (the embedded model), "openai" (any OpenAI-compatible endpoint) or '
                          '"none" (nothing embeds)')
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
    if provider == "none":
        return EmbeddingsSettings(provider="none", model="", dimensions=0)
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
    api_key_env = _api_key_env(file, table, e)
    max_input_tokens = _whole(file, f"{table}.max_input_tokens", e.get("max_input_tokens", 8192), low=1,
                              example="max_input_tokens = 8192")
    max_batch_tokens = _whole(file, f"{table}.max_batch_tokens", e.get("max_batch_tokens", 300_000), low=1,
                              example="max_batch_tokens = 300000")
    return EmbeddingsSettings(
        provider="openai", base_url=base_url.rstrip("/"), model=model, dimensions=dimensions, api_key_env=api_key_env,
        max_input_tokens=max_input_tokens, max_batch_tokens=max_batch_tokens,
        max_batch_inputs=batch_inputs if batch_inputs is not None else MAX_BATCH_INPUTS,
    )


_LLM_TABLE = "providers.llm"
_LLM_EXAMPLES = {"base_url": 'base_url = "https://api.openai.com/v1"', "model": 'model = "gpt-4o-mini"'}


def _parse_llm(file: Path, raw: Any) -> LlmSettings | None:
    """[providers.llm], or None when the table is absent."""
    if raw is None:
        return None
    e = _expect(file, _LLM_TABLE, raw, dict, "make [providers.llm] a table")
    for key in e:
        if key not in LLM_KEYS:
            raise ConfigError(file, f"{_LLM_TABLE}.{key}", "not a setting of the chat provider",
                              f"remove it, or use one of: {', '.join(LLM_KEYS)}")
    provider = e.get("provider", "openai")
    if provider != "openai":
        raise ConfigError(file, f"{_LLM_TABLE}.provider", f"{provider!r} is not a chat provider",
                          'remove it, or set provider = "openai" (any OpenAI-compatible chat endpoint)')
    missing = [k for k in ("base_url", "model") if k not in e]
    if missing:
        raise ConfigError(file, f"{_LLM_TABLE}.{missing[0]}", f"a chat provider needs {', '.join(missing)}",
                          "add " + "; ".join(_LLM_EXAMPLES[k] for k in missing))
    base_url = _expect(file, f"{_LLM_TABLE}.base_url", e["base_url"], str, _LLM_EXAMPLES["base_url"]).strip()
    if not re.match(r"^https?://[^/\s]+", base_url):
        raise ConfigError(file, f"{_LLM_TABLE}.base_url", f"{base_url!r} is not an http(s) URL",
                          'write it with its scheme, e.g. base_url = "http://127.0.0.1:8080/v1" '
                          "(questions are POSTed to {base_url}/chat/completions)")
    model = _expect(file, f"{_LLM_TABLE}.model", e["model"], str, _LLM_EXAMPLES["model"]).strip()
    if not model:
        raise ConfigError(file, f"{_LLM_TABLE}.model", "is empty", f"name the endpoint's model, e.g. {_LLM_EXAMPLES['model']}")
    api_key_env = _api_key_env(file, _LLM_TABLE, e)
    max_output = _whole(file, f"{_LLM_TABLE}.max_output_tokens", e.get("max_output_tokens", DEFAULT_MAX_OUTPUT_TOKENS),
                        low=16, high=32_768, example=f"max_output_tokens = {DEFAULT_MAX_OUTPUT_TOKENS}")
    max_source_tokens = _whole(file, f"{_LLM_TABLE}.max_source_tokens",
                               e.get("max_source_tokens", DEFAULT_SOURCE_TOKENS), low=200, high=200_000,
                               example=f"max_source_tokens = {DEFAULT_SOURCE_TOKENS}")
    max_sources_n = _whole(file, f"{_LLM_TABLE}.max_sources", e.get("max_sources", DEFAULT_MAX_SOURCES), low=1, high=50,
                           example=f"max_sources = {DEFAULT_MAX_SOURCES}")
    timeout = e.get("timeout_s", DEFAULT_TIMEOUT_S)
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
        raise ConfigError(file, f"{_LLM_TABLE}.timeout_s", f"expected a number of seconds, found {type(timeout).__name__} "
                          f"{timeout!r}", f"write a number, e.g. timeout_s = {DEFAULT_TIMEOUT_S:g}")
    if not 0 < timeout <= MAX_TIMEOUT_S:
        raise ConfigError(file, f"{_LLM_TABLE}.timeout_s", f"{timeout:g} is out of range",
                          f"use more than 0 and at most {MAX_TIMEOUT_S:g} seconds, e.g. timeout_s = {DEFAULT_TIMEOUT_S:g}")
    budgets = {}
    for window in WINDOWS:
        key = f"budget_tokens_{window}"
        if key in e:
            budgets[key] = _whole(file, f"{_LLM_TABLE}.{key}", e[key], low=1, example=f"{key} = 200000")
    return LlmSettings(base_url=base_url.rstrip("/"), model=model, api_key_env=api_key_env,
                       max_output_tokens=max_output, timeout_s=float(timeout), max_source_tokens=max_source_tokens,
                       max_sources=max_sources_n, **budgets)


def _urls(file: Path, key: str, value: Any, schemes: tuple[str, ...], example: str) -> tuple[str, ...]:
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


def _parse_log(file: Path, raw: Any) -> LogSettings:
    """[log]; absent means the file backend."""
    t = _expect(file, "log", raw, dict, "make [log] a table")
    for key in t:
        if key not in _LOG_KEYS:
            raise ConfigError(file, f"log.{key}", "unknown setting", f"remove it, or use one of: {', '.join(_LOG_KEYS)}")
    backend = t.get("backend", "file")
    if backend not in LOG_BACKENDS:
        raise ConfigError(file, "log.backend", f"{backend!r} is not a log backend", 'set it to "file" or "jetstream"')
    if backend == "file":
        extra = [k for k in t if k != "backend"]
        if extra:
            raise ConfigError(file, f"log.{extra[0]}", 'is a setting of backend = "jetstream"',
                              'remove it, or set backend = "jetstream"')
        return LogSettings()
    if "url" not in t:
        raise ConfigError(file, "log.url", 'backend = "jetstream" needs the NATS servers',
                          'add url = "nats://HOST:4222" (a list for a cluster)')
    url = _urls(file, "log.url", t["url"], ("nats", "tls"), '"nats://HOST:4222"')
    prefix = _expect(file, "log.stream_prefix", t.get("stream_prefix", "crewlet"), str, 'stream_prefix = "crewlet"')
    if not STREAM_PREFIX_RE.match(prefix):
        raise ConfigError(file, "log.stream_prefix", f"{prefix!r} cannot name a stream",
                          "use 1-32 letters, digits, '_' or '-'")
    replicas = _whole(file, "log.replicas", t.get("replicas", 1), low=1, high=5, example="replicas = 3")
    window = _whole(file, "log.duplicate_window_s", t.get("duplicate_window_s", 600), low=1, high=7 * 86400,
                    example="duplicate_window_s = 600")
    token_env = _expect(file, "log.token_env", t.get("token_env", ""), str, 'token_env = "NATS_TOKEN"')
    if token_env and not ENV_NAME_RE.match(token_env):
        raise ConfigError(file, "log.token_env", "is not an environment variable name",
                          'put the token in an environment variable and name it here, e.g. token_env = "NATS_TOKEN"')
    creds = _expect(file, "log.creds", t.get("creds", ""), str, 'creds = "~/.nats/crewlet.creds"')
    tls_ca = _expect(file, "log.tls_ca", t.get("tls_ca", ""), str, 'tls_ca = "/etc/nats/ca.pem"')
    monitor = _urls(file, "log.monitor", t["monitor"], ("http", "https"), '"http://HOST:8222"') if "monitor" in t else ()
    return LogSettings("jetstream", url, prefix, replicas, creds, token_env, tls_ca, monitor, window)


def _provider_named(data: dict[str, Any]) -> Any:
    """providers.embeddings.provider as written (validated with its table later)."""
    prov = data.get("providers")
    emb = prov.get("embeddings") if isinstance(prov, dict) else None
    return emb.get("provider", "local") if isinstance(emb, dict) else "local"


def parse(data: dict[str, Any], file: Path, activated_at: int = 0) -> Company:
    known_top = {"operator", "knowledge", "spaces", "actors", "providers", "integrations", "company", "log"}
    for key in data:
        if key not in known_top:
            raise ConfigError(file, key, "unknown setting", f"remove it, or use one of: {', '.join(sorted(known_top))}")

    kn_raw = _expect(file, "knowledge", data.get("knowledge", {}), dict, "make [knowledge] a table")
    integrations_raw = _expect(file, "integrations", data.get("integrations", {}), dict, "make [integrations] a table")
    backend = _knowledge_backend(file, kn_raw, integrations_raw)   # single-homed first: the table's own
    integrations = _parse_integrations(file, integrations_raw)      # problems matter once it belongs here
    scopes: dict[str, list[Any]] = {}
    for name, key in SCOPE_KEYS.items():
        example = {"native": '["HANDBOOK"]', "confluence": '["ENG", "HOME"]', "plane": '["ENG"]'}[name]
        scopes[name] = _expect(file, f"knowledge.{key}", kn_raw.get(key, []), list, f"write it as a list, e.g. {key} = {example}")
        for item in scopes[name]:
            _expect(file, f"knowledge.{key}", item, str, f"write each entry as a quoted key, e.g. {key} = {example}")
        if scopes[name] and backend != name:
            active = SCOPE_KEYS.get(backend)
            raise ConfigError(file, f"knowledge.{key}",
                              f"is the {name} backend's read scope, and knowledge.backend is \"{backend}\"",
                              f"remove knowledge.{key}" + (f" (this backend's scope is knowledge.{active})" if active else
                                                         " (backend \"none\" searches nothing, so nothing narrows)"))
    remote = backend in REMOTE_BACKENDS
    if remote and kn_raw.get("vectors") is True:
        raise ConfigError(file, "knowledge.vectors", f"vectors = true with knowledge.backend = \"{backend}\", which keeps "
                          "no local copy to embed (the backend ranks by its own search)", "remove knowledge.vectors")
    # knowledge.vectors derives from whether there is an embeddings provider (spec 000, Configuration)
    no_provider = _provider_named(data) == "none"
    if no_provider and kn_raw.get("vectors") is True:
        raise ConfigError(file, "knowledge.vectors", 'vectors = true with providers.embeddings provider = "none": '
                          "there is no model to embed with", 'remove knowledge.vectors, or name a provider '
                          '(provider = "local" is the embedded model)')
    vectors = _expect(file, "knowledge.vectors", kn_raw.get("vectors", not remote and not no_provider), bool,
                      "set it to true or false")
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
        scope=tuple(scopes["native"]),
        vectors=vectors,
        confluence_spaces=tuple(scopes["confluence"]),
        plane_projects=tuple(scopes["plane"]),
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
        credentials = _parse_credentials(file, key, a.get("credentials", {}))
        actors[handle] = Actor(handle=handle, kind=kind, admin=admin, space=space, knowledge=holds,
                               credentials=credentials)

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
    llm = _parse_llm(file, prov.get("llm"))

    return Company(file=file, spaces=spaces, actors=actors, knowledge=knowledge, operator=operator,
                   embeddings=embeddings, llm=llm, activated_at=activated_at, integrations=integrations,
                   raw=data, log=_parse_log(file, data.get("log", {})))


# -- the knowledge home: one backend, its integration, and an actor's own credential ---------------------

_URL_RE = re.compile(r"^https?://[^/\s]+")
_CONFLUENCE_KEYS = ("url", "token_env", "username_env", "connect_timeout_s", "read_timeout_s")
_PLANE_KEYS = ("url", "workspace", "token_env", "skills_project", "enabled", "connect_timeout_s", "read_timeout_s")
_CREDENTIAL_KEYS = ("confluence_token_env", "confluence_username_env", "plane_token_env")


def _env_name(file: Path, key: str, value: Any, example: str) -> str:
    """The NAME of an environment variable (a value that looks like a secret is refused as one)."""
    name = _expect(file, key, value, str, f'{key.rsplit(".", 1)[-1]} = "{example}"').strip()
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


def _seconds(file: Path, key: str, value: Any, default: float) -> float:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 300:
        raise ConfigError(file, key, f"expected seconds above 0 and at most 300, found {value!r}",
                          f"write a number of seconds, e.g. {key.rsplit('.', 1)[-1]} = {default:g}")
    return float(value)


def _url(file: Path, key: str, value: Any, example: str) -> str:
    url = _expect(file, key, value, str, f'url = "{example}"').strip()
    if not _URL_RE.match(url):
        raise ConfigError(file, key, f"{url!r} is not an http(s) URL", f'write it with its scheme, e.g. url = "{example}"')
    return url.rstrip("/")


def _unknown_keys(file: Path, table: str, raw: dict[str, Any], allowed: tuple[str, ...]) -> None:
    for k in raw:
        if k not in allowed:
            raise ConfigError(file, f"{table}.{k}", "unknown setting", f"remove it, or use one of: {', '.join(allowed)}")


def _parse_integrations(file: Path, raw: dict[str, Any]) -> Integrations:
    for name in raw:
        if name not in REMOTE_BACKENDS:
            raise ConfigError(file, f"integrations.{name}", "unknown integration",
                              f"remove it, or declare one of: {', '.join(f'[integrations.{b}]' for b in REMOTE_BACKENDS)}")
    confluence = plane = None
    if "confluence" in raw:
        t = "integrations.confluence"
        c = _expect(file, t, raw["confluence"], dict, f"make [{t}] a table")
        _unknown_keys(file, t, c, _CONFLUENCE_KEYS)
        for need, example in (("url", 'url = "https://example.atlassian.net/wiki"'),
                              ("token_env", 'token_env = "CONFLUENCE_API_TOKEN"')):
            if need not in c:
                raise ConfigError(file, f"{t}.{need}", "is missing", f"add {example}")
        confluence = ConfluenceSettings(
            url=_url(file, f"{t}.url", c["url"], "https://example.atlassian.net/wiki"),
            token_env=_env_name(file, f"{t}.token_env", c["token_env"], "CONFLUENCE_API_TOKEN"),
            username_env=_env_name(file, f"{t}.username_env", c["username_env"], "CONFLUENCE_USERNAME")
            if c.get("username_env") else "",
            connect_timeout_s=_seconds(file, f"{t}.connect_timeout_s", c.get("connect_timeout_s"), DEFAULT_CONNECT_TIMEOUT_S),
            read_timeout_s=_seconds(file, f"{t}.read_timeout_s", c.get("read_timeout_s"), DEFAULT_READ_TIMEOUT_S))
    if "plane" in raw:
        t = "integrations.plane"
        p = _expect(file, t, raw["plane"], dict, f"make [{t}] a table")
        _unknown_keys(file, t, p, _PLANE_KEYS)
        for need, example in (("url", 'url = "https://plane.example.com"'), ("workspace", 'workspace = "acme"'),
                              ("token_env", 'token_env = "PLANE_API_KEY"')):
            if need not in p:
                raise ConfigError(file, f"{t}.{need}", "is missing", f"add {example}")
        workspace = _expect(file, f"{t}.workspace", p["workspace"], str, 'workspace = "acme"').strip()
        if not re.match(r"^[A-Za-z0-9][A-Za-z0-9_-]*$", workspace):
            raise ConfigError(file, f"{t}.workspace", f"{workspace!r} is not a workspace slug",
                              "use the slug from the workspace's URL (https://plane.example.com/SLUG/projects)")
        skills = _expect(file, f"{t}.skills_project", p.get("skills_project", "SKILLS"), str, 'skills_project = "SKILLS"')
        if not KEY_RE.match(skills):
            raise ConfigError(file, f"{t}.skills_project", f"{skills!r} is not a project identifier",
                              'use the project\'s identifier, e.g. skills_project = "SKILLS"')
        plane = PlaneSettings(
            url=_url(file, f"{t}.url", p["url"], "https://plane.example.com"), workspace=workspace,
            token_env=_env_name(file, f"{t}.token_env", p["token_env"], "PLANE_API_KEY"), skills_project=skills,
            enabled=_expect(file, f"{t}.enabled", p.get("enabled", True), bool, "set it to true or false"),
            connect_timeout_s=_seconds(file, f"{t}.connect_timeout_s", p.get("connect_timeout_s"), DEFAULT_CONNECT_TIMEOUT_S),
            read_timeout_s=_seconds(file, f"{t}.read_timeout_s", p.get("read_timeout_s"), DEFAULT_READ_TIMEOUT_S))
    return Integrations(confluence=confluence, plane=plane)


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
    backend = _expect(file, "knowledge.backend", kn_raw.get("backend", ""), str, 'e.g. backend = "native"').strip()
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
        other = declared[0] if declared else None
        if other:
            raise ConfigError(file, f"integrations.{other}", f"declared beside knowledge.backend = \"{backend}\"",
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


def _parse_credentials(file: Path, actor_key: str, raw: Any) -> Credentials:
    t = f"{actor_key}.credentials"
    c = _expect(file, t, raw, dict, f"make [{t}] a table")
    _unknown_keys(file, t, c, _CREDENTIAL_KEYS)
    examples = {"confluence_token_env": "ENG_BOT_CONFLUENCE_TOKEN", "confluence_username_env": "ENG_BOT_CONFLUENCE_USER",
                "plane_token_env": "ENG_BOT_PLANE_KEY"}
    return Credentials(**{k: _env_name(file, f"{t}.{k}", c[k], examples[k]) for k in _CREDENTIAL_KEYS if c.get(k)})


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
        data = read_node_file(file, cached=False)
    except UnicodeDecodeError:
        raise ConfigError(file, "(file)", "is not UTF-8 text", "save it as UTF-8") from None
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
