"""Alignment and filtering: keep, correct, truncate, relink or drop each extracted passage (paper §3.3).

Only the text of documents that were actually retrieved is consulted; a URL a model wrote is a
lookup key into that set, never something to fetch.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any, Literal, NamedTuple

from evident.alignment import drops
from evident.alignment.lexicon import content_tokens
from evident.alignment.models import Action, AlignmentDecision, Passage, SourceDocument, Substitution
from evident.alignment.overlap import passage_units
from evident.alignment.quote import Quote, build_quote, edge_punctuation, extend_span
from evident.alignment.spans import occurrences
from evident.alignment.tokenize import DEFAULT_CACHE, DocumentIndex, IndexCache

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
    """One decision per passage, in input order: kept, corrected, truncated, relinked or dropped.

    The exact meaning of each action is in docs/alignment.md. Every surviving decision's `quote`
    is the source text at its `spans`, joined only where it reads as one statement in the source.
    `drift="paper"` searches other documents only when the cited one has overlap 0, as in the
    paper; the default also relinks a passage that exists (above the threshold) in another
    retrieved document while sharing only a fragment with the cited one.
    `bridge` is the longest substitution (in tokens, on each side) replaced by the source's text
    and recorded as a correction; 0 keeps strictly the matched runs and corrects nothing.
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

    def decision(p: Passage, action: Action, doc: int | None, overlap: float, final: float,
                 quote: Quote | None, reason: str) -> AlignmentDecision:
        spans = quote.spans if quote is not None and doc is not None else []
        return AlignmentDecision(
            passage_id=p.passage_id, action=action,
            url=docs[doc].url if doc is not None else "", original_url=p.url,
            overlap=round(overlap, 6), final_overlap=round(final, 6), spans=spans,
            quote=quote_of(docs[doc].content, spans) if doc is not None else "",
            substitutions=quote.substitutions if quote is not None and doc is not None else [],
            reason=reason, content=p.content,
        )

    units = [passage_units(p.content, n) for p in ps]
    results: list[AlignmentDecision | None] = [None] * len(ps)
    pending: list[int] = []
    for k, (p, u) in enumerate(zip(ps, units, strict=True)):
        if not u.total:
            results[k] = decision(p, "dropped", None, 0.0, 0.0, None, drops.NO_WORDS)
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
        # start-up time: numpy (~50 ms, also behind the counts) loads at the first vectorised step, as in
        # tokenize, so `import evident.alignment` stays cheap
        import numpy as np

        from evident.alignment.counts import UnitCounts

        counts = UnitCounts({k: units[k] for k in pending}, index)
        cited_doc = np.array([-1 if (c := cited(ps[k].url)) is None else c for k in pending], dtype=np.int64)
        cited_ov = np.zeros(len(pending))
        for c in np.unique(cited_doc[cited_doc >= 0]).tolist():
            mine = cited_doc == c
            cited_ov[mine] = counts.overlaps(c)[mine]
        unique = [i for i in range(len(docs)) if i == by_url.get(docs[i].url)]  # a later duplicate is never used
        table: list[Any] = []

        def overlaps_with_all(r: int) -> Any:
            """overlap_n of pending passage `r` with every document of `unique` (all scanned once)."""
            if not table:
                table.append(np.vstack([counts.overlaps(i) for i in unique]) if unique
                             else np.zeros((0, len(pending))))
            return table[0][:, r]

        def verbatim_in(r: int, among: list[int]) -> int | None:
            segs = units[pending[r]].segments
            if len(segs) != 1:
                return None
            return next((i for i in among if segs[0].tstring in index(i).tstring), None)

        quotes: dict[tuple[int, int], Quote] = {}

        def quote_in(r: int, d: int) -> Quote:
            found = quotes.get((r, d))
            if found is None:
                k = pending[r]
                found = quotes[r, d] = build_quote(ps[k].content, units[k], index(d), counts.of_passage(d, k),
                                                   bridge)
            return found

        for r, k in enumerate(pending):
            p, c, ov_c = ps[k], int(cited_doc[r]), float(cited_ov[r])
            where = "the cited document" if c >= 0 else "the cited URL (not retrieved)"
            q_c = quote_in(r, c) if c >= 0 and ov_c > 0.0 else None
            other: int | None = None
            if ov_c <= threshold and (drift == "extended" or ov_c == 0.0):
                # Citation drift: the document with the highest overlap above t; among equals, one
                # that has the passage verbatim, then the earlier.
                col = overlaps_with_all(r)
                above = [j for j in np.flatnonzero(col > threshold).tolist() if unique[j] != c]
                if above:
                    top = max(col[j] for j in above)
                    tied = [unique[j] for j in above if col[j] == top]
                    other = verbatim_in(r, tied) or tied[0]
            elif drift == "extended" and q_c is not None and _rank(q_c) < 2:
                # Above t with the cited document, yet not in it as written: verbatim elsewhere?
                col = overlaps_with_all(r)
                other = verbatim_in(r, [unique[j] for j in np.flatnonzero(col >= 1.0).tolist() if unique[j] != c])
            if other is not None:
                q_o = quote_in(r, other)
                # The cited document keeps a passage it quotes whole at least as faithfully.
                if q_c is None or not (_rank(q_c) > _rank(q_o) or _rank(q_c) == _rank(q_o) >= 1
                                       and len(q_c.substitutions) <= len(q_o.substitutions)):
                    ov_o = float(overlaps_with_all(r)[unique.index(other)])
                    results[k] = decision(
                        p, "relinked", other, ov_c, ov_o, q_o,
                        f"citation drift: overlap {ov_c:.2f} with {where}, {ov_o:.2f} with {docs[other].url}"
                        + _describe(q_o),
                    )
                    continue
            if q_c is not None:
                results[k] = decision(p, _classify(q_c, ov_c, threshold), c, ov_c, ov_c, q_c, "")
            else:
                results[k] = decision(p, "dropped", None, 0.0, 0.0, None, drops.UNSUPPORTED.format(where=where))

    out: list[AlignmentDecision] = []
    for made in results:
        assert made is not None
        if made.action != "dropped" and not made.spans:
            made = made.as_dropped(drops.NO_SPAN)
        elif not made.reason:
            subs = made.substitutions
            made = made.model_copy(update={"reason": _REASONS[made.action].format(
                ov=made.overlap, t=threshold, k=len(subs), s="" if len(subs) == 1 else "s",
            ) + _describe_subs(subs)})
        out.append(made)
    return out


_REASONS = {
    "kept": "overlap {ov:.2f} > {t} with the cited document, and every word of the passage is in the quote",
    "corrected": "the cited document says this except at {k} place{s}, where the quote shows the source's words",
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


def _rank(q: Quote) -> int:
    """2: the passage exactly; 1: the passage with substitutions; 0: part of the passage."""
    return (2 if not q.substitutions else 1) if q.complete else 0


def _classify(q: Quote, overlap: float, threshold: float) -> Action:
    """kept, corrected or truncated, for a quote taken from the cited document (docs/alignment.md)."""
    if q.complete and q.substitutions:
        return "corrected"
    if q.complete and overlap > threshold:
        return "kept"
    return "truncated"


# Is a verified quote evidence at all? Alignment proves a passage is the document's own text, not
# that it says anything: a bare heading ("Overview", "# Travel policy") or a two-word fragment
# matches its source perfectly yet supports no claim, and a weak model that cites one still triggers a
# generation call. Such a passage is dropped with its reason.

# A line that only titles what follows: Markdown ATX / setext headings, a bold-only line.
_HEADING_LINE = re.compile(r"^\s*(#{1,6}\s.*|[=\-]{3,}|\*\*[^*]+\*\*:?|__[^_]+__:?)\s*$")


def is_heading_only(text: str) -> bool:
    lines = [ln for ln in text.splitlines() if ln.strip()]
    return bool(lines) and all(_HEADING_LINE.match(ln) for ln in lines)


def evidence_problem(text: str, min_tokens: int) -> str | None:
    """Why `text` cannot count as evidence, or None when it can."""
    if is_heading_only(text):
        return drops.HEADING_ONLY
    found = len(content_tokens(text))
    if found < min_tokens:
        return drops.TOO_FEW_WORDS.format(found=found, needed=min_tokens)
    return None


def drop_non_evidence(decision: AlignmentDecision, min_tokens: int) -> AlignmentDecision:
    """`decision` unchanged, or dropped with the reason its quote is not evidence."""
    if decision.action == "dropped":
        return decision
    # The quote may have lost the heading's markup ("# "), which the passage as extracted still has.
    heading = is_heading_only(decision.content)
    problem = drops.HEADING_ONLY if heading else evidence_problem(
        decision.quote or decision.content, min_tokens)
    if problem is None:
        return decision
    return decision.as_dropped(problem)
