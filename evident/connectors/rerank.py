"""Re-ranking a source's results by meaning, for sources that rank by words alone (paper §3.1).

MediaWiki's search, a documentation site's index, Confluence's CQL or any LangChain retriever returns
its own best first; EvidenT cannot see its scores on a common scale, so a result's lexical part is its
rank (1 for the first, falling linearly), and its semantic part the best cosine of its windows
(`evident.embeddings.windows`) to the query. Both join as in the embedded index
(`evident.embeddings.meaning.fuse`), before the federation fuses the sources and cuts to top_n.

Remote pages are embedded at query time, each text once per process (`SemanticScorer`'s cache), and
only their first MAX_WINDOWS windows: a page's opening says what it is about, and a query must not pay
for embedding a whole manual.
"""

from __future__ import annotations

from collections.abc import Sequence

from evident.embeddings.meaning import SEMANTIC_SCORE, SEMANTIC_WINDOWS, QueryMeaning, fuse, windows_metadata
from evident.embeddings.windows import document_windows
from evident.models import SourceDocument

MAX_WINDOWS = 6


def rerank_by_meaning(docs: Sequence[SourceDocument], meaning: QueryMeaning) -> list[SourceDocument]:
    """`docs` (one source's results, best first) in fused order, ties kept in the source's order, each
    carrying `SEMANTIC_SCORE` and `SEMANTIC_WINDOWS`. Raises what the embeddings raise
    (`EmbeddingsFailure`); the caller keeps the source's own order then."""
    if not docs:
        return []
    plans = []
    for doc in docs:
        spans, texts = document_windows(doc.title, doc.content)
        plans.append((spans[:MAX_WINDOWS], texts[:MAX_WINDOWS]))
    cosines = meaning.scorer.similarities(meaning.vector, [text for _, texts in plans for text in texts])
    best: list[float] = []
    windows: list[list[list[float]]] = []
    at = 0
    for spans, texts in plans:
        mine = [float(c) for c in cosines[at : at + len(texts)]]
        at += len(texts)
        best.append(max(mine, default=0.0))
        # A page with no text has one window of its title at (0, 0): nothing in it to score by meaning.
        windows.append(windows_metadata(spans, mine) if spans != [(0, 0)] else [])
    n = len(docs)
    fused = fuse([1.0 - rank / n for rank in range(n)], best, meaning.weight)
    order = sorted(range(n), key=lambda i: (-round(fused[i], 9), i))
    return [docs[i].model_copy(update={"metadata": {**docs[i].metadata, SEMANTIC_SCORE: round(best[i], 4),
                                                    SEMANTIC_WINDOWS: windows[i]}})
            for i in order]  # fmt: skip
