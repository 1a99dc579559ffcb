"""postprocess (paper §3.5): final formatting, glossary, and the resolved `citations` list.

The checked draft's lines become the answer's text here, once (`render_answer`)."""

from __future__ import annotations

from langgraph.runtime import Runtime

from evident.citations.answer import (
    apply_glossary,
    hedged,
    render_answer,
    resolve_citation,
    sentences_in,
)
from evident.citations.support import GeneratedSentenceSupport
from evident.connectors.chunks import cited_in_document, document_of
from evident.connectors.revisions import pinned
from evident.context import EvidentContext
from evident.conversation.messages import conclude
from evident.models import INSUFFICIENT_ANSWER, AlignmentDecision, Evidence, SourceDocument, Status
from evident.nodes.common import draft_of, timed
from evident.nodes.names import POSTPROCESS
from evident.request_settings import run_settings
from evident.state import EvidentState, PostprocessUpdate, read


def postprocess(state: EvidentState, runtime: Runtime[EvidentContext]) -> PostprocessUpdate:
    ctx = run_settings(runtime)
    update: PostprocessUpdate = {}
    with timed(POSTPROCESS, update):
        if state.get("status") == "error":
            update.update({"answer": "", "citations": [], "evidence": "none"})
            update["messages"] = conclude(state, update, ctx)
            return update
        verified = read(AlignmentDecision, state.get("verified"))
        docs = read(SourceDocument, state.get("documents"))
        lines = draft_of(state)
        cited = [u for u in sentences_in(lines) if u.urls]
        evidence: Evidence = "none"
        if not cited:
            # Nothing verifiable survived (or there was nothing to say): never show uncited text.
            answer, citations = INSUFFICIENT_ANSWER, []
        else:
            # Read from the checked answer itself, whoever wrote it (the offline composer, a model, or the
            # composer in a model's stead): the fixed lead-in is what tells a reader the passages only come closest.
            evidence = "weak" if hedged(lines) else "clear"
            pairs = [(u, url) for u in cited for url in dict.fromkeys(u.urls)]
            measure = GeneratedSentenceSupport(ctx.sentence_threshold) if state.get("generated_by") == "model" else None
            citations = [
                resolve_citation(u.text, url, verified, docs,
                                 n=ctx.ngram_n, threshold=ctx.threshold, measure=measure)
                for u, url in pairs
            ]
            # A chunk is cited as its document (its url, and document offsets where its start is known).
            documents = {d.url: d for d in docs}
            citations = [pinned(cited_in_document(c, documents.get(url)), documents.get(url))
                         for (_, url), c in zip(pairs, citations, strict=True)]
            for u in cited:
                u.urls = list(dict.fromkeys(document_of(documents[url]) if url in documents else url for url in u.urls))
            # Spans were located with the source's wording; the glossary only restyles the answer.
            apply_glossary(lines, ctx.glossary)
            for (u, _), citation in zip(pairs, citations, strict=True):
                citation.sentence = u.text
            answer = render_answer(lines)
        degraded = bool(state.get("source_errors") or state.get("model_errors"))
        status: Status
        if answer == INSUFFICIENT_ANSWER:
            status, evidence = "degraded" if degraded else "insufficient", "none"
        else:
            status = "degraded" if degraded else "answered"
        update.update({"answer": answer, "citations": citations, "status": status, "evidence": evidence})
        # The conversation's next message: the verified answer with its citations (evident/conversation).
        update["messages"] = conclude(state, update, ctx)
    return update

