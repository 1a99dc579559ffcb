"""A query's meaning as retrieval and extraction use it: its vector, and how it joins the words' score.

Hybrid ranking is one convex combination, the same for the embedded index and for remote sources:

    fused = (1 - w) * lexical / best lexical  +  w * max(cosine, 0) / best cosine

over one query's candidates, `w` = `semantic_weight` (SEMANTIC_WEIGHT by default; 0 ranks by words
alone). Dividing by the best of each puts BM25's unbounded scores and cosines on one scale without
knowing either's distribution; a document the words did not find has lexical score 0. A document whose
meaning is not known yet (an index still being embedded) scores by the words alone, `lexical / best
lexical`: the weights are shared among the signals it has, so it ranks among the others as the words
would rank it, neither lifted nor sunk by a cosine it does not have.

`SEMANTIC_WINDOWS` is the metadata key under which a retrieved document carries the cosines of its
windows (`evident.embeddings.windows`) to the query: [[start, end, cosine], ...], spans into its text.
The offline extractor reads them (`semantic_windows`) to score sentences by meaning too.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from evident.embeddings.failures import EmbeddingsFailure
from evident.models import SourceError

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

    from evident.alignment.models import SourceDocument
    from evident.embeddings.scorer import SemanticScorer

# Chosen on the development set's tune part (benchmarks/retrieval_quality.py --weight, docs/embeddings.md).
SEMANTIC_WEIGHT = 0.4
SEMANTIC_WINDOWS = "semantic_windows"
SEMANTIC_SCORE = "semantic_score"
# Keys only the retrieval by meaning may set: the extractor trusts them (`without_meaning`).
SEMANTIC_KEYS = (SEMANTIC_SCORE, SEMANTIC_WINDOWS)

Window = tuple[int, int, float]


@dataclass(frozen=True)
class QueryMeaning:
    """One query embedded once: what every source and the extractor of the run share."""

    scorer: SemanticScorer
    vector: NDArray[np.float32]
    weight: float = SEMANTIC_WEIGHT

    @property
    def model_id(self) -> str:
        return self.scorer.model_id


def fuse(lexical: Sequence[float], semantic: Sequence[float | None], weight: float) -> list[float]:
    """The convex combination of the module docstring, per candidate (same order as the inputs); a
    `semantic` of None (not known) leaves that candidate to its words."""
    best_lexical = max((s for s in lexical if s > 0), default=0.0)
    best_semantic = max((s for s in semantic if s is not None and s > 0), default=0.0)
    out = []
    for lex, sem in zip(lexical, semantic, strict=True):
        words = lex / best_lexical if best_lexical > 0 and lex > 0 else 0.0
        if sem is None:
            out.append(words)
            continue
        meaning = sem / best_semantic if best_semantic > 0 and sem > 0 else 0.0
        out.append((1.0 - weight) * words + weight * meaning)
    return out


def windows_metadata(spans: Sequence[tuple[int, int]], cosines: Sequence[float]) -> list[list[float]]:
    """[[start, end, cosine], ...] for a document's metadata (cosines rounded: they travel in the state)."""
    return [[int(s), int(e), round(float(c), 4)] for (s, e), c in zip(spans, cosines, strict=True)]


def semantic_windows(doc: SourceDocument) -> list[Window]:
    """The windows and cosines a retrieved document carries (`SEMANTIC_WINDOWS`), or [] when it carries
    none or malformed ones (a remote source's metadata is not trusted to hold them right)."""
    raw: Any = doc.metadata.get(SEMANTIC_WINDOWS)
    if not isinstance(raw, list):
        return []
    out: list[Window] = []
    size = len(doc.content)
    for item in raw:
        if not (isinstance(item, (list, tuple)) and len(item) == 3):
            return []
        start, end, cosine = item
        if not (isinstance(start, int) and isinstance(end, int) and isinstance(cosine, (int, float))):
            return []
        if not 0 <= start <= end <= size:
            return []
        out.append((start, end, float(cosine)))
    return out


def meaning_error(where: str, exc: Exception) -> SourceError:
    """The `SourceError` of a failed embeddings call (the query goes on by words, `degraded`): its
    source is "embeddings", its message says where the words had to do alone."""
    message = getattr(exc, "message", None) or f"{type(exc).__name__}: {exc}"
    text = f"{where} ranked by words only: {message}"
    if isinstance(exc, EmbeddingsFailure) and exc.kind == "timeout":
        return SourceError(source="embeddings", kind="timeout", message=text)
    return SourceError(source="embeddings", kind="error", message=text)


def without_meaning(metadata: dict[str, Any]) -> dict[str, Any]:
    """`metadata` without `SEMANTIC_KEYS`: what a corpus file or a source sent under those names would
    otherwise choose the passages the extractor quotes."""
    if not any(k in metadata for k in SEMANTIC_KEYS):
        return metadata
    return {k: v for k, v in metadata.items() if k not in SEMANTIC_KEYS}
