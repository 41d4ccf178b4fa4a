"""Which provider turns text into vectors: a registry the providers join by name.

A provider module registers a factory under the name `[providers.embeddings] provider` gives it —
`register("openai", factory)` — and `make_provider(company)` looks the configured name up; a new provider
is one module with one `register` call, and nothing here changes. As simonw/llm loads its default plugins
by module name and lets each register its models, the built-in providers are named below by module and
imported only when a company asks for one of them: a command that never embeds loads neither (the local
model's module loads numpy, the endpoint's the HTTP client's types).
"""
from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from . import EmbeddingsSettings

if TYPE_CHECKING:
    from .provider import Provider

# settings, the compute threads a local model may use (None: its default) -> a provider, unloaded
Factory = Callable[[EmbeddingsSettings, "int | None"], "Provider"]

# the providers crewlet ships, by the module that registers each (imported when first asked for)
BUILT_IN = {"local": "core.embed.local", "openai": "core.embed.openai_http"}

_FACTORIES: dict[str, Factory] = {}


class Configured(Protocol):
    """What a provider is chosen from: the company's knowledge settings (is `vectors` on) and its
    [providers.embeddings] (core.config.Company is one)."""

    @property
    def knowledge(self) -> Any: ...
    @property
    def embeddings(self) -> EmbeddingsSettings: ...


def register(name: str, factory: Factory) -> None:
    """Make `factory(settings, threads)` the provider for `provider = "<name>"` (a later call replaces it)."""
    _FACTORIES[name] = factory


def factory_for(name: str) -> Factory:
    if name not in _FACTORIES and name in BUILT_IN:
        importlib.import_module(BUILT_IN[name])
    try:
        return _FACTORIES[name]
    except KeyError:
        known = ", ".join(sorted(set(BUILT_IN) | set(_FACTORIES)))
        raise ValueError(f"no embedding provider is registered as {name!r} (known: {known})") from None


def make_provider(company: Configured, *, threads: int | None = None) -> Provider | None:
    """The provider the company configures, or None when knowledge.vectors = false.

    Cheap: nothing is loaded or connected until the first `embed`. `threads` bounds the local
    model's compute threads (default: half the cores); an HTTP provider ignores it."""
    if not company.knowledge.vectors:
        return None
    settings = company.embeddings
    return factory_for(settings.provider)(settings, threads)


class ProviderSlot:
    """The provider a long-lived worker embeds with: made on first use, and made again (the old one closed)
    when the settings it was made from change — an edit of company.toml applies at the next pass."""

    def __init__(self, make: Callable[[Any], Any]) -> None:
        self._make = make
        self._provider: Any = None
        self._settings: Any = None

    def get(self, company: Any, settings: Any) -> Any:
        if self._provider is None or settings != self._settings:
            self.close()
            self._provider, self._settings = self._make(company), settings
        return self._provider

    def close(self) -> None:
        if self._provider is not None:
            self._provider.close()
            self._provider = None
