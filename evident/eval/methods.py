"""The compared methods, each turning (query, shared documents) into a `MethodRecord`.

- `evident`: the real graph (`build_graph`) over the shared documents, offline or with a model;
- `bm25`: the top retrieved document's best passage (the offline extractor's best window), cited;
- `pilot`, `direct`, `ges`: the paper's baselines (App. B, C.1, C.2), one model call over all the
  documents; without a model they are skipped, never imitated.
"""

from __future__ import annotations

import time
from typing import Any

from evident.alignment.models import SourceDocument
from evident.context import EvidentContext
from evident.eval.citations import is_abstention, numbered_facts
from evident.eval.records import CitedFact, MethodRecord, Outcome
from evident.eval.retrieval import ReplayRetriever
from evident.graph import build_graph
from evident.llm.failures import call_with_retries, describe_failure
from evident.llm.models import Models
from evident.llm.replies import text_of
from evident.models import INSUFFICIENT_ANSWER, Citation, SourceError
from evident.nodes.names import EXTRACT, GENERATE
from evident.offline.answerability import ALWAYS
from evident.offline.extractor import extract_passages
from evident.prompts import BASELINE_PROMPTS, render_numbered_documents
from evident.state import read

MODEL_METHODS = ("pilot", "direct", "ges")
METHODS = ("evident", "bm25", *MODEL_METHODS)
NO_MODEL = "needs a model: set EVIDENT_MODEL (with OPENAI_BASE_URL or OPENAI_API_KEY) or [model] in evident.toml"


def method_settings(method: str, ctx: EvidentContext) -> list[Any]:
    """What a method's answer depends on besides the query and its documents (the cache key)."""
    model = [ctx.model, ctx.base_url, ctx.temperature, ctx.model_max_tokens]
    if method == "bm25":
        return ["bm25-top1-best-window"]
    if method in MODEL_METHODS:
        return [*model, BASELINE_PROMPTS[method].pretty_repr()]
    return [
        ctx.resolved_mode, *(model if ctx.resolved_mode == "llm" else []), ctx.ngram_n, ctx.threshold, ctx.drift,
        ctx.bridge, ctx.unsupported, ctx.max_passages, ctx.sentence_threshold, ctx.context_budget_tokens,
        ctx.structured_output, sorted(ctx.glossary.items()),
    ]


def answer_outcome(answer: str) -> Outcome:
    # An answer without citations is not an abstention: it counts as answered, and ungrounded.
    return "insufficient" if is_abstention(answer) or not answer.strip() else "answered"


class EvidentMethod:
    """The EvidenT graph with retrieval replayed from the shared records."""

    def __init__(self, ctx: EvidentContext, chat_model: Any = None) -> None:
        self.ctx = ctx
        self.replay = ReplayRetriever(by_query={})
        self.graph = build_graph(retriever=self.replay, chat_model=chat_model, name="evident-eval")

    def __call__(self, key: str, query_id: str, query: str, docs: list[SourceDocument]) -> MethodRecord:
        # Queries may run in parallel threads: each adds its own documents, none replaces another's.
        self.replay.by_query[query.strip()] = docs
        try:
            state = dict(self.graph.invoke({"query": query}, context=self.ctx))
        except Exception as exc:  # one failing query must not stop the run
            return MethodRecord(key=key, query_id=query_id, method="evident", outcome="error",
                                reason=f"{type(exc).__name__}: {exc}")
        answer = state.get("answer", "")
        citations = read(Citation, state.get("citations"))
        facts = [CitedFact(sentence=c.sentence, url=c.url, quote=c.quote, heading_path=c.heading_path)
                 for c in citations]
        outcome: Outcome = "error" if state.get("status") == "error" else answer_outcome(answer)
        errors = [f"{e.source}: {e.message}" for e in read(SourceError, state.get("model_errors"))]
        return MethodRecord(
            key=key, query_id=query_id, method="evident", outcome=outcome, answer=answer, facts=facts,
            passages=list(state.get("passages") or []), alignment=list(state.get("alignment") or []),
            timings_ms=dict(state.get("timings_ms") or {}), reason=state.get("error", "") or "; ".join(errors),
            degraded=bool(errors), evidence=state.get("evidence") or "none",
        )


def bm25_answer(key: str, query_id: str, query: str, docs: list[SourceDocument]) -> MethodRecord:
    """The top-1 document's best window, quoted verbatim and cited."""
    start = time.perf_counter()
    found = extract_passages(query, docs[:1], max_passages=1, gate=ALWAYS) if docs else []
    ms = round((time.perf_counter() - start) * 1000, 2)
    if not found:
        return MethodRecord(key=key, query_id=query_id, method="bm25", outcome="insufficient",
                            answer=INSUFFICIENT_ANSWER, timings_ms={EXTRACT: ms})
    p = found[0]
    return MethodRecord(
        key=key, query_id=query_id, method="bm25", outcome="answered", answer=f"{p.content} [{p.url}]",
        facts=[CitedFact(sentence=p.content, url=p.url, quote=p.content)], timings_ms={EXTRACT: ms},
    )


class BaselineMethod:
    """One of the paper's prompting baselines: all documents in, a reference-numbered answer out."""

    def __init__(self, name: str, ctx: EvidentContext, chat_model: Any = None) -> None:
        self.name = name
        self.ctx = ctx
        self.models = Models(chat_model)

    def __call__(self, key: str, query_id: str, query: str, docs: list[SourceDocument]) -> MethodRecord:
        messages = BASELINE_PROMPTS[self.name].format_messages(documents=render_numbered_documents(docs), query=query)
        start = time.perf_counter()
        try:
            model = self.models.get(self.ctx, "generate")
            reply = call_with_retries(lambda: model.invoke(messages), self.ctx)
        except Exception as exc:
            return MethodRecord(key=key, query_id=query_id, method=self.name, outcome="error", model_calls=1,
                                reason=describe_failure(exc, self.ctx).message)
        ms = round((time.perf_counter() - start) * 1000, 2)
        answer = text_of(reply).strip()
        facts = [] if is_abstention(answer) else numbered_facts(answer, [d.url for d in docs])
        return MethodRecord(
            key=key, query_id=query_id, method=self.name, outcome=answer_outcome(answer), answer=answer, facts=facts,
            timings_ms={GENERATE: ms}, model_calls=1,
        )


def skipped(method: str, key: str, query_id: str, reason: str) -> MethodRecord:
    return MethodRecord(key=key, query_id=query_id, method=method, outcome="skipped", reason=reason)
