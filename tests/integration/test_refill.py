"""A source that filters after its search is asked for larger pages until k of its hits are visible,
in bounded rounds, and says so, without a count, when it gives up."""

from __future__ import annotations

import asyncio

from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever

from evident.connectors.federated import FederatedRetriever
from evident.connectors.refill import REFILL_FACTOR, REFILL_MAX_K, REFILL_ROUNDS
from evident.connectors.source import Source

BOB = {"user": "bob", "groups": ["staff"]}


class _Ranked(BaseRetriever):
    """A search engine that knows no permissions: its first `hidden` hits are for the board only."""

    hidden: int
    visible: int = 5
    k: int = 2
    asked: list[int] = []

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        self.asked.append(self.k)
        hits = [Document(page_content=f"board {i}", metadata={"url": f"https://s/b{i}", "acl": "group:board"})
                for i in range(self.hidden)]
        hits += [Document(page_content=f"page {i}", metadata={"url": f"https://s/p{i}"}) for i in range(self.visible)]
        return hits[: self.k]


def _search(retriever: _Ranked) -> tuple[list[str], list[str]]:
    federation = FederatedRetriever(sources=[Source(name="s", retriever=retriever, k=2)], top_n=8)
    result = federation.search("q", principal=BOB)
    return [d.url for d in result.documents], [e.message for e in result.errors]


def test_hidden_hits_at_the_top_are_refilled_from_a_larger_page() -> None:
    retriever = _Ranked(hidden=3, asked=[])
    urls, errors = _search(retriever)
    assert urls == ["https://s/p0", "https://s/p1"] and errors == []
    assert retriever.asked == [2, 2 * REFILL_FACTOR]
    assert retriever.k == 2  # the shared retriever is never changed: a copy is asked


def test_the_rounds_are_bounded_and_the_shortfall_is_said_without_a_count() -> None:
    deepest = min(2 * REFILL_FACTOR**REFILL_ROUNDS, REFILL_MAX_K)
    retriever = _Ranked(hidden=deepest, asked=[])
    urls, errors = _search(retriever)
    assert urls == [] and len(retriever.asked) == 1 + REFILL_ROUNDS
    assert len(errors) == 1 and not any(ch.isdigit() for ch in errors[0].replace(str(1 + REFILL_ROUNDS), ""))
    # A source that ran out of hits reads as it would without its hidden ones: no error.
    assert _search(_Ranked(hidden=deepest - 1, visible=0, asked=[])) == ([], [])


def test_a_short_page_is_not_asked_again_and_is_no_error() -> None:
    retriever = _Ranked(hidden=0, visible=1, asked=[])
    assert _search(retriever) == (["https://s/p0"], [])
    assert retriever.asked == [2]


def test_the_async_path_refills_too() -> None:
    retriever = _Ranked(hidden=3, asked=[])
    federation = FederatedRetriever(sources=[Source(name="s", retriever=retriever, k=2)], top_n=8)
    result = asyncio.run(federation.asearch("q", principal=BOB))
    assert [d.url for d in result.documents] == ["https://s/p0", "https://s/p1"] and result.errors == []
