"""SemMax and SemRecall (paper §6.2.3) with the configured embeddings, as a bi-encoder cosine.

The paper scores pairs with a cross-encoder; EvidenT has only its embeddings seam, so s(a_i, d_j) is the
cosine of the unit vectors of answer window a_i and document window d_j (`SemanticScorer`), in [-1, 1].
Both the answer A and its cited documents D are cut into overlapping windows of 256 whitespace words,
stride 50 (the paper's 256 tokens). Per answer:

    SemMax    = max_{i,j} s(a_i, d_j)
    SemRecall = mean_i max_j s(a_i, d_j)

A is the answer's cited facts (the text before each citation, §6.2), distinct, in order. D is the text of
the retrieved documents the answer cites; when none of its citations is among the retrieved documents,
all retrieved documents (counted as a fallback). Undefined, and left out of the means: abstentions,
answers citing nothing, failed or skipped queries, and queries whose embedding call failed (counted).

Windowing and aggregation are pure functions over any `embed_texts`, so they are checked by hand with a
fake scorer; the model is loaded only by `score_run` when the run's embeddings are on.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Protocol

import numpy as np
from pydantic import BaseModel, Field

from evident.embeddings import EmbeddingsFailure, EmbeddingsUnavailable, describe, resolve_embeddings
from evident.eval.citations import is_abstention
from evident.eval.metrics import url_key
from evident.eval.stats import Estimate, mean

if TYPE_CHECKING:
    from numpy.typing import NDArray

    from evident.context import EvidentContext
    from evident.embeddings import GraphEmbeddings
    from evident.eval.records import MethodRecord
    from evident.eval.summary import Row

WINDOW_WORDS = 256
STRIDE_WORDS = 50


class TextEmbedder(Protocol):
    """What the metrics need of a `SemanticScorer`: one unit vector per text, `(len(texts), d)`."""

    def embed_texts(self, texts: Sequence[str]) -> NDArray[np.float32]: ...


def windows(text: str, size: int = WINDOW_WORDS, stride: int = STRIDE_WORDS) -> list[str]:
    """Overlapping windows of `size` whitespace words, one starting every `stride` words, the last one
    ending at the text's last word (so every word lies in some window and no window is shorter than
    `size` unless the whole text is). A text of at most `size` words is one window; a blank text has none.
    Words are rejoined with single spaces."""
    if size < 1 or stride < 1:
        raise ValueError("size and stride must be at least 1")
    tokens = text.split()
    if not tokens:
        return []
    if len(tokens) <= size:
        return [" ".join(tokens)]
    last = len(tokens) - size
    starts = list(range(0, last + 1, stride))
    if starts[-1] != last:
        starts.append(last)  # the tail a strict stride would miss
    return [" ".join(tokens[s : s + size]) for s in starts]


def aggregate(similarity: NDArray[np.float32]) -> tuple[float, float]:
    """(SemMax, SemRecall) of an (answer windows × document windows) similarity matrix: its largest
    entry, and the mean over rows of each row's largest entry. SemRecall ≤ SemMax always."""
    if similarity.ndim != 2 or 0 in similarity.shape:
        raise ValueError(f"need a non-empty 2-d matrix, got shape {similarity.shape}")
    best = similarity.max(axis=1)
    return float(best.max()), float(best.mean())


def answer_text(record: MethodRecord) -> str:
    """A of one answer: its distinct cited facts in order ("" when it abstained or cites nothing)."""
    if record.outcome != "answered" or is_abstention(record.answer):
        return ""
    return " ".join(dict.fromkeys(f.sentence for f in record.facts if f.sentence.strip()))


def cited_documents(record: MethodRecord, documents: Mapping[str, str]) -> tuple[list[str], bool]:
    """D of one answer: the texts of the retrieved documents it cites, and whether none was cited so all
    retrieved documents stand in (the fallback). Empty when it cites nothing or nothing was retrieved."""
    if not record.cited_urls:
        return [], False
    by_key = {url_key(u): t for u, t in documents.items() if t.strip()}
    cited = list(dict.fromkeys(by_key[k] for u in record.cited_urls if (k := url_key(u)) in by_key))
    if cited:
        return cited, False
    return list(dict.fromkeys(by_key.values())), bool(by_key)


class QueryScore(BaseModel):
    """One answer's scores and what they were computed over."""

    sem_max: float
    sem_recall: float
    answer_windows: int
    document_windows: int
    fallback: bool = Field(False, description="no citation was among the retrieved documents: D = all of them")


def score_answer(answer: str, documents: Sequence[str], scorer: TextEmbedder, *, size: int = WINDOW_WORDS,
                 stride: int = STRIDE_WORDS, fallback: bool = False) -> QueryScore | None:
    """SemMax and SemRecall of `answer` against `documents` (None when either has no words).

    Windows never span two documents. Each distinct window is embedded once per call (and the scorer's
    cache keeps it for the process); raises what `scorer.embed_texts` raises."""
    a = windows(answer, size, stride)
    d = list(dict.fromkeys(w for doc in documents for w in windows(doc, size, stride)))
    if not a or not d:
        return None
    # One call over the distinct windows: an answer copied from a page shares its windows' texts.
    distinct = list(dict.fromkeys([*a, *d]))
    embedded = scorer.embed_texts(distinct)
    row = {t: i for i, t in enumerate(distinct)}
    av = embedded[[row[t] for t in a]]
    dv = embedded[[row[t] for t in d]]
    sem_max, sem_recall = aggregate(av @ dv.T)
    return QueryScore(sem_max=sem_max, sem_recall=sem_recall, answer_windows=len(a), document_windows=len(d),
                      fallback=fallback)


def score_row(row: Row, scorer: TextEmbedder) -> QueryScore | None:
    """One query of one method, or None when the metric is undefined for it (see the module's docstring)."""
    answer = answer_text(row.record)
    if not answer:
        return None
    docs, fallback = cited_documents(row.record, row.documents)
    return score_answer(answer, docs, scorer, fallback=fallback)


class SemanticRun(BaseModel):
    """The semantic metrics of one evaluation: per method, one score per query (None: undefined or failed)."""

    on: bool
    status: str = Field(description='"on (model id)" or "off (reason)"')
    scores: dict[str, list[QueryScore | None]] = Field(default_factory=dict)
    failed: dict[str, int] = Field(default_factory=dict, description="queries whose embedding call failed")
    failures: list[str] = Field(default_factory=list, description="the distinct failure messages")
    seconds: float = 0.0

    def metrics(self, method: str) -> dict[str, Estimate]:
        """`sem_max` and `sem_recall` of `method`: means over its defined queries with 95% t intervals;
        empty when the metrics are off or the method was not scored."""
        if not self.on or method not in self.scores:
            return {}
        got = [s for s in self.scores[method] if s is not None]
        return {"sem_max": mean([s.sem_max for s in got]), "sem_recall": mean([s.sem_recall for s in got])}

    def note(self) -> str:
        """One line for the report: on/off, failures and fallbacks, time."""
        if not self.on:
            return f"semantic metrics: {self.status}"
        parts = [f"semantic metrics: {self.status}, {self.seconds:.1f} s"]
        for method, n in self.failed.items():
            if n:
                parts.append(f"{method}: {n} quer{'y' if n == 1 else 'ies'} not scored (embeddings failed)")
        for method, got in self.scores.items():
            fell = sum(1 for s in got if s is not None and s.fallback)
            if fell:
                parts.append(f"{method}: {fell} scored against all retrieved documents (no citation among them)")
        return "; ".join(parts)


def off(reason: str) -> SemanticRun:
    return SemanticRun(on=False, status=f"off ({reason})")


def score_run(rows: Mapping[str, Sequence[Row]], ctx: EvidentContext,
              on_query: Callable[[str], None] | None = None, *, source: GraphEmbeddings | None = None) -> SemanticRun:
    """SemMax and SemRecall of every (method, query) in `rows` with the run's embeddings (`source`, by
    default those of `ctx`'s settings, as `evident ask` resolves them). Never raises an embeddings error:
    embeddings off (or failing to load) give `on=False` and the reason; a failed call leaves that query
    unscored and counted in `failed`. `on_query` is called with the method after each query."""
    resolved = resolve_embeddings(ctx, source)
    scorer = resolved.scorer
    if scorer is None:
        return off(resolved.reason)
    run = SemanticRun(on=True, status=describe(resolved))
    start = time.perf_counter()
    for method, method_rows in rows.items():
        scores: list[QueryScore | None] = []
        run.failed[method] = 0
        for row in method_rows:
            try:
                scores.append(score_row(row, scorer))
            except EmbeddingsFailure as exc:
                scores.append(None)
                run.failed[method] += 1
                if exc.message not in run.failures:
                    run.failures.append(exc.message)
            except EmbeddingsUnavailable as exc:
                # The local model is loaded on first use: a file that fails then is "off", as at resolution.
                return off(f"words only: {exc.message}")
            if on_query is not None:
                on_query(method)
        run.scores[method] = scores
    run.seconds = time.perf_counter() - start
    return run
