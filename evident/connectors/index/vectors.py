"""The embedded index's vectors: each document's windows embedded once, searched by cosine.

Stored in SQLite beside the documents (`passage_vectors`, schema 4), for one model at a time: the
model's id and the windows' format are kept in `evident_meta` ('vectors_model'), and the vectors of a
different model or format are all deleted before the new ones are written. A document's vectors are
deleted with it and when its text changes (triggers), so "documents without vectors" is exactly what
an incremental embedding run must do. Every run that writes vectors bumps 'vectors_generation', which
tells a reader that its in-memory matrix is stale.

Embedding writes in steps, each its own transaction under the index's write lock, taken per step and
not for the whole run: the model's work happens outside it, so a refresh of the documents (another
`evident index`, an `evident ask` over a changed folder) waits for one step's commit at most, never
for the whole embedding. A step stores a document's vectors only if its text is still the one the
vectors were made from.

A partly embedded index is searched as it is: the documents with vectors by words and meaning, the
others by words alone (`hybrid.hybrid_ranking`).

Searching loads the matrix once per (generation, vectors generation) and scores every window with one
pass over it. Cosines are computed row by row (`einsum`, not BLAS's blocked gemv): a window's score
then does not depend on which other rows are in the matrix, so a caller's permitted subset ranks
exactly as an index holding only those documents would.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from evident.embeddings.scorer import SemanticScorer
from evident.embeddings.windows import WINDOWS_FORMAT, document_windows

# Documents read per query of the documents to embed.
COMMIT_EVERY = 64
# Windows embedded per step, each step its own SQLite transaction and progress report: about 15 s of the
# local model on 2 busy cores, so progress moves and an interrupted run keeps all but the last step's work
# (a manual's 64 documents are about 1,200 windows, over a minute). A larger document is a step of its own.
STEP_WINDOWS = 256

EmbedProgress = Callable[[int, int], None]


@dataclass(frozen=True)
class EmbedStats:
    """What one embedding run did: documents and windows embedded, and in how long."""

    documents: int = 0
    windows: int = 0
    seconds: float = 0.0
    model_id: str = ""
    reset: bool = False  # the vectors of another model were deleted first
    stopped: bool = False  # asked to stop before every document had its vectors (`stop`)
    elsewhere: bool = False  # not run: another process is embedding this index (`LocalIndex.embed`)


@dataclass(frozen=True)
class LoadedVectors:
    """Every window vector of the index, rows sorted by (document id, ordinal)."""

    key: tuple[int, int, str]  # (generation, vectors generation, `vectors_key`) it was read at
    document_ids: NDArray[np.int64]  # per row
    spans: NDArray[np.int64]  # per row: (start, end) in the document's text
    matrix: NDArray[np.float32]  # per row: the unit vector
    starts: NDArray[np.int64]  # the first row of each distinct document, in row order
    documents: NDArray[np.int64]  # the distinct document ids, in row order

    def cosines(self, query: NDArray[np.float32]) -> NDArray[np.float32]:
        if not len(self.matrix):
            return np.zeros(0, dtype=np.float32)
        scores: NDArray[np.float32] = np.einsum("ij,j->i", self.matrix, query.astype(np.float32))
        return scores

    def best_per_document(self, cosines: NDArray[np.float32]) -> NDArray[np.float32]:
        """The best window's cosine of each of `documents`."""
        if not len(cosines):
            return np.zeros(0, dtype=np.float32)
        best: NDArray[np.float32] = np.maximum.reduceat(cosines, self.starts)
        return best

    def windows_of(self, document_id: int, cosines: NDArray[np.float32]) -> list[tuple[int, int, float]]:
        """(start, end, cosine) of each window of one document, in text order."""
        # `documents` ascends: the rows are read in document id order (`load_vectors`).
        at = int(np.searchsorted(self.documents, document_id))
        if at >= len(self.documents) or self.documents[at] != document_id:
            return []
        first = int(self.starts[at])
        last = int(self.starts[at + 1]) if at + 1 < len(self.starts) else len(self.document_ids)
        return [(int(self.spans[r, 0]), int(self.spans[r, 1]), float(cosines[r])) for r in range(first, last)]

    def has(self, document_id: int) -> bool:
        """Whether the document had vectors when these were read (every embedded document has a window)."""
        at = int(np.searchsorted(self.documents, document_id))
        return at < len(self.documents) and int(self.documents[at]) == document_id


# The documents that have no vectors yet: what an embedding run has to do.
_UNEMBEDDED = "FROM documents WHERE id NOT IN (SELECT DISTINCT document_id FROM passage_vectors)"


def _meta(conn: sqlite3.Connection, key: str) -> str | None:
    row = conn.execute("SELECT value FROM evident_meta WHERE key = ?", (key,)).fetchone()
    return None if row is None else str(row[0])


def stored_model(conn: sqlite3.Connection) -> str | None:
    """What the stored vectors belong to: `vectors_key` of their model (None: none were ever written)."""
    return _meta(conn, "vectors_model")


def vectors_key(model_id: str) -> str:
    """The model id and the windows' format (`WINDOWS_FORMAT`): the vectors are valid for both."""
    return f"{model_id} {WINDOWS_FORMAT}"


def vectors_generation(conn: sqlite3.Connection) -> int:
    value = _meta(conn, "vectors_generation")
    return int(value) if value and value.isdigit() else 0


def unembedded(conn: sqlite3.Connection, model_id: str) -> int:
    """How many documents have no vectors of `model_id` (all of them, for another model's vectors)."""
    if stored_model(conn) != vectors_key(model_id):
        return int(conn.execute("SELECT COUNT(*) FROM documents").fetchone()[0])
    return int(conn.execute(f"SELECT COUNT(*) {_UNEMBEDDED}").fetchone()[0])


def _bump(conn: sqlite3.Connection) -> None:
    conn.execute("INSERT OR REPLACE INTO evident_meta VALUES ('vectors_generation', ?)",
                 (str(vectors_generation(conn) + 1),))  # fmt: skip


def embed_missing(
    conn: sqlite3.Connection,
    scorer: SemanticScorer,
    transaction: Callable[[], AbstractContextManager[object]],
    progress: EmbedProgress | None = None,
    step_windows: int = STEP_WINDOWS,
    stop: Callable[[], bool] | None = None,
) -> EmbedStats:
    """Embed the windows of every document without vectors of `scorer`'s model and store them, about
    `step_windows` windows per `transaction()` (a context manager factory the caller owns, holding
    the write lock for that step), reporting `progress` after each; `stop()`, asked before each step,
    ends the run early (what was committed stays). Raises what the embeddings raise
    (`EmbeddingsFailure`, `EmbeddingsUnavailable`); what was committed before stays."""
    started = time.perf_counter()
    model_id = scorer.model_id
    reset = False
    if stored_model(conn) != vectors_key(model_id):
        with transaction():
            reset = conn.execute("SELECT 1 FROM passage_vectors LIMIT 1").fetchone() is not None
            conn.execute("DELETE FROM passage_vectors")
            conn.execute("INSERT OR REPLACE INTO evident_meta VALUES ('vectors_model', ?)", (vectors_key(model_id),))
            _bump(conn)
    todo = [int(row[0]) for row in conn.execute(f"SELECT id {_UNEMBEDDED} ORDER BY id")]
    documents = windows = 0
    for first in range(0, len(todo), COMMIT_EVERY):
        ids = todo[first : first + COMMIT_EVERY]
        marks = ", ".join("?" for _ in ids)
        rows = conn.execute(f"SELECT id, title, content, content_hash FROM documents WHERE id IN ({marks})",
                            ids).fetchall()  # fmt: skip
        read = {int(i): (str(title), str(digest)) for i, title, _, digest in rows}
        planned = [(int(i), *document_windows(str(title), str(content))) for i, title, content, _ in rows]
        for step in steps(planned, step_windows):
            if stop is not None and stop():
                return EmbedStats(documents, windows, time.perf_counter() - started, model_id, reset, stopped=True)
            vectors = scorer.embed_texts([text for _, _, texts in step for text in texts])
            with transaction():
                if stored_model(conn) != vectors_key(model_id):
                    # Another run switched the index to another model meanwhile: these vectors are not wanted.
                    return EmbedStats(documents, windows, time.perf_counter() - started, model_id, reset, stopped=True)
                step_marks = ", ".join("?" for _ in step)
                # Those still without vectors: another run (another process) may have stored some meanwhile.
                now = {int(i): (str(title), str(digest)) for i, title, digest in conn.execute(
                    f"SELECT id, title, content_hash {_UNEMBEDDED} AND id IN ({step_marks})",
                    [document_id for document_id, _, _ in step])}  # fmt: skip
                at = 0
                for document_id, spans, texts in step:
                    # A document changed or deleted by a refresh since it was read keeps no vectors of the
                    # old text; the next run embeds its new one.
                    if now.get(document_id) == read[document_id]:
                        conn.executemany(
                            "INSERT OR REPLACE INTO passage_vectors (document_id, ordinal, span_start, span_end,"
                            " vector) VALUES (?, ?, ?, ?, ?)",
                            [(document_id, n, s, e, vectors[at + n].astype(np.float32).tobytes())
                             for n, (s, e) in enumerate(spans)],
                        )  # fmt: skip
                    at += len(texts)
                _bump(conn)
            documents += len(step)
            windows += at
            if progress is not None:
                progress(documents, len(todo))
    return EmbedStats(documents, windows, time.perf_counter() - started, model_id, reset)


Planned = tuple[int, list[tuple[int, int]], list[str]]  # a document's id, its windows' spans and texts


def steps(planned: Sequence[Planned], most: int) -> Iterator[list[Planned]]:
    """`planned` documents (id, spans, texts) in order, cut into runs of at most `most` windows together
    (a document with more is a run of its own)."""
    step: list[Planned] = []
    count = 0
    for document in planned:
        if step and count + len(document[2]) > most:
            yield step
            step, count = [], 0
        step.append(document)
        count += len(document[2])
    if step:
        yield step


def load_vectors(conn: sqlite3.Connection, key: tuple[int, int, str]) -> LoadedVectors:
    """Every stored vector, as one matrix (`key`: what the caller read the generations as)."""
    rows = conn.execute(
        "SELECT document_id, span_start, span_end, vector FROM passage_vectors ORDER BY document_id, ordinal"
    ).fetchall()
    if not rows:
        empty = np.zeros(0, dtype=np.int64)
        return LoadedVectors(key, empty, np.zeros((0, 2), dtype=np.int64), np.zeros((0, 0), dtype=np.float32),
                             empty, empty)  # fmt: skip
    ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
    spans = np.array([(r[1], r[2]) for r in rows], dtype=np.int64)
    matrix = np.frombuffer(b"".join(r[3] for r in rows), dtype=np.float32).reshape(len(rows), -1)
    change = np.concatenate(([True], ids[1:] != ids[:-1]))
    starts = np.nonzero(change)[0].astype(np.int64)
    return LoadedVectors(key, ids, spans, matrix, starts, ids[starts])


def ranked_by_meaning(
    loaded: LoadedVectors, cosines: NDArray[np.float32], allowed: Sequence[int] | None, depth: int
) -> list[tuple[int, float]]:
    """The `depth` documents (among `allowed` ids; all when None) with the best window cosine,
    best first (ties: document id), as (document id, cosine)."""
    best = loaded.best_per_document(cosines)
    ids = loaded.documents
    if allowed is not None:
        keep = np.isin(ids, np.asarray(sorted(set(allowed)), dtype=np.int64))
        ids, best = ids[keep], best[keep]
    if not len(ids) or depth <= 0:
        return []
    order = np.lexsort((ids, -best.astype(np.float64)))[:depth]
    return [(int(ids[i]), float(best[i])) for i in order]
