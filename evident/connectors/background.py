"""Embedding a served index in the background: a server answers at once and its index gains meaning.

A server (`evident serve`, `langgraph dev`, Aegra) never embeds an index inside a request: embedding a manual
is minutes of compute, and a request must not wait for it. When it opens an index that lacks vectors of the
model (`evident/web/app.py`, at start-up) or a query finds one (`query_meaning.prepare_meaning`, after a
refresh by another process), the work is handed to one thread of the process, which embeds one index at a
time, in the index's resumable steps (`vectors.embed_missing`), and logs its progress with an estimate of
the time left. Meanwhile every query is answered by words over every document and by meaning over the
documents embedded so far, and says so (`partly_embedded`).

Bounded: one thread, one index at a time, each index queued once; a failed run is tried again by the next
request after RETRY_AFTER_S, not by every request. One process at a time per index: while another holds
`<index>.embedding.lock` (an `evident index`, another replica), this one leaves the work to it and looks
again after RETRY_AFTER_S; its committed steps show in this process's searches meanwhile.

Cancellable: `stop()` (the server's shutdown) ends the run before its next step; the steps committed stay,
and the next start goes on from there. Consistent: each step is one SQLite transaction under the index's
write lock, so readers see a step whole or not at all, and a refresh by another process waits for one
step, not for the whole embedding.

`[embeddings] background` (`EVIDENT_EMBEDDINGS_BACKGROUND`, on by default) turns it off; then a served index
ranks by meaning only what `evident index` embedded.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from langchain_core.retrievers import BaseRetriever

from evident.connectors.federated import FederatedRetriever
from evident.connectors.source import StoresVectors

if TYPE_CHECKING:
    from evident.connectors.index.vectors import EmbedStats
    from evident.embeddings.scorer import SemanticScorer

log = logging.getLogger(__name__)

# A run that failed (an embeddings server down, a damaged file) is not tried again before this many seconds.
RETRY_AFTER_S = 60.0
# How often a running embedding logs its progress.
LOG_EVERY_S = 30.0

Work = Callable[[Callable[[], bool]], "EmbedStats | None"]  # given `stop`, embeds; None: nothing to do


def embedded_indexes(retriever: BaseRetriever) -> Iterator[tuple[str, StoresVectors]]:
    """(source name, index) of every source of `retriever` that keeps its documents' vectors."""
    if isinstance(retriever, StoresVectors):
        yield str(getattr(retriever, "source_name", type(retriever).__name__)), retriever
    elif isinstance(retriever, FederatedRetriever):
        for source in retriever.sources:
            for _, local in embedded_indexes(source.retriever):
                yield source.name, local


@dataclass
class _Job:
    name: str
    work: Work
    state: str = "queued"  # queued, running, done, stopped, failed, elsewhere (another process embeds it)
    detail: str = ""
    finished_at: float = 0.0


@dataclass
class BackgroundEmbedding:
    """One thread embedding the indexes handed to it, one at a time (module docstring)."""

    retry_after_s: float = RETRY_AFTER_S
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _idle: threading.Condition = field(init=False)
    _jobs: dict[str, _Job] = field(default_factory=dict)  # by key, in the order they were asked for
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def __post_init__(self) -> None:
        self._idle = threading.Condition(self._lock)

    def request(self, key: str, name: str, work: Work) -> bool:
        """Have `work` run in the background under `key` (an index and a model), unless it is queued or
        running already, or failed less than `retry_after_s` ago. Never waits; True when it is queued or
        running now, False when it failed lately."""
        with self._lock:
            job = self._jobs.get(key)
            if job is not None and job.state in ("queued", "running"):
                return True
            if job is not None and job.state in ("failed", "elsewhere") and (
                    time.monotonic() - job.finished_at < self.retry_after_s):
                return job.state == "elsewhere"  # another process embeds it: it goes on, not here
            self._jobs[key] = _Job(name, work)
            if self._thread is None or not self._thread.is_alive():
                self._stop.clear()
                # A daemon: a process that exits without `stop()` loses at most the step under way.
                self._thread = threading.Thread(target=self._run, name="evident-embedding", daemon=True)
                self._thread.start()
            return True

    def embed(self, name: str, index: StoresVectors, scorer: SemanticScorer) -> bool:
        """Queue the embedding of `index` (of source `name`) with `scorer`'s model (`request`)."""

        def work(stop: Callable[[], bool]) -> EmbedStats | None:
            return index.embed_index(scorer, progress=_progress_log(name), stop=stop)

        return self.request(f"{id(index)}:{scorer.model_id}", name, work)

    def _next(self) -> tuple[str, _Job] | None:
        with self._lock:
            if not self._stop.is_set():
                for key, job in self._jobs.items():
                    if job.state == "queued":
                        job.state = "running"
                        return key, job
            for key in [k for k, job in self._jobs.items() if job.state == "queued"]:
                del self._jobs[key]  # asked for while stopping: the next request queues it again
            self._thread = None
            self._idle.notify_all()
            return None

    def _run(self) -> None:
        while (found := self._next()) is not None:
            key, job = found
            try:
                stats = job.work(self._stop.is_set)
            except Exception as exc:  # the server goes on by words; the next request after a while tries again
                message = getattr(exc, "message", None) or f"{type(exc).__name__}: {exc}"
                log.warning("evident: embedding the index of source %s in the background failed: %s",
                            job.name, message)  # fmt: skip
                state, detail = "failed", str(message)
            else:
                stopped = stats is not None and stats.stopped
                state = "elsewhere" if stats is not None and stats.elsewhere else "stopped" if stopped else "done"
                detail = ("" if stats is None or stats.elsewhere
                          else f"{stats.documents} documents in {stats.seconds:.1f} s")  # fmt: skip
                if stopped:
                    log.info("evident: embedding of source %s stopped after %s; the next start goes on",
                             job.name, detail)  # fmt: skip
            with self._lock:
                job.state, job.detail, job.finished_at = state, detail, time.monotonic()
                if state == "stopped":
                    del self._jobs[key]  # asked again after a restart, it goes on from its last step

    def stop(self, timeout_s: float = 10.0) -> bool:
        """End the run under way before its next step and drop the queue; True once the thread has ended
        (it may be inside a step for up to a step's time: `timeout_s` bounds the wait, not the step)."""
        with self._lock:
            self._stop.set()
            thread = self._thread
            for key in [k for k, job in self._jobs.items() if job.state == "queued"]:
                del self._jobs[key]
        if thread is not None:
            thread.join(timeout_s)
            return not thread.is_alive()
        return True

    def wait(self, timeout_s: float) -> bool:
        """Wait until nothing is queued or running; True when so within `timeout_s`."""
        with self._lock:
            return self._idle.wait_for(lambda: self._thread is None, timeout_s)

    def status(self, *, detail: bool = True) -> dict[str, Any]:
        """{source: state} of every index handed over ("queued", "running", "done", "failed", "elsewhere"),
        each with its detail (a failure's message, the count of documents embedded) unless `detail` is False:
        those are the operator's, not a user's (a count takes in documents the user may not see)."""
        with self._lock:
            return {job.name: job.state if not (detail and job.detail) else f"{job.state} ({job.detail})"
                    for job in self._jobs.values()}


def _progress_log(name: str, every_s: float = LOG_EVERY_S) -> Callable[[int, int], None]:
    """A progress callback logging, at most every `every_s`, how far the embedding of source `name` is."""
    started = last = time.monotonic()

    def progress(done: int, total: int) -> None:
        nonlocal last
        now = time.monotonic()
        if now - last < every_s and done < total:
            return
        last = now
        share = done / total if total else 1.0
        left = f", about {(now - started) * (1 - share) / share:.0f} s left" if 0 < share < 1 else ""
        log.info("evident: embedding source %s in the background: %d of %d documents (%.0f%%)%s",
                 name, done, total, share * 100, left)  # fmt: skip

    return progress


BACKGROUND = BackgroundEmbedding()
