"""retrieve (paper §3.1): ask the configured source(s) and keep the top documents.

A failing source is recorded in `source_errors` and the query goes on; bad input or a corpus that
cannot be searched at all ends the query with `status: "error"` and a clear message.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from langchain_core.retrievers import BaseRetriever

from evident.connectors.base import to_source_document
from evident.context import ConfigError, EvidentContext
from evident.models import RetrievedRef, SourceDocument, SourceError
from evident.nodes.common import settings, timed
from evident.state import EvidentState

RetrieverFactory = Callable[[EvidentContext], BaseRetriever]

_local_lock = threading.Lock()
_local_cache: dict[tuple[Any, ...], BaseRetriever] = {}


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


def check_query(query: Any, ctx: EvidentContext) -> str | None:
    if not isinstance(query, str) or not query.strip():
        return "the query is empty"
    if len(query) > ctx.max_query_chars:
        return f"the query is too long: {len(query)} characters (the limit is {ctx.max_query_chars})"
    return None


def make_retrieve(factory: RetrieverFactory | None = None) -> Callable[..., dict[str, Any]]:
    get_retriever = factory or local_retriever

    def retrieve(state: EvidentState, runtime: Any = None) -> dict[str, Any]:
        ctx = settings(runtime)
        update: dict[str, Any] = {"mode": ctx.resolved_mode}
        with timed("retrieve", update):
            problem = check_query(state.get("query"), ctx)
            if problem:
                update.update(status="error", error=problem, documents=[], retrieved=[])
                return update
            try:
                retriever = get_retriever(ctx)
            except Exception as exc:  # configuration or corpus problem: nothing to search
                update.update(status="error", error=str(exc), documents=[], retrieved=[])
                return update
            name = getattr(retriever, "source_name", None) or type(retriever).__name__
            try:
                found = retriever.invoke(state["query"].strip())
            except Exception as exc:
                update.update(documents=[], retrieved=[], source_errors=[
                    SourceError(source=name, kind="error", message=f"{type(exc).__name__}: {exc}")
                ])
                return update
            docs: list[SourceDocument] = []
            seen: set[str] = set()
            for d in found:
                doc = to_source_document(d, source=name)
                if doc.url not in seen:
                    seen.add(doc.url)
                    docs.append(doc)
            docs = docs[: ctx.top_n]
            update["documents"] = docs
            update["retrieved"] = [RetrievedRef(url=d.url, title=d.title, source=d.source) for d in docs]
        return update

    return retrieve
