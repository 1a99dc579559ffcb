"""Re-verification of a stored answer's citations against their sources as they read now.

A citation carries the quote, its spans and the content hash (and revision) of the text they indexed when
the answer was given (evident/connectors/revisions.py). Given the cited document as the caller may read it
now (None when it is deleted or hidden from this caller), `recheck` says one of:

- `unchanged`: the text is the one quoted (same content hash), or the quote still stands at its spans;
- `moved`: the quote is still in the text verbatim, at other offsets (`spans_now`);
- `changed`: the quote is gone; `nearest` is the source's passage closest to it by the alignment module's
  n-gram measure (`overlap`, overlap_n of the quote against the new text; its substitutions when the
  quote's wording survives with a few words changed), empty when nothing of it remains;
- `gone`: the document cannot be read by this caller now, whether it was deleted or hidden (the two read the
  same, so the check reveals nothing about documents the caller may not see).

Framework-free: fetching the current text is the caller's part (evident/agent/recheck.py).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from evident.alignment import QUOTE_JOINER, SourceDocument, Substitution, align, overlap_n
from evident.models import Citation

Outcome = Literal["unchanged", "moved", "changed", "gone"]
OUTCOMES: tuple[Outcome, ...] = ("unchanged", "moved", "changed", "gone")
# The key of a document's metadata that holds its source's revision id, `kind=value` (evident/connectors/revisions.py).
REVISION = "revision"
# Not an outcome of the citation: its source could not be asked (down, misconfigured); nothing is concluded.
UNCHECKED: Literal["unchecked"] = "unchecked"


class CitationCheck(BaseModel):
    """What one citation's source says now."""

    citation: int = Field(description="the citation's position in the answer's `citations`, 0 upwards")
    url: str
    sentence: str = ""
    outcome: Outcome | Literal["unchecked"]
    quote: str = Field("", description="the quote as the answer holds it")
    spans: list[tuple[int, int]] = Field(default_factory=list, description="its spans when the answer was given")
    spans_now: list[tuple[int, int]] = Field(default_factory=list,
                                             description="unchanged/moved: where the quote stands in the text now")
    nearest: str = Field("", description="changed: the passage of the text now closest to the quote")
    nearest_spans: list[tuple[int, int]] = Field(default_factory=list)
    overlap: float = Field(0.0, description="changed: overlap_n of the quote against the text now")
    substitutions: list[Substitution] = Field(default_factory=list,
                                              description="changed: where `nearest` words the quote otherwise")
    content_hash: str = Field("", description="the hash the citation carries (of the text when answered)")
    content_hash_now: str = Field("", description="the hash of the text now ('' when gone)")
    revision: str = ""
    revision_now: str = ""
    reason: str = Field("", description="unchecked: why the source could not be asked")


def _segments(citation: Citation) -> list[str]:
    return [part for part in citation.quote.split(QUOTE_JOINER) if part] if citation.quote else []


def _found_at(text: str, segments: list[str], before: list[tuple[int, int]]) -> list[tuple[int, int]] | None:
    """Where each segment stands verbatim in `text`, in order, nearest its old offset; None if one is missing."""
    spans: list[tuple[int, int]] = []
    start_from = 0
    for i, segment in enumerate(segments):
        old = before[i][0] if i < len(before) else start_from
        places = []
        at = text.find(segment, start_from)
        while at >= 0:
            places.append(at)
            at = text.find(segment, at + 1)
        if not places:
            return None
        best = min(places, key=lambda p: abs(p - old))
        spans.append((best, best + len(segment)))
        start_from = best + len(segment)
    return spans


def recheck(index: int, citation: Citation, now: SourceDocument | None, *, n: int = 5,
            threshold: float = 0.7) -> CitationCheck:
    """The outcome of `citation` (the answer's `index`-th) given its document as readable now (`now`)."""
    check = CitationCheck(citation=index, url=citation.url, sentence=citation.sentence, outcome="gone",
                          quote=citation.quote, spans=list(citation.spans), content_hash=citation.content_hash,
                          revision=citation.revision)
    if now is None:
        return check
    check.content_hash_now, check.revision_now = now.content_hash, revision_of(now)
    if citation.content_hash and citation.content_hash == now.content_hash:
        check.outcome, check.spans_now = "unchanged", list(citation.spans)
        return check
    segments = _segments(citation)
    if not segments:  # nothing quoted to look for: the hash alone decides
        check.outcome = "changed"
        return check
    found = _found_at(now.content, segments, list(citation.spans))
    if found is not None:
        # A chunk's spans are offsets into the chunk, not the document: only "still there" can be said.
        same_place = found == list(citation.spans) or citation.span_base == "chunk"
        check.outcome = "unchanged" if same_place else "moved"
        check.spans_now = found
        return check
    check.outcome = "changed"
    check.overlap = overlap_n(" ".join(segments), now.content, n)
    decision = align([{"passage_id": str(index), "url": now.url, "content": " ".join(segments)}],
                     [now], n=n, threshold=threshold)[0]
    if decision.verified:
        check.nearest, check.nearest_spans = decision.quote, list(decision.spans)
        check.substitutions = list(decision.substitutions)
    return check


def revision_of(doc: SourceDocument) -> str:
    """The source's revision id of `doc` ('' when it states none)."""
    value = doc.metadata.get(REVISION)
    return value if isinstance(value, str) else ""
