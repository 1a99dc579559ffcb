"""Alignment and filtering: keep, truncate, relink or drop each extracted passage (paper §3.3).

Only the text of documents that were actually retrieved is consulted; a URL a model wrote is a
lookup key into that set, never something to fetch.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any, Literal, NamedTuple

from evident.alignment.cache import DEFAULT_CACHE, IndexCache
from evident.alignment.models import AlignmentDecision, Passage, SourceDocument, Substitution
from evident.alignment.overlap import PassageUnits, passage_units
from evident.alignment.quote import Quote, build_quote, edge_punctuation, extend_span
from evident.alignment.spans import occurrences
from evident.alignment.tokenize import DocumentIndex

DriftMode = Literal["extended", "paper"]
QUOTE_JOINER = " … "


def _as_passage(p: Passage | Mapping[str, Any]) -> Passage:
    return p if isinstance(p, Passage) else Passage.model_validate(p)


class _Doc(NamedTuple):
    url: str
    content: str
    content_hash: str


def _as_document(d: SourceDocument | Mapping[str, Any]) -> _Doc:
    """URL, text and (if known) content hash: all alignment reads of a document.

    A plain mapping is not turned into a `SourceDocument`: that would hash its whole text on
    every call, while the index cache can key it by Python's cached string hash instead.
    """
    if isinstance(d, SourceDocument):
        return _Doc(d.url, d.content, d.content_hash)
    url, content = d.get("url"), d.get("content", d.get("text"))
    if not isinstance(url, str) or not isinstance(content, str):
        return _as_document(SourceDocument.model_validate(d))  # raises the usual validation error
    return _Doc(url, content, str(d.get("content_hash") or ""))


def _url_key(url: str) -> str:
    """Loose form of a URL for matching a model's citation to a retrieved document."""
    url = url.strip().split("#", 1)[0]
    return url.rstrip("/").lower()


def quote_of(text: str, spans: list[tuple[int, int]]) -> str:
    """The exact source text of `spans`, non-adjacent spans joined by " … "."""
    out: list[str] = []
    prev_end: int | None = None
    for start, end in spans:
        if out and start != prev_end:
            out.append(QUOTE_JOINER)
        out.append(text[start:end])
        prev_end = end
    return "".join(out)


class _Counts:
    """Counts of the pending passages' units in each document, via one Aho–Corasick automaton.

    The automaton holds every n-gram (and short segment) of every passage still undecided, so each
    document's token string is scanned once in compiled code, whatever the number of passages.
    Overlapping matches are reported, so a unit repeated in a document is counted every time.
    """

    def __init__(self, units: Iterable[str], index: Any,
                 passages: Mapping[int, PassageUnits] | None = None) -> None:
        import ahocorasick_rs

        self._patterns = sorted(set(units))
        self._automaton = ahocorasick_rs.AhoCorasick(self._patterns)
        self._index = index
        self._cache: dict[int, dict[str, int]] = {}
        # unit -> [(passage key, multiplicity in that passage)]: overlaps of every passage with a
        # document in one pass over the units found there, not one loop per passage per document.
        self._owners: dict[str, list[tuple[int, int]]] = {}
        self._totals: dict[int, int] = {}
        for k, pu in (passages or {}).items():
            self._totals[k] = pu.total
            for u, c in pu.units.items():
                self._owners.setdefault(u, []).append((k, c))
        self._overlaps: dict[int, dict[int, float]] = {}

    def __call__(self, doc: int) -> dict[str, int]:
        found = self._cache.get(doc)
        if found is None:
            matches = self._automaton.find_matches_as_indexes(self._index(doc).tstring, overlapping=True)
            found = Counter(self._patterns[i] for i, _, _ in matches)
            self._cache[doc] = found
        return found

    def overlaps(self, doc: int) -> dict[int, float]:
        """overlap_n of each passage (given at construction) with `doc`; absent means 0."""
        found = self._overlaps.get(doc)
        if found is None:
            hits: dict[int, int] = {}
            for unit, count in self(doc).items():
                for k, mult in self._owners.get(unit, ()):
                    hits[k] = hits.get(k, 0) + min(count, mult)
            found = self._overlaps[doc] = {k: h / self._totals[k] for k, h in hits.items()}
        return found


def supported_spans(
    content: str, units: PassageUnits, doc: DocumentIndex, counts: Mapping[str, int], bridge: int
) -> list[tuple[int, int]]:
    """Character spans of `doc.text` holding the passage's quote, in source order."""
    return build_quote(content, units, doc, dict(counts), bridge).spans


def align(
    passages: Iterable[Passage | Mapping[str, Any]],
    documents: Iterable[SourceDocument | Mapping[str, Any]],
    *,
    n: int = 5,
    threshold: float = 0.7,
    drift: DriftMode = "extended",
    bridge: int = 2,
    cache: IndexCache | None = None,
) -> list[AlignmentDecision]:
    """One decision per passage, in input order (see DESIGN §3 for the four cases).

    `drift="paper"` searches other documents only when the cited one has overlap 0, as in the
    paper; the default also relinks a passage that exists (above the threshold) in another
    retrieved document while sharing only a fragment with the cited one.
    `bridge` is the longest substitution (in tokens) filled with source text inside a truncated
    passage; 0 keeps strictly the matched runs.
    """
    if n < 1:
        raise ValueError(f"n must be at least 1 (got {n})")
    if not 0.0 <= threshold <= 1.0:
        raise ValueError(f"threshold must be within [0, 1] (got {threshold})")
    if drift not in ("extended", "paper"):
        raise ValueError(f"drift must be 'extended' or 'paper' (got {drift!r})")
    cache = cache if cache is not None else DEFAULT_CACHE  # an empty IndexCache is falsy
    ps = [_as_passage(p) for p in passages]
    docs = [_as_document(d) for d in documents]

    by_url: dict[str, int] = {}
    by_key: dict[str, int] = {}
    for i, d in enumerate(docs):
        by_url.setdefault(d.url, i)
        by_key.setdefault(_url_key(d.url), i)
    indexes: dict[int, DocumentIndex] = {}

    def index(i: int) -> DocumentIndex:
        found = indexes.get(i)
        if found is None:
            found = indexes[i] = cache.get(docs[i].content, docs[i].content_hash or None)
        return found

    def cited(url: str) -> int | None:
        found = by_url.get(url)
        return found if found is not None else by_key.get(_url_key(url))

    def decision(p: Passage, action: str, doc: int | None, overlap: float, final: float,
                 quote: Quote | None, reason: str) -> AlignmentDecision:
        spans = quote.spans if quote is not None and doc is not None else []
        return AlignmentDecision(
            passage_id=p.passage_id, action=action, url=docs[doc].url if doc is not None else "",  # type: ignore[arg-type]
            original_url=p.url, overlap=round(overlap, 6), final_overlap=round(final, 6), spans=spans,
            quote=quote_of(docs[doc].content, spans) if doc is not None else "",
            substitutions=quote.substitutions if quote is not None and doc is not None else [],
            reason=reason, content=p.content,
        )

    units = [passage_units(p.content, n) for p in ps]
    results: list[AlignmentDecision | None] = [None] * len(ps)
    pending: list[int] = []
    for k, (p, u) in enumerate(zip(ps, units)):
        if not u.total:
            results[k] = decision(p, "dropped", None, 0.0, 0.0, None, "the passage has no words")
            continue
        c = cited(p.url)
        if c is not None and len(u.segments) == 1 and threshold < 1.0:
            # Fast path: the passage's token sequence occurs as is (modulo case, spacing,
            # punctuation), so every n-gram matches and overlap is 1 (> threshold unless the
            # threshold is 1, where the rule says "truncated" and the general path decides).
            doc = index(c)
            occ = occurrences(doc, u.segments[0].tstring, limit=1)
            if occ:
                seg = u.segments[0]
                lead, trail = edge_punctuation(p.content, u)[0]
                span = extend_span(doc.text, doc.span(occ[0], occ[0] + len(seg.tokens)), lead, trail)
                results[k] = decision(p, "kept", c, 1.0, 1.0, Quote([span], [], True),
                                      "verbatim in the cited document")
                continue
        pending.append(k)

    if pending:
        counts = _Counts((x for k in pending for x in units[k].units), index,
                         {k: units[k] for k in pending})
        cited_of = {k: cited(ps[k].url) for k in pending}
        cited_ov = {k: (counts.overlaps(c).get(k, 0.0) if c is not None else 0.0) for k, c in cited_of.items()}
        # Drift search, document by document: each document's overlaps come in one pass over the
        # units found in it, so the cost follows the matches, not passages x documents.
        searching = {k for k, ov in cited_ov.items()
                     if ov <= threshold and (drift == "extended" or ov == 0.0)}
        best: dict[int, tuple[float, int]] = {}
        if searching:
            for i in range(len(docs)):
                if i != by_url.get(docs[i].url):  # a later document with the same URL is never used
                    continue
                for k, ov in counts.overlaps(i).items():
                    if k in searching and i != cited_of[k] and ov > threshold and ov > best.get(k, (0.0, 0))[0]:
                        best[k] = (ov, i)
        for k in pending:
            p, u, c, ov_c = ps[k], units[k], cited_of[k], cited_ov[k]
            where = "the cited document" if c is not None else "the cited URL (not retrieved)"
            if k in best:
                ov, i = best[k]
                q = build_quote(p.content, u, index(i), counts(i), bridge)
                results[k] = decision(
                    p, "relinked", i, ov_c, ov, q,
                    f"citation drift: overlap {ov_c:.2f} with {where}, {ov:.2f} with {docs[i].url}"
                    + _describe(q),
                )
            elif c is not None and ov_c > 0.0:
                q = build_quote(p.content, u, index(c), counts(c), bridge)
                results[k] = decision(p, _classify(q, ov_c, threshold), c, ov_c, ov_c, q, "")
            else:
                results[k] = decision(p, "dropped", None, 0.0, 0.0, None,
                                      f"no retrieved document supports the passage (overlap 0 with {where})")

    out: list[AlignmentDecision] = []
    for r in results:
        assert r is not None
        if r.action != "dropped" and not r.spans:
            r = r.model_copy(update={"action": "dropped", "url": "", "quote": "", "substitutions": [],
                                     "reason": "no span of the source could be located"})
        elif not r.reason:
            r = r.model_copy(update={"reason": _REASONS[r.action].format(ov=r.overlap, t=threshold)
                                     + _describe_subs(r.substitutions)})
        out.append(r)
    return out


_REASONS = {
    "kept": "overlap {ov:.2f} > {t} with the cited document, and every word of the passage is in the quote",
    "corrected": "the cited document says this with different words at some places; the quote is the source's text",
    "truncated": "overlap {ov:.2f}: only the part of the passage the cited document supports is quoted",
}


def _describe_subs(subs: list[Substitution]) -> str:
    if not subs:
        return ""
    return " (" + "; ".join(f"{s.passage or '—'!r} → {s.source or '—'!r}" for s in subs) + ")"


def _describe(q: Quote) -> str:
    if not q.spans:
        return ""
    return ("" if q.complete else "; only part of the passage is quoted") + _describe_subs(q.substitutions)


def _classify(q: Quote, overlap: float, threshold: float) -> str:
    """kept, corrected or truncated, for a quote taken from the cited document (docs/alignment.md)."""
    if q.complete and q.substitutions:
        return "corrected"
    if q.complete and overlap > threshold:
        return "kept"
    return "truncated"
