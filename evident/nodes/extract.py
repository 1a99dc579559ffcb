"""extract (paper §3.2): candidate verbatim passages from the retrieved documents.

LLM mode fans out: `route_extraction` packs the documents into batches that fit the context budget
and sends one `extract_batch` task per batch (LangGraph `Send`, run in parallel); `extract` then
merges their passages, de-duplicated, in batch order. A batch whose model call fails is extracted
by the offline extractor instead and reported in `model_errors`. Offline mode (no model) runs the
deterministic lexical extractor over all documents.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Literal

from langgraph.runtime import Runtime
from langgraph.types import Send

from evident.alignment import nfkc_casefold
from evident.alignment.models import Passage, SourceDocument
from evident.context import EvidentContext
from evident.conversation.rule import condense
from evident.llm.batching import extraction_budget, plan_batches
from evident.llm.failures import ModelFailure, describe_failure
from evident.llm.usage import counting_tokens
from evident.models import BatchExtraction, Rewrite
from evident.nodes.common import conversation_of, timed
from evident.nodes.names import EXTRACT, EXTRACT_BATCH, POSTPROCESS, batch_timing
from evident.nodes.parts import DEFAULT_PARTS, GraphParts
from evident.offline.answerability import AnswerGate
from evident.offline.extractor import Extraction, extract_evidence
from evident.prompts.render import render_document
from evident.request_settings import run_settings
from evident.state import EvidentState, ExtractBatch, ExtractUpdate, as_json, read

OFFLINE_FALLBACK = "used the offline extractor"
log = logging.getLogger(__name__)


def _key(url: str, text: str) -> tuple[str, str]:
    return url.strip().rstrip("/").lower(), " ".join(nfkc_casefold(text).split())


def merge_passages(groups: Sequence[Sequence[Passage]]) -> list[Passage]:
    """Passages of all batches in order, each kept once: exact repeats (modulo case and whitespace)
    and passages contained in a longer passage of the same document are dropped. Ids are renumbered
    p1, p2, … because every batch numbers its own passages from 1."""
    flat = [p for group in groups for p in group]
    keys = [_key(p.url, p.content) for p in flat]
    keep: list[Passage] = []
    seen: set[tuple[str, str]] = set()
    for i, (p, (url, text)) in enumerate(zip(flat, keys, strict=True)):
        if not text or (url, text) in seen:
            continue  # drops.REPEATED
        inside = any(
            j != i and u == url and text != t and text in t for j, (u, t) in enumerate(keys)
        )
        if inside:
            continue  # drops.CONTAINED
        seen.add((url, text))
        keep.append(p)
    return [p.model_copy(update={"passage_id": f"p{i}"}) for i, p in enumerate(keep, 1)]


def _offline(state: EvidentState, docs: Sequence[SourceDocument], ctx: EvidentContext) -> Extraction:
    """The offline extractor's passages; documents retrieved by meaning are read by meaning too."""
    gate = AnswerGate.of(ctx)
    info = state.get("rewrite")
    rewrite = Rewrite.model_validate(info) if info is not None else None
    if rewrite is not None and rewrite.turns > 0:
        # The meaning gate is calibrated on first questions (benchmarks/abstention.py); the development
        # set has no unanswerable follow-up to calibrate it on, and read by meaning it refuses 4.5% of
        # doc2dial's answerable tune follow-ups against 2.6% by words. A turn of a conversation is gated by words.
        gate = gate.by_words()
    found = extract_evidence(state["query"], docs, max_passages=ctx.max_passages,
                             semantic_weight=ctx.semantic_weight, gate=gate, settings=ctx.offline)
    if found.passages or rewrite is None or rewrite.turns == 0 or rewrite.rewritten_by != "none":
        return found
    # A follow-up the rule took as naming its own topic ("How do I find out if my spouse is eligible?")
    # that no text covers is read again as continuing the conversation's topic, as an elliptical turn
    # is: its own words still weigh above the carried ones, and the gate still decides.
    history = conversation_of(state).history
    continued, changed = condense(rewrite.asked, history, continued=True)
    if not changed:
        return found
    return extract_evidence(continued, docs, max_passages=ctx.max_passages,
                            semantic_weight=ctx.semantic_weight, gate=gate, settings=ctx.offline)


def route_extraction(
    state: EvidentState, runtime: Runtime[EvidentContext], *, parts: GraphParts = DEFAULT_PARTS
) -> Literal["extract", "postprocess"] | list[Send]:
    """After retrieve: stop on an error, fan out to the model, or extract offline."""
    if state.get("status") == "error":
        return POSTPROCESS
    ctx = run_settings(runtime)
    models = parts.models
    docs = read(SourceDocument, state.get("documents"))
    if not docs or not models.enabled(ctx):
        return EXTRACT
    try:
        models.get(ctx, "extract")  # a configuration problem is reported once, by `extract`
    except Exception:
        return EXTRACT
    try:
        count = parts.counter(ctx)
        batches = plan_batches(docs, budget=extraction_budget(ctx, count), count=count,
                               render=render_document, max_batches=ctx.max_extract_batches)
    except Exception:  # a broken (injected) token counter must not fail the query
        log.warning("planning extraction batches failed; one batch per document", exc_info=True)
        batches = [[d] for d in docs[: ctx.max_extract_batches]]  # the rest: drops.BATCH_CAP
    return [
        Send(EXTRACT_BATCH, ExtractBatch(query=state["query"], batch=i, of=len(batches), documents=as_json(batch)))
        for i, batch in enumerate(batches, 1)
    ] or EXTRACT


def extract_batch(
    payload: ExtractBatch, runtime: Runtime[EvidentContext], *, parts: GraphParts = DEFAULT_PARTS
) -> ExtractUpdate:
    """One extraction call over one batch (a `Send` task)."""
    # Here, not at the top: the model call brings LangChain's prompt templates, which the
    # offline path (every `evident ask` without a model) never uses and should not load.
    from evident.llm.extraction import extract_with_model

    ctx = run_settings(runtime)
    models = parts.models
    i, of = int(payload["batch"]), int(payload["of"])
    docs = read(SourceDocument, payload["documents"])
    update: ExtractUpdate = {}
    with timed(batch_timing(i), update), counting_tokens() as usage:
        try:
            passages, note, rung = extract_with_model(models.get(ctx, "extract"), ctx, payload["query"], docs)
            result = BatchExtraction(batch=i, of=of, documents=docs, passages=passages, note=note, rung=rung,
                                     tokens=usage.as_dict())
        except Exception as exc:  # any model failure degrades this batch, never the query
            failure = describe_failure(exc, ctx)
            step = f"{EXTRACT} (batch {i} of {of})" if of > 1 else EXTRACT
            update["model_errors"] = [failure.to_error(models.name(ctx), step, OFFLINE_FALLBACK)]
            result = BatchExtraction(batch=i, of=of, documents=docs, failed=True, note=failure.message,
                                     tokens=usage.as_dict())
    update["extractions"] = [result]
    return update


def extract(
    state: EvidentState, runtime: Runtime[EvidentContext], *, parts: GraphParts = DEFAULT_PARTS
) -> ExtractUpdate:
    ctx = run_settings(runtime)
    models = parts.models
    update: ExtractUpdate = {}
    docs = read(SourceDocument, state.get("documents"))
    # Weak evidence is the offline extractor's judgement of its own passages, not of a model's.
    update["weak_evidence"] = False
    with timed(EXTRACT, update):
        if not models.enabled(ctx):
            found = _offline(state, docs, ctx) if docs else Extraction()
            update["passages"], update["weak_evidence"] = found.passages, found.weak
            return update
        update.update({"mode": "llm", "extractions": None})
        batches = sorted(read(BatchExtraction, state.get("extractions")), key=lambda b: b.batch)
        if docs and not batches:
            # The router found no usable model: say why once, answer this step offline.
            try:
                models.get(ctx, "extract")
                reason = ModelFailure("model", "no extraction call was made")
            except Exception as exc:
                reason = describe_failure(exc, ctx)
            update["model_errors"] = [reason.to_error(models.name(ctx), EXTRACT, OFFLINE_FALLBACK)]
            found = _offline(state, docs, ctx)
            update["passages"], update["weak_evidence"] = found.passages, found.weak
            return update
        # Which request shape each call used and how its reply was read (docs/llm.md).
        update["extraction_notes"] = [
            (f"batch {b.batch} of {b.of}: " if b.of > 1 else "") + ("failed: " if b.failed else "") + b.note
            for b in batches
        ]
        groups = [b.passages for b in batches if not b.failed]
        failed = [b for b in batches if b.failed]
        if failed:
            # Every batch failed: exactly the offline engine's passages. Some failed: the offline
            # extractor reads just the text those calls could not.
            offline_docs = docs if len(failed) == len(batches) else [d for b in failed for d in b.documents]
            groups.append(_offline(state, offline_docs, ctx).passages)
        update["passages"] = merge_passages(groups)
    return update
