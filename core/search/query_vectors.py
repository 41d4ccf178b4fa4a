"""The query's own vector: embedded once through the configured provider, in the corpus's space.

The last 1,024 query vectors are kept (per node: in this process's memory, and on disk in the home
through `query_cache.py`, so a query asked again by a new process needs no model), emptied when the
model changes; one query embedding is bounded at two seconds. An embedding that runs past the bound is
not abandoned: it finishes in the background and fills both caches, so asking again a moment later is
answered by meaning. `start` begins the embedding early (the CLI calls it before its index catch-up, so
the model loads while the process does other work). Given the home (`daemon`), a vector neither cache
holds is asked first of the home's long-lived process (`query_daemon.py`: the worker, the app or
`crewlet mcp`, which holds the model), and the model loads here only when none answers within a short
bound — so a one-question process whose home has a worker running loads no model at all.
"""
from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..embed.provider import Provider, ProviderError
from ..embed.registry import make_provider
from .query_cache import QueryVectorStore

if TYPE_CHECKING:
    import numpy as np

log = logging.getLogger("crewlet.search")

CACHE_SIZE = 1024
TIMEOUT_S = 2.0


@dataclass
class QueryVector:
    vector: np.ndarray | None
    space: str
    model: str
    failure: str = ""            # "" | "slow" | "failed" | "off"
    message: str = ""
    cached: bool = False
    source: str = ""             # where the vector came from: "cache" | "daemon" | "model" ("" without one)


class QueryEmbedder:
    """Thread-safe. One background thread runs the provider, so a slow one never blocks past the bound."""

    def __init__(self, provider_factory: Callable[..., Provider | None] = make_provider, *,
                 cache_size: int = CACHE_SIZE, timeout_s: float = TIMEOUT_S, threads: int | None = None,
                 store: QueryVectorStore | None = None, daemon: Path | None = None,
                 daemon_timeout_s: float | None = None) -> None:
        """`daemon`: the home whose long-lived process is asked for a vector before the model loads here
        (`query_daemon.py`; None: never asked). `daemon_timeout_s`: how long it is waited for."""
        self.provider_factory = provider_factory
        self.store = store
        self.daemon = daemon
        self.daemon_timeout_s = daemon_timeout_s
        self.cache_size = cache_size
        self.timeout_s = timeout_s
        self.threads = threads
        self._lock = threading.Lock()
        self._settings: Any = None
        self._provider: Provider | None = None
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()
        self._inflight: dict[str, Future[tuple[np.ndarray, str]]] = {}
        # a vector embedded here (`start`'s, finished before the search asked) and not yet handed out: where
        # it came from, said to its first asker; a later one reads it from the cache
        self._fresh: dict[str, str] = {}
        self._pool: ThreadPoolExecutor | None = None

    def provider(self, company: Any) -> Provider | None:
        """The provider as configured now; a change of model or width empties the cache."""
        settings = (company.knowledge.vectors, company.embeddings)
        with self._lock:
            if settings != self._settings:
                if self._provider is not None:
                    self._provider.close()
                self._provider = self.provider_factory(company, threads=self.threads) if company.knowledge.vectors else None
                self._settings = settings
                self._cache.clear()
                self._inflight.clear()
                self._fresh.clear()
            return self._provider

    def _lookup(self, provider: Provider, key: str) -> tuple[np.ndarray | None, Future[tuple[np.ndarray, str]] | None]:
        """The cached vector, else the embedding under way (started here when none is)."""
        space = provider.space.key()
        with self._lock:
            hit = self._cache.get(key)
            if hit is not None:
                self._cache.move_to_end(key)
                return hit, None
            future = self._inflight.get(key)
            if future is not None:
                return None, future
        stored = self.store.get(space, key, provider.space.dimensions) if self.store is not None else None
        with self._lock:
            if stored is not None:
                if self._provider is provider:
                    self._remember(key, stored)
                return stored, None
            future = self._inflight.get(key)
            if future is None:
                if self._pool is None:
                    self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="crewlet-query-embed")
                future = self._pool.submit(self._embed, provider, key)
                self._inflight[key] = future
            return None, future

    def start(self, company: Any, text: str) -> None:
        """Begin embedding `text` now (or find it cached), without waiting for it."""
        provider = self.provider(company)
        if provider is not None:
            self._lookup(provider, " ".join(text.split()))

    def vector(self, company: Any, text: str) -> QueryVector:
        provider = self.provider(company)
        if provider is None:
            return QueryVector(None, "", "", "off", "vectors are off (knowledge.vectors = false)")
        space = provider.space.key()
        key = " ".join(text.split())
        hit, future = self._lookup(provider, key)
        if hit is not None:
            with self._lock:
                fresh = self._fresh.pop(key, "")
            return QueryVector(hit, space, provider.space.model, cached=not fresh, source=fresh or "cache")
        assert future is not None
        try:
            vector, source = future.result(timeout=self.timeout_s)
            with self._lock:
                self._fresh.pop(key, None)
        except FutureTimeout:
            return QueryVector(None, space, provider.space.model, "slow",
                               f"{provider.space.model} did not embed the query within {self.timeout_s:g} s")
        except ProviderError as exc:
            return QueryVector(None, space, provider.space.model, "failed",
                               f"{provider.space.model} could not embed the query: {exc}")
        return QueryVector(vector, space, provider.space.model, source=source)

    def _remember(self, key: str, vector: np.ndarray) -> None:
        """Into the memory cache (under the lock)."""
        self._cache[key] = vector
        self._cache.move_to_end(key)
        while len(self._cache) > self.cache_size:
            self._cache.popitem(last=False)

    def _embed(self, provider: Provider, key: str) -> tuple[np.ndarray, str]:
        import numpy as np

        try:
            vector, source = self._from_daemon(provider, key), "daemon"
            if vector is None:
                vector = np.asarray(provider.embed([key], timeout=max(self.timeout_s, 15.0))[0], dtype=np.float32)
                source = "model"
            if not np.all(np.isfinite(vector)) or not np.any(vector):
                raise ProviderError("the query's vector is not finite or is all zero")
            with self._lock:
                current = self._provider is provider
                if current:
                    self._remember(key, vector)
                    self._fresh[key] = source
                    while len(self._fresh) > self.cache_size:
                        self._fresh.pop(next(iter(self._fresh)))
            if current and self.store is not None:
                self.store.put(provider.space.key(), key, vector)
            return vector, source
        finally:
            with self._lock:
                self._inflight.pop(key, None)

    def _from_daemon(self, provider: Provider, key: str) -> np.ndarray | None:
        """The home's daemon's vector, checked against this provider's space and width; None when there is
        none to ask or it does not answer in time. Only for the local model: a remote provider has no model to
        load here, and its answer would take the daemon as long as it takes this process."""
        if self.daemon is None or provider.space.provider != "local":
            return None
        from . import query_daemon

        if query_daemon.served_here(self.daemon):
            return None
        timeout = self.daemon_timeout_s if self.daemon_timeout_s is not None else query_daemon.ASK_TIMEOUT_S
        vector, why = query_daemon.ask(self.daemon, provider.space.key(), provider.space.dimensions, key,
                                       timeout_s=timeout)
        if vector is None:
            log.debug("the query's vector is not the daemon's (%s): the model embeds it here", why)
        return vector

    def close(self) -> None:
        with self._lock:
            if self._pool is not None:
                self._pool.shutdown(wait=False, cancel_futures=True)
                self._pool = None
            if self._provider is not None:
                self._provider.close()
                self._provider = None
            self._settings = None
        if self.store is not None:
            self.store.close()
