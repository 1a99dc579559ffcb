"""One EvidenT answer as an agent receives it: the evidence (`EvidenceArtifact`) read from a final graph
state, and the short text with numbered marks that the agent's model reads.

The state may hold pydantic models (a local graph) or their JSON (a `RemoteGraph`, the SDK, a
checkpoint); both read the same, through `Citation.model_validate` and its siblings.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from evident.agent.artifact import EvidenceArtifact, EvidenceCitation, EvidencePassage
from evident.citations.answer import BRACKETED, citations_in
from evident.models import AlignmentDecision, Citation, Evidence, SourceDocument, SourceError, Status

SOURCES_HEADING = "Sources:"
MAX_CONTENT_CHARS = 4000
_MAX_SOURCE_LINE = 240
_SHORTENED = "\n… (answer shortened; the tool's artifact holds all of it)"
_STATUSES: frozenset[str] = frozenset({"answered", "insufficient", "degraded", "error"})


def _items(value: Any) -> list[Any]:
    return list(value) if isinstance(value, (list, tuple)) else []


def _heading_path(*items: Any) -> list[str]:
    """The first heading path any of `items` carries (a dict key or an attribute; absent is fine)."""
    for item in items:
        value = item.get("heading_path") if isinstance(item, Mapping) else getattr(item, "heading_path", None)
        if isinstance(value, (list, tuple)) and value:
            return [str(part) for part in value]
    return []


def _status(state: Mapping[str, Any]) -> Status:
    status = state.get("status")
    if isinstance(status, str) and status in _STATUSES:
        return status  # type: ignore[return-value]  # checked against the Literal's values just above
    return "error"


def _evidence(state: Mapping[str, Any], status: Status) -> Evidence:
    if status in {"insufficient", "error"}:
        return "none"
    return "weak" if state.get("evidence") == "weak" else "clear"


def evidence_artifact(query: str, state: Mapping[str, Any]) -> EvidenceArtifact:
    """The evidence of one final graph state: every citation with its number, url, heading path, spans,
    quote and the content hash of the document text its spans index; every verified passage likewise."""
    documents = [SourceDocument.model_validate(d) for d in _items(state.get("documents"))]
    by_url = {d.url: d for d in documents}
    raw_decisions = _items(state.get("verified"))
    decisions = [AlignmentDecision.model_validate(d) for d in raw_decisions]
    raw_by_passage = {d.passage_id: raw for d, raw in zip(decisions, raw_decisions, strict=True)}
    raw_citations = _items(state.get("citations"))
    citations = [Citation.model_validate(c) for c in raw_citations]
    answer = str(state.get("answer") or "")
    numbers = source_numbers(answer, (c.url for c in citations))

    def title(url: str) -> str:
        document = by_url.get(url)
        return document.title if document is not None else ""

    def content_hash(url: str) -> str:
        document = by_url.get(url)
        return document.content_hash if document is not None else ""

    cited = [
        EvidenceCitation(
            number=numbers[c.url], sentence=c.sentence, url=c.url, title=title(c.url),
            heading_path=_heading_path(raw, *(raw_by_passage.get(p) for p in c.passage_ids)),
            passage_ids=c.passage_ids, spans=c.spans, quote=c.quote,
            content_hash=c.content_hash or content_hash(c.url), revision=c.revision,
        )
        for c, raw in zip(citations, raw_citations, strict=True)
    ]
    passages = [
        EvidencePassage(passage_id=d.passage_id, url=d.url, title=title(d.url), heading_path=_heading_path(raw),
                        spans=d.spans, quote=d.quote, content_hash=content_hash(d.url))
        for d, raw in zip(decisions, raw_decisions, strict=True)
        if d.verified
    ]
    status = _status(state)
    return EvidenceArtifact(
        query=query, status=status, evidence=_evidence(state, status), answer=answer, citations=cited,
        passages=passages,
        source_errors=[SourceError.model_validate(e) for e in _items(state.get("source_errors"))],
        error=str(state.get("error") or ""),
    )


def source_numbers(answer: str, cited_urls: Iterable[str]) -> dict[str, int]:
    """One number per cited source, 1 upwards, in the order the answer first cites each (sources a
    citation names that the answer text does not come last, in citation order)."""
    urls = list(cited_urls)
    order = [u for u in citations_in(answer, urls) if u in urls] + urls
    return {url: number for number, url in enumerate(dict.fromkeys(order), 1)}


def numbered_answer(artifact: EvidenceArtifact) -> str:
    """The answer with each `[url]` mark of a cited source replaced by its number, `[1]`, `[2]`, …"""
    numbers = {c.url: c.number for c in artifact.citations}

    def mark(match: Any) -> str:
        url = match.group(1)
        return f"[{numbers[url]}]" if url in numbers else str(match.group(0))

    return BRACKETED.sub(mark, artifact.answer)


def _source_line(citation: EvidenceCitation) -> str:
    where = " › ".join(citation.heading_path) or citation.title
    line = f"[{citation.number}] {where} — {citation.url}" if where else f"[{citation.number}] {citation.url}"
    return line if len(line) <= _MAX_SOURCE_LINE else line[: _MAX_SOURCE_LINE - 1] + "…"


def sources_list(artifact: EvidenceArtifact) -> str:
    """`Sources:` and one line per number: the heading path (or title) and the url of the source."""
    first: dict[int, EvidenceCitation] = {}
    for citation in artifact.citations:
        first.setdefault(citation.number, citation)
    if not first:
        return ""
    return "\n".join([SOURCES_HEADING, *(_source_line(first[n]) for n in sorted(first))])


def _failed_sources(artifact: EvidenceArtifact) -> str:
    if not artifact.source_errors:
        return ""
    names = ", ".join(dict.fromkeys(f"{e.source} ({e.kind})" for e in artifact.source_errors))
    return f"Note: some sources could not be searched, so the answer may be incomplete: {names}."


def _shortened(text: str, budget: int) -> str:
    """`text` within `budget` characters, cut at a line (or else a sentence) end where one is near."""
    if len(text) <= budget:
        return text
    room = max(budget - len(_SHORTENED), 0)
    cut = text[:room]
    end = max(cut.rfind("\n"), cut.rfind(". ") + 1)
    if end > room // 2:
        cut = cut[:end]
    return cut.rstrip() + _SHORTENED


def tool_content(artifact: EvidenceArtifact, max_chars: int = MAX_CONTENT_CHARS) -> str:
    """What the agent's model reads, at most `max_chars` characters: the answer with numbered marks, a
    note when sources failed, and the sources list; for a failed query, what went wrong."""
    if artifact.status == "error":
        reason = artifact.error or "the query failed"
        return _shortened(f"EvidenT could not answer this question: {reason}", max_chars)
    tail = [part for part in (_failed_sources(artifact), sources_list(artifact)) if part]
    footer = "\n\n".join(tail)
    budget = max(max_chars - len(footer) - 2, max_chars // 2)
    text = "\n\n".join([_shortened(numbered_answer(artifact), budget), *tail])
    return _shortened(text, max_chars)
