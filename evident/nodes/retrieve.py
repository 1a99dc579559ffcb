"""retrieve (paper §3.1): ask every configured source at once and keep the top fused documents.

Whatever the retriever (the embedded index, the configured sources, or any LangChain retriever passed
to `build_graph`), it runs behind a `FederatedRetriever`, so the same rules hold everywhere:

- documents the caller's principal may not see are dropped first, before fusion, before any model or
  trace sees them; the state says how many (`acl_dropped`), never which;
- a failing or slow source becomes a `SourceError` and the query goes on (`status: "degraded"`);
- bad input, an invalid principal, or nothing searchable at all ends the query with `status: "error"`.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import threading
from collections.abc import Callable
from typing import Any

from langchain_core.retrievers import BaseRetriever

from evident.acl import PrincipalError, coerce_principal
from evident.connectors.federated import FederatedResult, FederatedRetriever
from evident.context import ConfigError, EvidentContext
from evident.models import Principal, RetrievedRef, SourceError
from evident.nodes.common import settings, timed
from evident.state import EvidentState

RetrieverFactory = Callable[[EvidentContext], BaseRetriever]

_local_lock = threading.Lock()
_local_cache: dict[tuple[Any, ...], BaseRetriever] = {}
_federated_lock = threading.Lock()
_federated_cache: dict[str, FederatedRetriever] = {}


def local_retriever(ctx: EvidentContext) -> BaseRetriever:
    """The embedded default: the local corpus index, built or refreshed once per process."""
    from evident.connectors.index import LocalIndex
    from evident.connectors.local import LocalCorpusRetriever

    paths = ctx.corpus_paths()
    if not paths:
        raise ConfigError("no corpus configured: pass --corpus PATH or set EVIDENT_CORPUS")
    key = (tuple(paths), ctx.index_path, ctx.k)
    with _local_lock:
        found = _local_cache.get(key)
        if found is None:
            found = LocalCorpusRetriever.from_corpus(paths, index_path=ctx.index_path, k=ctx.k)
            with LocalIndex(found.index_path) as index:
                if index.count() == 0:
                    raise ConfigError(f"the corpus has no documents: {', '.join(paths)}")
            _local_cache[key] = found
    return found


def federated_retriever(ctx: EvidentContext) -> FederatedRetriever:
    """The configured sources (plus `corpus`, when one is given explicitly), built once per settings."""
    from evident.connectors.config import Defaults, build_sources, environment_names
    from evident.connectors.source import Source

    env = sorted({name for raw in ctx.sources if isinstance(raw, dict) for name in environment_names(raw)})
    key = hashlib.sha256(json.dumps(
        [ctx.sources, ctx.corpus, ctx.index_path, ctx.k, ctx.top_n, ctx.retrieve_timeout_s,
         [os.environ.get(name, "") for name in env]],  # a credential set later is picked up
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
    return federated_retriever(ctx) if ctx.sources else local_retriever(ctx)


def check_query(query: Any, ctx: EvidentContext) -> str | None:
    if not isinstance(query, str) or not query.strip():
        return "the query is empty"
    if len(query) > ctx.max_query_chars:
        return f"the query is too long: {len(query)} characters (the limit is {ctx.max_query_chars})"
    return None


def _as_federated(retriever: BaseRetriever, ctx: EvidentContext) -> FederatedRetriever:
    if isinstance(retriever, FederatedRetriever):
        return retriever
    name = getattr(retriever, "source_name", None) or type(retriever).__name__
    return FederatedRetriever.wrap(retriever, name=str(name), timeout_s=ctx.retrieve_timeout_s, top_n=ctx.top_n)


def _fail(update: dict[str, Any], message: str) -> dict[str, Any]:
    update.update(status="error", error=message, documents=[], retrieved=[], acl_dropped=0)
    return update


def _finish(update: dict[str, Any], result: FederatedResult, ctx: EvidentContext) -> dict[str, Any]:
    docs = result.documents[: ctx.top_n]
    update.update(
        documents=docs,
        retrieved=[RetrievedRef(url=d.url, title=d.title, source=d.source) for d in docs],
        source_errors=result.errors,
        source_runs=result.runs,
        acl_dropped=result.acl_dropped,
    )
    return update


Prepared = tuple[FederatedRetriever, str, Principal | None]


def make_retrieve(factory: RetrieverFactory | None = None) -> Any:
    """The retrieve node, with a blocking implementation for `invoke` and an asyncio one for `ainvoke`."""
    get_retriever = factory or default_retriever

    def prepare(state: EvidentState, ctx: EvidentContext, update: dict[str, Any]) -> Prepared | None:
        problem = check_query(state.get("query"), ctx)
        if problem:
            _fail(update, problem)
            return None
        try:
            principal = coerce_principal(state.get("principal"))
        except PrincipalError as exc:
            _fail(update, str(exc))
            return None
        try:
            retriever = get_retriever(ctx)
        except Exception as exc:  # configuration or corpus problem: nothing to search
            _fail(update, str(exc))
            return None
        return _as_federated(retriever, ctx), state["query"].strip(), principal

    def retrieve(state: EvidentState, runtime: Any = None) -> dict[str, Any]:
        ctx = settings(runtime)
        update: dict[str, Any] = {"mode": ctx.resolved_mode}
        with timed("retrieve", update):
            prepared = prepare(state, ctx, update)
            if prepared is not None:
                federated, query, principal = prepared
                _finish(update, federated.search(query, principal=principal), ctx)
        return update

    async def aretrieve(state: EvidentState, runtime: Any = None) -> dict[str, Any]:
        ctx = settings(runtime)
        update: dict[str, Any] = {"mode": ctx.resolved_mode}
        with timed("retrieve", update):
            # Opening (or first building) a corpus index is file and SQLite work: keep it off the
            # event loop, which a server shares between all requests.
            prepared = await asyncio.to_thread(prepare, state, ctx, update)
            if prepared is not None:
                federated, query, principal = prepared
                _finish(update, await federated.asearch(query, principal=principal), ctx)
        return update

    return _dual(retrieve, aretrieve)


def _dual(func: Callable[..., Any], afunc: Callable[..., Any]) -> Any:
    """A node with both implementations; LangGraph otherwise runs a sync node in a thread under ainvoke."""
    try:
        from langgraph._internal._runnable import RunnableCallable
    except ImportError:  # a LangGraph without this class: the sync node still works everywhere
        return func
    return RunnableCallable(func, afunc, name="retrieve", trace=False)
