"""The configured retriever of a query's settings, built once per process and settings.

`retrieve` (evident/nodes/retrieve.py) asks it for every query, `evident serve` opens it before the
first request (evident/web/app.py) and `evident eval` shares it between methods: the embedded index
over `corpus`, or the federated `sources` (plus `corpus` when one is given explicitly).
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Callable
from typing import Any

from langchain_core.retrievers import BaseRetriever

from evident.connectors.federated import FederatedRetriever
from evident.connectors.index.embedded import LocalIndex
from evident.connectors.index.loaders import CorpusLimits
from evident.connectors.index.retriever import LocalCorpusRetriever
from evident.connectors.source import Source
from evident.context import EvidentContext
from evident.models import SourceError
from evident.settings import ConfigError, environment_value

RetrieverFactory = Callable[[EvidentContext], BaseRetriever]

_local_lock = threading.Lock()
_local_cache: dict[tuple[Any, ...], BaseRetriever] = {}
_federated_lock = threading.Lock()
_federated_cache: dict[str, FederatedRetriever] = {}


def local_retriever(ctx: EvidentContext) -> BaseRetriever:
    """The embedded default: the local corpus index, built or refreshed once per process."""
    paths = ctx.corpus_paths()
    if not paths:
        raise ConfigError("no corpus configured: pass --corpus PATH or set EVIDENT_CORPUS")
    limits = CorpusLimits.from_settings(ctx)
    key = (tuple(paths), ctx.index_path, ctx.k, limits.model_dump_json())
    with _local_lock:
        found = _local_cache.get(key)
        if found is None:
            built = LocalCorpusRetriever.from_corpus(paths, index_path=ctx.index_path, k=ctx.k, limits=limits)
            with LocalIndex(built.index_path) as index:
                if index.count() == 0:
                    raise ConfigError(f"the corpus has no documents: {', '.join(paths)}")
            found = _local_cache[key] = built
    return found


def federated_retriever(ctx: EvidentContext) -> FederatedRetriever:
    """The configured sources (plus `corpus`, when one is given explicitly), built once per settings."""
    # start-up time: the source types' settings (~35 ms) load only when sources are configured
    from evident.connectors.config import Defaults, build_sources, environment_names
    env = sorted({name for raw in ctx.sources if isinstance(raw, dict) for name in environment_names(raw)})
    key = hashlib.sha256(json.dumps(
        [ctx.sources, ctx.corpus, ctx.index_path, ctx.k, ctx.top_n, ctx.retrieve_timeout_s,
         [environment_value(name) or "" for name in env]],  # a credential set later is picked up
        sort_keys=True, default=str,
    ).encode()).hexdigest()
    with _federated_lock:
        found = _federated_cache.get(key)
        if found is not None:
            return found
        sources, errors = build_sources(ctx.sources, Defaults(k=ctx.k, timeout_s=ctx.retrieve_timeout_s))
        if ctx.corpus:
            taken = {s.name for s in sources} | {e.source for e in errors}
            name = "local" if "local" not in taken else "corpus"
            try:
                local = local_retriever(ctx)
            except Exception as exc:  # the corpus is one source among others: its problem is its own
                errors.append(SourceError(source=name, kind="config", message=str(exc)))
            else:
                sources.insert(0, Source(name=name, retriever=local, k=ctx.k, timeout_s=ctx.retrieve_timeout_s))
        found = FederatedRetriever(sources=sources, unavailable=errors, top_n=ctx.top_n)
        if not errors:  # a broken source may be fixed (crawled, given its credential) without a restart
            _federated_cache[key] = found
    return found


def default_retriever(ctx: EvidentContext) -> BaseRetriever:
    """What a query searches when `build_graph` was given no retriever: the sources, else the corpus."""
    return federated_retriever(ctx) if ctx.sources else local_retriever(ctx)


def as_federated(retriever: BaseRetriever, ctx: EvidentContext) -> FederatedRetriever:
    """Any retriever behind a `FederatedRetriever`, so permissions, timeouts and fusion hold the same."""
    if isinstance(retriever, FederatedRetriever):
        return retriever
    name = getattr(retriever, "source_name", None) or type(retriever).__name__
    return FederatedRetriever.wrap(retriever, name=str(name), timeout_s=ctx.retrieve_timeout_s, top_n=ctx.top_n)
