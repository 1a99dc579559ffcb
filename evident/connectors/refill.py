"""Larger pages from a source that does not apply permissions inside its own search.

Such a source returns its top k, and EvidenT's ACL filter (`acl.filter_documents`) removes the hidden
ones afterwards: the caller would get fewer than k exactly when hidden documents rank high, and so
learn that they exist. So while the filter leaves fewer than k of a full page, the source is asked
again for a page REFILL_FACTOR times larger, at most REFILL_ROUNDS times and never for more than
REFILL_MAX_K; a source still short after that is reported (`source_call.shortfall_error`).

The page size is the retriever's own setting: a `k` field (EvidenT's connectors, BM25Retriever,
most LangChain retrievers) or `search_kwargs["k"]` (vector store retrievers). A retriever with
neither cannot be asked for more.
"""

from __future__ import annotations

from langchain_core.retrievers import BaseRetriever

REFILL_ROUNDS = 2
REFILL_FACTOR = 4
REFILL_MAX_K = 200


def page_size(retriever: BaseRetriever) -> int | None:
    """How many documents `retriever` returns at most, when it says."""
    k = getattr(retriever, "k", None)
    if isinstance(k, int) and not isinstance(k, bool):
        return k
    kwargs = getattr(retriever, "search_kwargs", None)
    if isinstance(kwargs, dict) and isinstance(kwargs.get("k"), int) and not isinstance(kwargs["k"], bool):
        return int(kwargs["k"])
    return None


def larger_page(retriever: BaseRetriever) -> BaseRetriever | None:
    """A copy of `retriever` that returns a larger page (the shared one is never changed: other
    queries use it concurrently), or None when it cannot grow."""
    size = page_size(retriever)
    if size is None or size >= REFILL_MAX_K:
        return None
    bigger = min(max(size, 1) * REFILL_FACTOR, REFILL_MAX_K)
    if isinstance(getattr(retriever, "k", None), int):
        return retriever.model_copy(update={"k": bigger})
    kwargs = dict(getattr(retriever, "search_kwargs", None) or {})
    return retriever.model_copy(update={"search_kwargs": {**kwargs, "k": bigger}})
