"""Federated retrieval (paper §3.1): every source at once, each under its own deadline, one ranking.

Order of work for one query, and why:

1. every source is asked concurrently (threads under `invoke`, asyncio tasks under `ainvoke`);
   a source that fails or misses its deadline becomes a `SourceError`, never an exception;
2. each source's hits are converted and **filtered by permissions first**, before fusion: a hidden
   document must not even win a deduplication against a visible copy of the same text. A source that
   applies permissions inside its search (the embedded index) already returned the caller's top k; any
   other one was asked for larger pages until k were visible, in bounded rounds (`refill`), and the
   filter here is defence in depth;
3. reciprocal-rank fusion (score = Σ weight / (rrf_k + rank)) merges the rankings, documents are
   deduplicated by URL and by content hash, and the top N are kept.

Sources run untraced: their raw answers may hold documents the caller may not see. What the trace
shows instead is one child run per source whose output is only the documents that passed the
permission filter.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import os
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from functools import partial
from typing import Any, ClassVar, Literal, Protocol, TypeVar, Unpack
from urllib.parse import urlsplit, urlunsplit

from langchain_core.callbacks import (
    AsyncCallbackManager,
    AsyncCallbackManagerForRetrieverRun,
    CallbackManager,
    CallbackManagerForRetrieverRun,
)
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import RunnableConfig, ensure_config
from pydantic import BaseModel, Field, model_validator

from evident.connectors.acl import PrincipalError, coerce_principal
from evident.connectors.base import to_langchain_document
from evident.connectors.chunks import CHUNK_OF
from evident.connectors.rerank import rerank_by_meaning
from evident.connectors.source import AccessOptions, RanksByMeaning, Source, SourceFailure, ranks_by_meaning
from evident.connectors.source_call import (
    SourceAnswer,
    SourceCallError,
    acall_untraced,
    as_source_error,
    call_untraced,
    collect,
    shortfall_error,
    timeout_error,
)
from evident.embeddings.failures import EmbeddingsError
from evident.embeddings.meaning import QueryMeaning, meaning_error
from evident.models import Principal, SourceDocument, SourceError, SourceRun

log = logging.getLogger(__name__)

DEFAULT_RRF_K = 60  # the constant of Cormack et al. (2009); damps the head of each ranking

RunStatus = Literal["ok", "empty", "error", "timeout", "config"]  # SourceRun.status


class SourceWorkers:
    """Threads for source calls, shared by all queries so that a query does not pay for starting them.

    A source stuck past its deadline keeps its thread until its own I/O timeout ends it. So that such
    threads can never make other queries wait in a queue, a query whose sources do not all find an
    idle shared thread gets a pool of its own, dropped (not waited for) when the query is done.
    """

    def __init__(self, size: int = 32) -> None:
        self.size = size
        self._lock = threading.Lock()
        self._busy = 0
        self._pool: ThreadPoolExecutor | None = None
        os.register_at_fork(after_in_child=self._forget)  # threads do not survive a fork

    def _forget(self) -> None:
        self._lock = threading.Lock()
        self._busy = 0
        self._pool = None

    def submit_all(self, calls: list[Callable[[], Any]]) -> tuple[list[Future[Any]], ThreadPoolExecutor | None]:
        with self._lock:
            shared = self._busy + len(calls) <= self.size
            if shared:
                self._busy += len(calls)
                if self._pool is None:
                    self._pool = ThreadPoolExecutor(max_workers=self.size, thread_name_prefix="evident-source")
                pool = self._pool
        if shared:
            futures = [pool.submit(self._run, call) for call in calls]
            for future in futures:  # a call cancelled before it started never reaches _run's finally
                future.add_done_callback(lambda f: self._release() if f.cancelled() else None)
            return futures, None
        overflow = ThreadPoolExecutor(max_workers=len(calls), thread_name_prefix="evident-source-extra")
        return [overflow.submit(call) for call in calls], overflow

    def _run(self, call: Callable[[], Any]) -> Any:
        try:
            return call()
        finally:
            self._release()

    def _release(self) -> None:
        with self._lock:
            self._busy -= 1


WORKERS = SourceWorkers()


class FederatedResult(BaseModel):
    """The fused documents of one query and what happened at each source."""

    documents: list[SourceDocument] = Field(default_factory=list)
    errors: list[SourceError] = Field(default_factory=list)
    runs: list[SourceRun] = Field(default_factory=list)
    acl_dropped: int = Field(0, description="documents removed because the caller may not see them")


class FederatedSearchError(RuntimeError):
    """Raised by a plain `invoke` when every source failed (`search` reports instead of raising)."""

    def __init__(self, errors: Sequence[SourceError]) -> None:
        self.errors = list(errors)
        super().__init__("; ".join(f"{e.source}: {e.message}" for e in errors) or "no sources configured")


@dataclass
class _Outcome:
    source: Source
    raw: Any = None
    error: SourceError | None = None
    denied: int = 0
    latency_ms: float = 0.0
    hidden: tuple[str, ...] = ()
    short: bool = False

    def settle(self, answer: SourceAnswer | BaseException) -> None:
        """Record what the source call gave: its answer, or its failure (never raised: the query goes on)."""
        if isinstance(answer, BaseException):
            self.error = as_source_error(self.source, answer)
            self.latency_ms = answer.latency_ms if isinstance(answer, SourceCallError) else 0.0
        else:
            self.raw, self.denied, self.latency_ms, self.hidden, self.short = answer


def _result_or_exception(future: Future[SourceAnswer]) -> SourceAnswer | BaseException:
    try:
        return future.result()
    except BaseException as exc:  # noqa: BLE001 - any failure of a source is that source's problem
        return exc


E = TypeVar("E", covariant=True)


class _TraceRun(Protocol[E]):
    """A source's child run in the trace: sync (ending returns None) or async (ending returns a coroutine)."""

    def on_retriever_end(self, documents: Sequence[Document], **kwargs: Any) -> E: ...

    def on_retriever_error(self, error: BaseException, **kwargs: Any) -> E: ...


def _end_traces(
    traces: Sequence[_TraceRun[E]], shown: Sequence[tuple[list[Document], SourceFailure | None]]
) -> list[E]:
    """End each source's trace run with what it may show: its visible documents, or its failure.

    Sync runs end here; for async ones this returns the coroutines to await, in order.
    """
    return [trace.on_retriever_end(docs) if error is None else trace.on_retriever_error(error)
            for trace, (docs, error) in zip(traces, shown, strict=True)]


@dataclass
class _Group:
    doc: SourceDocument
    order: int
    score: float = 0.0
    sources: list[int] = field(default_factory=list)


class FederatedRetriever(RanksByMeaning, BaseRetriever):
    """Queries every `Source` concurrently and fuses their rankings (see the module docstring).

    `invoke(query, principal=...)` returns the fused documents as LangChain `Document`s;
    `search(query, principal=...)` / `asearch(...)` also return the per-source errors and counts.
    """

    sources: list[Source]
    top_n: int = Field(8, ge=1)
    rrf_k: int = Field(DEFAULT_RRF_K, ge=1)
    unavailable: list[SourceError] = Field(
        default_factory=list, description="Sources that could not be built; reported on every query."
    )
    # A factory, not a default: pydantic would copy a default, and every query must share one pool.
    workers: SourceWorkers = Field(
        default_factory=lambda: WORKERS, exclude=True, description="The threads the sources are called on."
    )

    accepts_principal: ClassVar[bool] = True

    @model_validator(mode="after")
    def _unique_names(self) -> FederatedRetriever:
        seen: set[str] = set()
        for source in self.sources:
            if source.name in seen:
                raise ValueError(f"two sources are named {source.name!r}; source names must be unique")
            seen.add(source.name)
        return self

    @classmethod
    def wrap(
        cls, retriever: BaseRetriever, *, name: str, timeout_s: float, top_n: int, **kw: Any
    ) -> FederatedRetriever:
        """A federation of one: any retriever gets the same deadline, permission and trace handling."""
        return cls(sources=[Source(name=name, retriever=retriever, timeout_s=timeout_s, **kw)], top_n=top_n)

    # -- public entry points -------------------------------------------------------------------

    def search(
        self, query: str, *, principal: Principal | dict[str, Any] | None = None, config: RunnableConfig | None = None,
        meaning: QueryMeaning | None = None,
    ) -> FederatedResult:
        """The fused result; with `meaning`, every source's results are ranked by meaning as well as by
        words (the embedded index inside its search, the others by `rerank_by_meaning`). Traced as `invoke`
        is: one retriever run, with a child run per source."""
        run = self._callbacks(config).on_retriever_start(None, query, name=self._run_name(config))
        try:
            result = self._search_threads(query, coerce_principal(principal), meaning, run)
        except Exception as exc:
            run.on_retriever_error(exc)
            raise
        run.on_retriever_end([to_langchain_document(d) for d in result.documents])
        return result

    async def asearch(
        self, query: str, *, principal: Principal | dict[str, Any] | None = None, config: RunnableConfig | None = None,
        meaning: QueryMeaning | None = None,
    ) -> FederatedResult:
        run = await self._async_callbacks(config).on_retriever_start(None, query, name=self._run_name(config))
        try:
            result = await self._search_tasks(query, coerce_principal(principal), meaning, run)
        except Exception as exc:
            await run.on_retriever_error(exc)
            raise
        await run.on_retriever_end([to_langchain_document(d) for d in result.documents])
        return result

    # -- BaseRetriever: thin drivers around _merge ------------------------------------------------

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, **options: Unpack[AccessOptions]
    ) -> list[Document]:
        result = self._search_threads(query, coerce_principal(options.get("principal")), options.get("meaning"),
                                      run_manager)
        return self._deliver(result, options)

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun, **options: Unpack[AccessOptions]
    ) -> list[Document]:
        result = await self._search_tasks(query, coerce_principal(options.get("principal")), options.get("meaning"),
                                          run_manager)
        return self._deliver(result, options)

    def _search_threads(self, query: str, who: Principal | None, meaning: QueryMeaning | None,
                        run_manager: CallbackManagerForRetrieverRun) -> FederatedResult:
        child = run_manager.get_child()
        traces = [child.on_retriever_start(None, query, name=s.name) for s in self.sources]
        result, shown = self._merge(self._gather_threads(query, who, meaning), who, meaning)
        _end_traces(traces, shown)
        return result

    async def _search_tasks(self, query: str, who: Principal | None, meaning: QueryMeaning | None,
                            run_manager: AsyncCallbackManagerForRetrieverRun) -> FederatedResult:
        child = run_manager.get_child()
        traces = [await child.on_retriever_start(None, query, name=s.name) for s in self.sources]
        outcomes = await self._gather_tasks(query, who, meaning)
        # Re-ranking embeds remote pages: model work, kept off the event loop the server's requests share.
        if meaning is not None:
            result, shown = await asyncio.to_thread(self._merge, outcomes, who, meaning)
        else:
            result, shown = self._merge(outcomes, who, None)
        for ending in _end_traces(traces, shown):
            await ending
        return result

    # `search` opens its run as `BaseRetriever.invoke` does (same callbacks, tags, metadata and name), so a
    # trace shows the same retriever run whichever entry point was used.
    def _run_name(self, config: RunnableConfig | None) -> str:
        return ensure_config(config).get("run_name") or self.get_name()

    def _callback_settings(self, config: RunnableConfig | None) -> dict[str, Any]:
        config = ensure_config(config)
        return {"inheritable_callbacks": config.get("callbacks"), "local_callbacks": None,
                "inheritable_tags": config.get("tags"), "local_tags": self.tags,
                "inheritable_metadata": {**(config.get("metadata") or {}), **self._get_ls_params()},
                "local_metadata": self.metadata}

    def _callbacks(self, config: RunnableConfig | None) -> CallbackManager:
        return CallbackManager.configure(**self._callback_settings(config))

    def _async_callbacks(self, config: RunnableConfig | None) -> AsyncCallbackManager:
        return AsyncCallbackManager.configure(**self._callback_settings(config))

    def _deliver(self, result: FederatedResult, options: AccessOptions) -> list[Document]:
        """`invoke`'s answer: the documents; every source failing is an error (`search` reports it instead)."""
        report = options.get("report")
        if report is not None:  # this federation is itself a source of an outer one
            report.denied += result.acl_dropped
        for error in result.errors:
            log.warning("source %s: %s", error.source, error.message)
        failed = all(r.status in {"error", "timeout", "config"} for r in result.runs)
        if result.errors and not result.documents and failed:
            raise FederatedSearchError(result.errors)
        return [to_langchain_document(doc) for doc in result.documents]

    # -- asking the sources --------------------------------------------------------------------

    def _gather_threads(self, query: str, principal: Principal | None, meaning: QueryMeaning | None) -> list[_Outcome]:
        if not self.sources:
            return []
        outcomes = {id(s): _Outcome(source=s) for s in self.sources}
        start = time.perf_counter()
        submitted, overflow = self.workers.submit_all(
            [partial(contextvars.Context().run, call_untraced, s, query, principal, meaning) for s in self.sources]
        )
        futures: dict[Future[SourceAnswer], Source] = dict(zip(submitted, self.sources, strict=True))
        deadlines = {f: start + s.timeout_s for f, s in futures.items()}
        pending = set(futures)
        try:
            while pending:
                for fut in [f for f in pending if f.done()]:
                    pending.discard(fut)
                    outcomes[id(futures[fut])].settle(_result_or_exception(fut))
                now = time.perf_counter()
                for fut in [f for f in pending if deadlines[f] <= now]:
                    pending.discard(fut)
                    fut.cancel()
                    outcomes[id(futures[fut])].error = timeout_error(futures[fut])
                    outcomes[id(futures[fut])].latency_ms = futures[fut].timeout_s * 1000
                if pending:
                    next_deadline = min(deadlines[f] for f in pending)
                    wait(pending, timeout=max(0.0, next_deadline - now), return_when=FIRST_COMPLETED)
        finally:
            if overflow is not None:
                overflow.shutdown(wait=False, cancel_futures=True)
        return [outcomes[id(s)] for s in self.sources]

    async def _gather_tasks(
        self, query: str, principal: Principal | None, meaning: QueryMeaning | None
    ) -> list[_Outcome]:
        loop = asyncio.get_running_loop()
        # Each task runs in an empty context: no trace parent, no inherited callbacks (module doc).
        tasks = [
            loop.create_task(acall_untraced(s, query, principal, meaning), context=contextvars.Context())
            for s in self.sources
        ]
        # Cancelling this coroutine cancels the tasks too; a source's own failure is returned, not raised.
        answers = await asyncio.gather(*tasks, return_exceptions=True)
        outcomes = [_Outcome(source=source) for source in self.sources]
        for outcome, answer in zip(outcomes, answers, strict=True):
            outcome.settle(answer)
        return outcomes

    # -- merging -------------------------------------------------------------------------------

    def _merge(
        self, outcomes: list[_Outcome], principal: Principal | None, meaning: QueryMeaning | None
    ) -> tuple[FederatedResult, list[tuple[list[Document], SourceFailure | None]]]:
        """The fused result, and per source what its trace run may show (visible documents only)."""
        result = FederatedResult(errors=list(self.unavailable))
        result.runs = [SourceRun(source=e.source, status="config") for e in self.unavailable]
        ranked: list[tuple[int, list[SourceDocument]]] = []
        shown: list[tuple[list[Document], SourceFailure | None]] = []
        for index, outcome in enumerate(outcomes):
            source = outcome.source
            if outcome.error is None:
                visible, denied, problem = collect(source, outcome.raw, principal)
                outcome.denied += denied
                if problem:
                    outcome.error = SourceError(source=source.name, kind="error", message=problem)
                elif outcome.short:
                    outcome.error = shortfall_error(source)
                if meaning is not None and visible and not ranks_by_meaning(source.retriever):
                    try:
                        visible = rerank_by_meaning(visible, meaning)
                    except EmbeddingsError as exc:  # the source's own order stands; the query is degraded
                        result.errors.append(meaning_error(source.name, exc))
                ranked.append((index, visible))
                status: RunStatus = "ok" if visible or outcome.denied else ("empty" if problem is None else "error")
                result.runs.append(SourceRun(source=source.name, status=status, documents=len(visible),
                                             denied=outcome.denied, latency_ms=round(outcome.latency_ms, 2),
                                             hidden=list(outcome.hidden)))
                shown.append(([to_langchain_document(d) for d in visible], None))
            else:
                failure = SourceFailure(outcome.error.message, kind=outcome.error.kind)
                result.runs.append(SourceRun(source=source.name, status=failure.kind, denied=outcome.denied,
                                             latency_ms=round(outcome.latency_ms, 2)))
                shown.append(([], failure))
            if outcome.error is not None:
                result.errors.append(outcome.error)
            result.acl_dropped += outcome.denied
        result.documents = self._fuse(ranked)
        return result, shown

    def _fuse(self, ranked: list[tuple[int, list[SourceDocument]]]) -> list[SourceDocument]:
        entries: list[tuple[float, int, int, SourceDocument]] = []
        for index, docs in ranked:
            weight = self.sources[index].weight
            entries.extend((weight / (self.rrf_k + rank), index, rank, doc) for rank, doc in enumerate(docs, start=1))
        # Strongest single contribution first, so a group's representative is its best-ranked copy.
        entries.sort(key=lambda e: (-e[0], e[1], e[2]))
        groups: list[_Group] = []
        by_url: dict[str, _Group] = {}
        by_hash: dict[str, _Group] = {}
        for contribution, index, _, doc in entries:
            # A chunk's id differs from its document's by its fragment alone: the fragment is its identity.
            key = doc.url if CHUNK_OF in doc.metadata else url_key(doc.url)
            group = by_url.get(key) or by_hash.get(doc.content_hash)
            if group is None:
                group = _Group(doc=doc, order=len(groups))
                groups.append(group)
            if index not in group.sources:  # one source listing a page twice does not vote twice
                group.sources.append(index)
                group.score += contribution
            by_url.setdefault(key, group)
            by_hash.setdefault(doc.content_hash, group)
        groups.sort(key=lambda g: (-g.score, g.order))
        fused = []
        for group in groups[: self.top_n]:
            metadata = {**group.doc.metadata, "rrf_score": round(group.score, 6),
                        "found_in": [self.sources[i].name for i in group.sources]}
            fused.append(group.doc.model_copy(update={"metadata": metadata}))
        return fused


def url_key(url: str) -> str:
    """The identity of a URL for deduplication: no fragment, case-folded scheme and host, no trailing slash."""
    try:
        parts = urlsplit(url.strip())
    except ValueError:
        return url
    path = parts.path.rstrip("/") if parts.path not in {"", "/"} else ""
    return urlunsplit((parts.scheme.lower(), parts.netloc.lower(), path, parts.query, ""))


__all__ = [
    "DEFAULT_RRF_K", "FederatedResult", "FederatedRetriever", "FederatedSearchError", "PrincipalError", "url_key",
]
