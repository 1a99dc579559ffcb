"""retrieve (paper §3.1): ask every configured source at once and keep the top fused documents.

Whatever the retriever (the embedded index, the configured sources, or any LangChain retriever passed
to `build_graph`), it runs behind a `FederatedRetriever`, so the same rules hold everywhere:

- documents the caller's principal may not see are dropped first, before fusion, before any model or
  trace sees them; how many goes to the log and the retrieve step's trace only (`acl_dropped`), never
  to the caller, whose output must not confirm that a hidden document matched;
- on the server the principal is the authenticated caller, never the request body, and a request's
  settings beyond the allowed ones end the query before anything is searched (nodes/common.py);
- it is the first step of every query: its update empties what a previous query on the thread left.
- a failing or slow source becomes a `SourceError` and the query goes on (`status: "degraded"`);
- bad input, an invalid principal, or nothing searchable at all ends the query with `status: "error"`.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import os
import threading
from collections.abc import Callable
from typing import Any

from langchain_core.retrievers import BaseRetriever

from evident.connectors.acl import PrincipalError, coerce_principal
from evident.connectors.federated import FederatedResult, FederatedRetriever
from evident.context import ConfigError, EvidentContext
from evident.models import Principal, RetrievedRef, SourceError
from evident.nodes.common import authenticated_principal, refused_settings, served, settings, timed
from evident.state import EvidentState, start_of_query

log = logging.getLogger(__name__)

IGNORED_PRINCIPAL = ("the request's principal was ignored: on the server, documents are filtered "
                     "for the authenticated caller")

RetrieverFactory = Callable[[EvidentContext], BaseRetriever]

_local_lock = threading.Lock()
_local_cache: dict[tuple[Any, ...], BaseRetriever] = {}
_federated_lock = threading.Lock()
_federated_cache: dict[str, FederatedRetriever] = {}


def local_retriever(ctx: EvidentContext) -> BaseRetriever:
    """The embedded default: the local corpus index, built or refreshed once per process."""
    from evident.connectors.index.embedded import LocalIndex
    from evident.connectors.index.loaders import CorpusLimits
    from evident.connectors.index.retriever import LocalCorpusRetriever

    paths = ctx.corpus_paths()
    if not paths:
        raise ConfigError("no corpus configured: pass --corpus PATH or set EVIDENT_CORPUS")
    limits = CorpusLimits.from_settings(ctx)
    key = (tuple(paths), ctx.index_path, ctx.k, limits.model_dump_json())
    with _local_lock:
        found = _local_cache.get(key)
        if found is None:
            found = LocalCorpusRetriever.from_corpus(paths, index_path=ctx.index_path, k=ctx.k, limits=limits)
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
    if query is None:
        return ('the input has no query: give {"query": "your question"} '
                'or {"messages": [{"role": "user", "content": "your question"}]}')
    if not isinstance(query, str):
        return f"the query must be a string, not {type(query).__name__}"
    if not query.strip():
        return "the query is empty"
    if any("\ud800" <= char <= "\udfff" for char in query):
        return "the query is not valid UTF-8 text (it holds an unpaired surrogate)"
    if len(query) > ctx.max_query_chars:
        return f"the query is too long: {len(query)} characters (the limit is {ctx.max_query_chars})"
    return None


def _as_federated(retriever: BaseRetriever, ctx: EvidentContext) -> FederatedRetriever:
    if isinstance(retriever, FederatedRetriever):
        return retriever
    name = getattr(retriever, "source_name", None) or type(retriever).__name__
    return FederatedRetriever.wrap(retriever, name=str(name), timeout_s=ctx.retrieve_timeout_s, top_n=ctx.top_n)


def _fail(update: dict[str, Any], message: str) -> dict[str, Any]:
    update.update(status="error", error=message, documents=[], retrieved=[])
    return update


def _finish(update: dict[str, Any], result: FederatedResult, ctx: EvidentContext) -> dict[str, Any]:
    docs = result.documents[: ctx.top_n]
    update.update(
        documents=docs,
        retrieved=[RetrievedRef(url=d.url, title=d.title, source=d.source) for d in docs],
        source_errors=result.errors,
        # A source that answered only with hidden documents reads as empty, as if nothing matched.
        source_runs=[r.model_copy(update={"denied": 0, "status": "empty" if r.status == "ok" and not r.documents
                                          else r.status}) for r in result.runs],
    )
    _report_hidden(result)
    return update


def _run_config() -> Any:
    from langgraph.config import get_config

    try:
        return get_config()
    except RuntimeError:  # called outside a graph run (a unit test of the node)
        return None


def _report_hidden(result: FederatedResult) -> None:
    """How many documents permissions hid: to the log and to this step's trace, not the state."""
    if not result.acl_dropped:
        return
    log.info("retrieve: %d document(s) hidden by permissions", result.acl_dropped)
    from evident.graph.instrument import attach_metadata, node_runs  # the graph package imports this one

    attach_metadata(node_runs(_run_config()), {
        "acl_dropped": result.acl_dropped,
        "denied_by_source": {r.source: r.denied for r in result.runs if r.denied},
    })


def _principal(state: EvidentState, runtime: Any, update: dict[str, Any]) -> Principal | None:
    """Who is asking: the authenticated caller on the server, else the principal of the input."""
    if not served(runtime):
        return coerce_principal(state.get("principal"))
    if state.get("principal"):
        update["notes"] = [IGNORED_PRINCIPAL]
        log.info("retrieve: %s", IGNORED_PRINCIPAL)
    update["principal"] = None  # a body principal must not stay in the thread's state either
    return authenticated_principal(runtime, _run_config())


def _field(item: Any, key: str) -> Any:
    return item.get(key) if isinstance(item, dict) else getattr(item, key, None)


def _conversation_problem(state: EvidentState) -> str | None:
    """Why the `rewrite` step refused the request's messages (evident/nodes/rewrite.py)."""
    return _field(state.get("rewrite"), "problem") or None


def _from_rewrite(state: EvidentState) -> dict[str, Any]:
    """What this query's `rewrite` step (it runs just before) reported: kept through the reset below."""
    info = state.get("rewrite")
    out: dict[str, Any] = {}
    error = _field(info, "model_error")
    if error:
        out["model_errors"] = [error if isinstance(error, SourceError) else SourceError.model_validate(error)]
    took = (state.get("timings_ms") or {}).get("rewrite")
    if took is not None:
        out["timings_ms"] = {"rewrite": took}
    return out


Prepared = tuple[FederatedRetriever, str, Principal | None]


def make_retrieve(factory: RetrieverFactory | None = None) -> Any:
    """The retrieve node, with a blocking implementation for `invoke` and an asyncio one for `ainvoke`."""
    get_retriever = factory or default_retriever

    def prepare(state: EvidentState, ctx: EvidentContext, update: dict[str, Any], runtime: Any) -> Prepared | None:
        try:
            principal = _principal(state, runtime, update)
        except PrincipalError as exc:
            _fail(update, str(exc))
            return None
        refused = refused_settings(runtime)
        if refused:
            also = f" (refused: {', '.join(e.setting for e in refused)})" if len(refused) > 1 else ""
            _fail(update, f"{refused[0]}{also}")
            return None
        problem = _conversation_problem(state) or check_query(state.get("query"), ctx)
        if problem:
            _fail(update, problem)
            return None
        try:
            retriever = get_retriever(ctx)
        except Exception as exc:  # configuration or corpus problem: nothing to search
            _fail(update, str(exc))
            return None
        return _as_federated(retriever, ctx), state["query"].strip(), principal

    def retrieve(state: EvidentState, runtime: Any = None) -> dict[str, Any]:
        ctx = settings(runtime)
        update: dict[str, Any] = {"mode": ctx.resolved_mode, **_from_rewrite(state)}
        with timed("retrieve", update):
            prepared = prepare(state, ctx, update, runtime)
            if prepared is not None:
                federated, query, principal = prepared
                _finish(update, federated.search(query, principal=principal), ctx)
        return start_of_query(update)

    async def aretrieve(state: EvidentState, runtime: Any = None) -> dict[str, Any]:
        ctx = settings(runtime)
        update: dict[str, Any] = {"mode": ctx.resolved_mode, **_from_rewrite(state)}
        with timed("retrieve", update):
            # Opening (or first building) a corpus index is file and SQLite work: keep it off the
            # event loop, which a server shares between all requests.
            prepared = await asyncio.to_thread(prepare, state, ctx, update, runtime)
            if prepared is not None:
                federated, query, principal = prepared
                _finish(update, await federated.asearch(query, principal=principal), ctx)
        return start_of_query(update)

    return _dual(retrieve, aretrieve)


def _dual(func: Callable[..., Any], afunc: Callable[..., Any]) -> Any:
    """A node with both implementations; LangGraph otherwise runs a sync node in a thread under ainvoke."""
    try:
        from langgraph._internal._runnable import RunnableCallable
    except ImportError:  # a LangGraph without this class: the sync node still works everywhere
        return func
    return RunnableCallable(func, afunc, name="retrieve", trace=False)
