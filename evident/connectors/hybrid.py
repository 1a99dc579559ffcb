"""One search's candidates ranked by words and meaning together: the embedded index's and PostgreSQL's.

Each candidate comes with its lexical score (BM25, or PostgreSQL's weighted rank; 0 when the words did
not find it) and the cosines of its windows to the query, or None when it has no vectors yet (an index
still being embedded: it is ranked by its words, `fuse`). They are fused as everywhere
(`evident.embeddings.meaning.fuse` of the lexical score and the best window's cosine), ties by url; then
the page whose title the question names best among the first TITLE_FIRST_DEPTH goes first, as in a
search by words (`ranking.title_first`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from evident.alignment.models import SourceDocument
from evident.connectors.index.ranking import TITLE_FIRST_BOOST, TITLE_FIRST_DEPTH, title_first
from evident.embeddings.meaning import SEMANTIC_SCORE, SEMANTIC_WINDOWS, Window, fuse, windows_metadata


@dataclass(frozen=True)
class Candidate:
    doc: SourceDocument
    lexical: float
    windows: Sequence[Window] | None  # (start, end, cosine) of each window of `doc`, in text order; None: not embedded


def hybrid_ranking(
    candidates: Sequence[Candidate], terms: Sequence[str], weight: float, k: int,
    title_first_boost: float = TITLE_FIRST_BOOST,
) -> list[tuple[SourceDocument, float]]:
    """The `k` best candidates, each with its lexical score, carrying SEMANTIC_SCORE and SEMANTIC_WINDOWS
    when it has vectors (the first: `ranking.title_first` with `title_first_boost`)."""
    best = [None if cand.windows is None else max((c for _, _, c in cand.windows), default=0.0)
            for cand in candidates]  # fmt: skip
    fused = fuse([cand.lexical for cand in candidates], best, weight)
    order = sorted(range(len(candidates)), key=lambda n: (-round(fused[n], 9), candidates[n].doc.url))
    hits = []
    for n in order:
        cand, score = candidates[n], best[n]
        doc = cand.doc
        if cand.windows is not None and score is not None:
            # Without vectors a document carries no cosine at all: a 0 would tell the extractor "unrelated".
            doc = doc.model_copy(update={"metadata": {
                **doc.metadata, SEMANTIC_SCORE: round(score, 4),
                SEMANTIC_WINDOWS: windows_metadata([(s, e) for s, e, _ in cand.windows],
                                                   [c for _, _, c in cand.windows])}})  # fmt: skip
        hits.append((doc, cand.lexical, fused[n]))
    first = (title_first(terms, [(doc.title, score) for doc, _, score in hits[:TITLE_FIRST_DEPTH]], title_first_boost)
             if terms else 0)
    if first:
        hits = [hits[first], *hits[:first], *hits[first + 1 :]]
    return [(doc, lexical) for doc, lexical, _ in hits[:k]]
