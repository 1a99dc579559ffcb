"""The evaluation loop: retrieve once per query, run every method on those documents, resume.

`evaluate` returns the rows of every method (from the cache where possible) and counts what it
actually computed, so a second run over the same `--out` can be seen to do no work.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from evident.context import EvidentContext
from evident.eval.dataset import EvalQuery
from evident.eval.followups import Rewriter, rewrite_settings
from evident.eval.methods import (
    MODEL_METHODS,
    NO_MODEL,
    BaselineMethod,
    EvidentMethod,
    bm25_answer,
    method_settings,
    skipped,
)
from evident.eval.records import MethodRecord
from evident.eval.retrieval import SharedRetrieval, retrieval_settings, with_meaning
from evident.eval.store import Store, engine_fingerprint, settings_hash
from evident.eval.summary import Row

Runner = Callable[[str, str, str, list[Any]], MethodRecord]
T = TypeVar("T")


class _Once(Generic[T]):
    """A value made on first use (by one thread, when queries run in parallel) and shared after."""

    def __init__(self, make: Callable[[], T]) -> None:
        self._make = make
        self._lock = threading.Lock()
        self._value: T | None = None

    def __call__(self) -> T:
        with self._lock:
            if self._value is None:
                self._value = self._make()
            return self._value


@dataclass
class EvalRun:
    rows: dict[str, list[Row]] = field(default_factory=dict)  # method -> one row per query
    skipped: dict[str, str] = field(default_factory=dict)  # method -> why it did not run
    computed: dict[str, int] = field(default_factory=dict)  # "retrieval" / method -> records made now
    store: Store | None = None


def _runners(methods: Sequence[str], ctx: EvidentContext, chat_model: Any) -> tuple[dict[str, Runner], dict[str, str]]:
    has_model = chat_model is not None or ctx.resolved_mode == "llm"
    runners: dict[str, Runner] = {}
    skips: dict[str, str] = {}
    for method in methods:
        if method in MODEL_METHODS and not has_model:
            skips[method] = NO_MODEL
        elif method in MODEL_METHODS:
            runners[method] = BaselineMethod(method, ctx, chat_model)
        elif method == "bm25":
            runners[method] = bm25_answer
        else:
            runners[method] = EvidentMethod(ctx, chat_model)
    return runners, skips


def evaluate(
    queries: Sequence[EvalQuery],
    ctx: EvidentContext,
    methods: Sequence[str],
    cache_dir: Path | None,
    *,
    chat_model: Any = None,
    progress: bool = True,
    judge: Callable[[MethodRecord, dict[str, str]], list[str]] | None = None,
    jobs: int = 1,
) -> EvalRun:
    """Every method on every query, reusing the records under `cache_dir`.

    `jobs` > 1 runs that many queries at once (threads: worth it when a model answers, since the
    time goes into waiting for it); rows keep the order of `queries` either way.
    """
    store = Store(cache_dir)
    run = EvalRun(store=store, computed={"retrieval": 0, **{m: 0 for m in methods}})
    runners, run.skipped = _runners(methods, ctx, chat_model)
    rkey = [retrieval_settings(ctx), engine_fingerprint()]
    mkeys = {m: [method_settings(m, ctx), engine_fingerprint()] for m in methods}
    lock = threading.Lock()
    retriever = _Once(lambda: SharedRetrieval(ctx))
    rewriter = _Once(lambda: Rewriter(ctx, chat_model))

    def count(what: str) -> None:
        with lock:
            run.computed[what] = run.computed.get(what, 0) + 1

    def retrieval_key(q: EvalQuery) -> str:
        if not q.history:
            return f"{q.id}:{settings_hash(q.query, rkey)}"
        history = [m.model_dump() for m in q.history]
        return f"{q.id}:{settings_hash(q.query, history, rkey, rewrite_settings(ctx))}"

    def one(q: EvalQuery) -> dict[str, Row]:
        key = retrieval_key(q)
        ret = store.retrievals.get(key)
        if ret is None or any(h not in store.documents for h in ret.hashes):
            question, problems = q.query, list[str]()
            if q.history:
                bar.update(task, description=f"{q.id} rewrite")
                question, problems = rewriter()(q)
            bar.update(task, description=f"{q.id} retrieve")
            ret, docs = retriever().search(q.id, question, key)
            if q.history:
                ret = ret.model_copy(update={"standalone_query": question, "errors": [*problems, *ret.errors]})
            store.add_retrieval(ret, docs)
            count("retrieval")
        # A follow-up is answered as its standalone question, by every method alike.
        question = ret.standalone_query or q.query
        docs = with_meaning(store.docs_of(ret), ret)
        texts = {d.url: d.content for d in docs}
        rows: dict[str, Row] = {}
        for method in methods:
            mkey = f"{q.id}:{settings_hash(method, question, ret.hashes, mkeys[method])}"
            rec = store.record(method, mkey)
            if rec is None or rec.outcome in ("skipped", "error"):
                if method in run.skipped:
                    rec = skipped(method, mkey, q.id, run.skipped[method])
                else:
                    bar.update(task, description=f"{q.id} {method}")
                    rec = runners[method](mkey, q.id, question, docs)
                    count(method)
                store.add_record(rec)
            if judge is not None and rec.facts and not rec.judge and rec.outcome != "error":
                bar.update(task, description=f"{q.id} {method} judge")
                rec.judge = judge(rec, texts)
                count("judge")
                store.add_record(rec)
            rows[method] = Row(query=q, retrieval=ret, record=rec, documents=texts)
        bar.advance(task)
        return rows

    bar = Progress(TextColumn("[bold]evaluating[/] {task.description}"), BarColumn(), MofNCompleteColumn(),
                   TimeElapsedColumn(), TimeRemainingColumn(), console=Console(stderr=True), disable=not progress)
    with bar:
        task = bar.add_task("", total=len(queries))
        if jobs > 1:
            with ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="evident-eval") as pool:
                results = list(pool.map(one, queries))
        else:
            results = [one(q) for q in queries]
    run.rows = {m: [r[m] for r in results] for m in methods}
    return run
