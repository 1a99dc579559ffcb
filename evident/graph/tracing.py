"""What each step of a query did, in a few numbers: the metadata of every node's LangSmith run.

`summarize(node, update, ...)` turns a node's returned update (and, where it helps, the state it
read and the run's settings) into a small JSON-safe dict. The graph builder attaches it to the
node's run when a tracer is listening (evident/graph/instrument.py); `evident ask --stream` prints
`describe(...)` of the same summaries as progress lines.

Everything here reads only what the node returned or was given, which is always after the
permission filter of `retrieve`: a document the caller may not see cannot appear in a summary, nor
can their number (the stream shows summaries to the caller); `retrieve` adds that count to its own
trace run (`acl_dropped`, `denied_by_source`).
Summaries carry counts, URLs, scores and spans. A node run's inputs and outputs are `trace_record`s of
what it read and wrote: ids, counts and decisions, never the text of a document or a passage.
`stream_mode="custom"` carries `progress(...)` of the same summaries: counts and labels only.

Framework-free: no LangChain or LangGraph import, so the CLI can use it cheaply.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from evident.citations.answer import parse_answer, render_answer, sentences_in
from evident.models import Line
from evident.nodes import names as step

if TYPE_CHECKING:
    from evident.llm.batching import TokenCounter

ACTIONS = ("kept", "corrected", "truncated", "relinked", "dropped")  # evident.alignment.models.ACTIONS
Summary = dict[str, Any]


def _get(item: Any, key: str, default: Any = None) -> Any:
    """A field of a pydantic model or of its JSON form (the server and the stream hand out both)."""
    if isinstance(item, Mapping):
        return item.get(key, default)
    return getattr(item, key, default)


def _written(value: Any) -> Any:
    """A value as a node wrote it: unwrapped from LangGraph's `Overwrite` (a query's first step replaces what
    accumulates), or from its JSON form in a served stream."""
    if isinstance(value, Mapping) and value.get("type") == "__overwrite__" and "value" in value:
        return value["value"]
    return value.value if type(value).__name__ == "Overwrite" else value


def _items(update: Mapping[str, Any] | None, key: str) -> list[Any]:
    value = _written((update or {}).get(key))
    return list(value) if isinstance(value, (list, tuple)) else []


def _errors(items: Iterable[Any]) -> list[dict[str, str]]:
    return [{"source": str(_get(e, "source", "")), "kind": str(_get(e, "kind", "")),
             "message": str(_get(e, "message", ""))} for e in items]


def _latency(update: Mapping[str, Any] | None, node: str) -> float | None:
    timings = _written((update or {}).get("timings_ms")) or {}
    value = timings.get(node) if isinstance(timings, Mapping) else None
    return float(value) if isinstance(value, (int, float)) else None


def _usage(usage: Mapping[str, int] | None) -> dict[str, int] | None:
    return dict(usage) if usage else None


def _added_up(batches: list[Any]) -> dict[str, int] | None:
    """The model tokens of a query's extraction batches, added up."""
    total: Counter[str] = Counter()
    for batch in batches:
        total.update(_get(batch, "tokens", None) or {})
    return dict(total) or None


# -- one summariser per node ------------------------------------------------------------------------


def _rewrite(update: Mapping[str, Any], **_: Any) -> Summary:
    info = update.get("rewrite")
    out: Summary = {
        "asked": str(_get(info, "asked", "") or ""),
        "standalone_query": str(_get(info, "standalone_query", "") or ""),
        "rewritten_by": str(_get(info, "rewritten_by", "") or ""),
        "turns": int(_get(info, "turns", 0) or 0),
    }
    if _get(info, "problem"):
        out["problem"] = str(_get(info, "problem"))
    error = _get(info, "model_error")
    if error:
        out["model_errors"] = _errors([error])
    if update.get("status") == "error":  # bad input ends the query here, before any search
        out["error"] = str(update.get("error") or "")
    return out


def _retrieve(update: Mapping[str, Any], **_: Any) -> Summary:
    docs = _items(update, "documents")
    runs = _items(update, "source_runs")
    errors = _errors(_items(update, "source_errors"))
    out: Summary = {
        "documents": len(docs),
        "documents_by_source": dict(Counter(str(_get(d, "source", "")) for d in docs)),
        "source_errors": errors,
    }
    if runs:
        out["sources"] = [
            {"source": str(_get(r, "source", "")), "status": str(_get(r, "status", "")),
             "documents": int(_get(r, "documents", 0) or 0),
             "latency_ms": round(float(_get(r, "latency_ms", 0.0) or 0.0), 2)}
            for r in runs
        ]
    if update.get("status") == "error":
        out["error"] = str(update.get("error") or "")
    return out


def _prompt_tokens(documents: list[Any], counter: TokenCounter | None) -> int | None:
    if counter is None or not documents:
        return None
    # Lazily: the evident.prompts package pulls in LangChain, which the CLI's progress lines do not need.
    from evident.alignment.models import SourceDocument
    from evident.prompts.render import render_document

    try:  # the state holds a document as its JSON; a node's update, as a model
        return sum(counter(render_document(SourceDocument.model_validate(d))) for d in documents)
    except Exception:  # a broken injected counter must not break tracing
        return None


def _extract_batch(update: Mapping[str, Any], *, state: Mapping[str, Any] | None = None,
                   model: str | None = None, counter: TokenCounter | None = None, **_: Any) -> Summary:
    (batch,) = _items(update, "extractions")[:1] or [None]
    docs = list(_get(batch, "documents", None) or (state or {}).get("documents") or [])
    passages = list(_get(batch, "passages", None) or [])
    return {
        "batch": _get(batch, "batch"), "of": _get(batch, "of"),
        "documents": len(docs), "urls": list(dict.fromkeys(str(_get(d, "url", "")) for d in docs)),
        "passages": len(passages), "failed": bool(_get(batch, "failed", False)),
        "note": str(_get(batch, "note", "") or ""), "rung": str(_get(batch, "rung", "") or ""), "model": model,
        "prompt_tokens_estimate": _prompt_tokens(docs, counter), "tokens": _usage(_get(batch, "tokens", None)),
        "model_errors": _errors(_items(update, "model_errors")),
    }


def _extract(update: Mapping[str, Any], *, state: Mapping[str, Any] | None = None, model: str | None = None,
             counter: TokenCounter | None = None, budget: int | None = None, **_: Any) -> Summary:
    passages = _items(update, "passages")
    batches = sorted(_items(state, "extractions"), key=lambda b: _get(b, "batch", 0) or 0)
    llm = update.get("mode") == "llm"
    failed = sum(1 for b in batches if _get(b, "failed", False))
    if not llm:
        extractor = "lexical"
    elif not batches or failed == len(batches):
        extractor = "lexical (model unavailable)"
    else:
        extractor = "model" + (" + lexical for failed batches" if failed else "")
    out: Summary = {
        "mode": "llm" if llm else "offline",
        "extractor": extractor,
        "model": model if llm else None,
        "documents": len(_items(state, "documents")),
        "passages": len(passages),
        "passages_by_url": dict(Counter(str(_get(p, "url", "")) for p in passages)),
        "model_errors": _errors(_items(update, "model_errors")),
    }
    if llm:
        out.update(
            batches=len(batches), failed_batches=failed,
            batch_documents=[len(_get(b, "documents", None) or []) for b in batches],
            batch_prompt_tokens_estimate=[_prompt_tokens(list(_get(b, "documents", None) or []), counter)
                                          for b in batches],
            context_budget_tokens=budget, tokens=_added_up(batches),
            rungs=[str(_get(b, "rung", "") or "") for b in batches],
            extraction_notes=[str(n) for n in update.get("extraction_notes") or []],
        )
    return out


def _align(update: Mapping[str, Any], *, settings: Any = None, **_: Any) -> Summary:
    decisions = _items(update, "alignment")
    counts = Counter(str(_get(d, "action", "")) for d in decisions)
    out: Summary = {"passages": len(decisions), **{a: counts.get(a, 0) for a in ACTIONS},
                    "verified": len(_items(update, "verified"))}
    if settings is not None:
        out.update(ngram_n=settings.ngram_n, threshold=settings.threshold, drift=settings.drift)
    out["decisions"] = [
        {"passage_id": str(_get(d, "passage_id", "")), "action": str(_get(d, "action", "")),
         "url": str(_get(d, "url", "")), "original_url": str(_get(d, "original_url", "")),
         "overlap": round(float(_get(d, "overlap", 0.0) or 0.0), 4),
         "final_overlap": round(float(_get(d, "final_overlap", 0.0) or 0.0), 4),
         "spans": [[int(s), int(e)] for s, e in (_get(d, "spans", None) or [])],
         "substitutions": len(_get(d, "substitutions", None) or []),
         "reason": str(_get(d, "reason", "") or "")}
        for d in decisions
    ]
    return out


def _insufficient(update: Mapping[str, Any], *, state: Mapping[str, Any] | None = None, **_: Any) -> Summary:
    return {"reason": "no passage survived alignment", "passages": len(_items(state, "passages")),
            "answer": render_answer(_draft(update))}


def _draft(values: Mapping[str, Any] | None) -> list[Line]:
    """The draft answer's lines, from a state or an update (their JSON, or the models a node returned)."""
    return [Line.model_validate(line) for line in _items(values, "draft")]


def _draft_shape(lines: list[Line]) -> tuple[int, list[str]]:
    """How many sentences a draft holds, and the ids it cites, in order."""
    sentences = list(sentences_in(lines))
    return sum(1 for u in sentences if u.text), list(dict.fromkeys(url for u in sentences for url in u.urls))


def _generate(update: Mapping[str, Any], *, state: Mapping[str, Any] | None = None, model: str | None = None,
              usage: Mapping[str, int] | None = None, **_: Any) -> Summary:
    by = str(update.get("generated_by") or "")
    sentences, urls = _draft_shape(_draft(update))
    return {"generated_by": by, "model": model if by == "model" or update.get("model_errors") else None,
            "sentences": sentences, "cited_urls": urls, "tokens": _usage(usage),
            "model_errors": _errors(_items(update, "model_errors"))}


def _verify(update: Mapping[str, Any], *, state: Mapping[str, Any] | None = None,
            settings: Any = None, **_: Any) -> Summary:
    touched = [str(s) for s in _items(update, "removed_sentences")]
    flag = settings is not None and settings.unsupported == "flag"
    before = {u.text: list(dict.fromkeys(u.urls)) for u in sentences_in(_draft(state))}
    after = [u for u in sentences_in(_draft(update)) if u.text]
    repaired = sum(1 for u in after if u.text in before and before[u.text] != list(dict.fromkeys(u.urls)))
    return {
        "sentences_kept": len(after) - (len(touched) if flag else 0),
        "sentences_removed": 0 if flag else len(touched),
        "sentences_flagged": len(touched) if flag else 0,
        "removed_or_flagged": touched,
        "citations_repaired": repaired,
        "unsupported": settings.unsupported if settings is not None else None,
        "answered_by": str(update.get("generated_by") or (state or {}).get("generated_by") or ""),
        "model_errors": _errors(_items(update, "model_errors")),
    }


def _postprocess(update: Mapping[str, Any], *, state: Mapping[str, Any] | None = None, **_: Any) -> Summary:
    citations = _items(update, "citations")
    sentences = sum(1 for u in sentences_in(parse_answer(str(update.get("answer") or ""))) if u.text)
    # After a retrieval error the status was set by `retrieve`; postprocess only clears the answer.
    status = str(update.get("status") or (state or {}).get("status") or "")
    error = update.get("error") or (state or {}).get("error")
    out: Summary = {
        "status": status,
        "evidence": str(update.get("evidence") or (state or {}).get("evidence") or ""),
        "sentences": sentences,
        "citations": len(citations),
        "cited_urls": list(dict.fromkeys(str(_get(c, "url", "")) for c in citations)),
        "spans": sum(len(_get(c, "spans", None) or []) for c in citations),
    }
    if status == "error" or error:
        out["error"] = str(error or "")
    return out


_SUMMARISERS: dict[str, Callable[..., Summary]] = {
    step.REWRITE: _rewrite, step.RETRIEVE: _retrieve, step.EXTRACT_BATCH: _extract_batch, step.EXTRACT: _extract,
    step.ALIGN: _align, step.INSUFFICIENT: _insufficient, step.GENERATE: _generate, step.VERIFY: _verify,
    step.POSTPROCESS: _postprocess,
}


def summarize(
    node: str,
    update: Mapping[str, Any] | None,
    *,
    state: Mapping[str, Any] | None = None,
    settings: Any = None,
    model: str | None = None,
    usage: Mapping[str, int] | None = None,
    counter: TokenCounter | None = None,
    budget: int | None = None,
) -> Summary:
    """The summary of one node's step. `update` is what the node returned; `state` what it read
    (optional: a stream of updates does not carry it); `settings` the run's `EvidentContext`;
    `usage` the model tokens its calls reported; `counter` counts prompt tokens for estimates."""
    update = update if isinstance(update, Mapping) else {}
    summariser = _SUMMARISERS.get(node)
    out: Summary = summariser(update, state=state, settings=settings, model=model, usage=usage,
                              counter=counter, budget=budget) if summariser else {}
    latency = _latency(update, step.batch_timing(out.get("batch")) if node == step.EXTRACT_BATCH else node)
    if latency is not None:
        out["latency_ms"] = latency
    return out


# -- what a node's run records, and what `stream_mode="custom"` shows ------------------------------------

# Fields that hold the text of a document or a passage (SourceDocument, Passage, AlignmentDecision, Citation,
# an answer's sentences and what earlier answers said): never recorded. `metadata` is a document's own (its ACL
# included); `caller` is who asks, with their groups.
_TEXT_FIELDS = frozenset({"content", "quote", "text", "page_content", "metadata", "said", "caller"})
# Labels a progress event may carry besides its numbers: names of what happened, never text.
_LABELS = frozenset({"status", "evidence", "mode", "extractor", "generated_by", "rewritten_by", "answered_by",
                     "unsupported"})


def _message_record(message: Any) -> dict[str, Any]:
    content = _get(message, "content", "")
    return {"type": str(_get(message, "type", "") or ""), "id": _get(message, "id"),
            "chars": len(content) if isinstance(content, str) else len(str(content))}


def trace_record(value: Any) -> Any:
    """What a node's trace run records of a state, an update or a task's input: every field as it is but the
    text of documents and passages (dropped), alignment substitutions (counted) and messages (their type, id
    and length)."""
    value = _written(value)
    if hasattr(value, "model_dump"):  # a pydantic model a node wrote (the state itself holds JSON)
        value = value.model_dump(mode="json")
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for key, item in value.items():
            if key in _TEXT_FIELDS:
                continue
            if key == "substitutions" and isinstance(item, (list, tuple)):
                out[key] = len(item)
            elif key == "messages" and isinstance(item, (list, tuple)):
                out[key] = [_message_record(m) for m in item]
            else:
                out[key] = trace_record(item)
        return out
    if isinstance(value, (list, tuple)):
        return [trace_record(v) for v in value]
    return value


def progress(node: str, summary: Mapping[str, Any]) -> dict[str, Any]:
    """The `stream_mode="custom"` event of a finished step: `{"node", "event": "end"}` and the summary's
    numbers and labels (no text, no URL: a progress display needs neither)."""
    out: dict[str, Any] = {"node": node, "event": "end"}
    for key, value in summary.items():
        if isinstance(value, (bool, int, float)) or (key in _LABELS and isinstance(value, str)):
            out.setdefault(key, value)
    return out


# -- one line per step, for `evident ask --stream` ----------------------------------------------------


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def describe(node: str, summary: Mapping[str, Any]) -> str:
    """A human line for a progress display: what the step did, from its summary."""
    s = summary
    if node == step.REWRITE:
        if s.get("error"):
            return f"{node}: error: {s['error']}"
        line = f"{node}: {s.get('standalone_query', '')} ({s.get('rewritten_by') or 'none'})"
    elif node == step.RETRIEVE:
        if s.get("error"):
            return f"{node}: error: {s['error']}"
        sources = s.get("sources") or [{"source": k} for k in s.get("documents_by_source", {})]
        line = f"{node}: {_plural(int(s.get('documents', 0)), 'document')} from {_plural(len(sources), 'source')}"
        if s.get("source_errors"):
            line += ", failed: " + ", ".join(e["source"] for e in s["source_errors"])
    elif node == step.EXTRACT_BATCH:
        # A batch reads as part of the `extract` step it belongs to.
        passages = _plural(int(s.get("passages", 0)), "passage")
        line = f"{step.EXTRACT}: batch {s.get('batch')} of {s.get('of')}: {passages}"
        if s.get("failed"):
            line += " (model failed; extracted offline)"
    elif node == step.EXTRACT:
        line = f"{node}: {_plural(int(s.get('passages', 0)), 'passage')} ({s.get('extractor', '')})"
    elif node == step.ALIGN:
        line = f"{node}: " + ", ".join(f"{s.get(a, 0)} {a}" for a in ACTIONS)
    elif node == step.INSUFFICIENT:
        line = f"{node}: no passage survived alignment"
    elif node == step.GENERATE:
        line = f"{node}: {_plural(int(s.get('sentences', 0)), 'sentence')} ({s.get('generated_by', '')})"
    elif node == step.VERIFY:
        line = (f"{node}: {_plural(int(s.get('sentences_kept', 0)), 'sentence')} kept, "
                f"{s.get('sentences_removed', 0)} removed, {s.get('sentences_flagged', 0)} flagged")
        if s.get("citations_repaired"):
            line += f", {_plural(int(s['citations_repaired']), 'citation')} repaired"
    elif node == step.POSTPROCESS:
        line = f"{node}: {s.get('status') or 'done'}, {_plural(int(s.get('citations', 0)), 'citation')}"
        if s.get("evidence") == "weak":
            line += ", weak evidence"
    else:
        line = node
    if isinstance(s.get("latency_ms"), (int, float)):
        line += f" [{s['latency_ms']:.0f} ms]"
    return line
