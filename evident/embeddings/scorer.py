"""Similarity by meaning: a query against texts, cosine over unit vectors, each text embedded once.

`SemanticScorer` works over any LangChain `Embeddings`. Vectors are scaled to unit length here (a
server's need not be), so a similarity is a dot product in [-1, 1]. Every vector goes into one cache
per process, keyed by the model's id, the role (query or document: some models embed them
differently) and the text's sha256; it is bounded by bytes, least recently used first out.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from evident.embeddings.failures import EmbeddingsFailure

if TYPE_CHECKING:
    from langchain_core.embeddings import Embeddings
    from numpy.typing import NDArray

Role = Literal["query", "document"]
CacheKey = tuple[str, Role, bytes]
DEFAULT_CACHE_BYTES = 64 << 20  # about 43,000 vectors of all-MiniLM-L6-v2


class VectorCache:
    """An LRU map (model id, role, text sha256) → unit vector, bounded by the bytes it holds."""

    def __init__(self, max_bytes: int = DEFAULT_CACHE_BYTES) -> None:
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        self._vectors: OrderedDict[CacheKey, NDArray[np.float32]] = OrderedDict()
        self._bytes = 0
        self.hits = 0
        self.misses = 0

    def get(self, key: CacheKey) -> NDArray[np.float32] | None:
        with self._lock:
            found = self._vectors.get(key)
            if found is None:
                self.misses += 1
                return None
            self._vectors.move_to_end(key)
            self.hits += 1
            return found

    def put(self, key: CacheKey, vector: NDArray[np.float32]) -> None:
        with self._lock:
            old = self._vectors.pop(key, None)
            if old is not None:
                self._bytes -= old.nbytes
            self._vectors[key] = vector
            self._bytes += vector.nbytes
            while self._bytes > self.max_bytes and len(self._vectors) > 1:
                _, dropped = self._vectors.popitem(last=False)
                self._bytes -= dropped.nbytes

    def __len__(self) -> int:
        return len(self._vectors)


VECTORS = VectorCache()
"""The process's vectors, shared by every scorer."""


def model_id_of(embeddings: Embeddings) -> str:
    """A stable id of the model behind `embeddings`: its own `model_id` when it has one (EvidenT's do),
    else its class and model name (any other LangChain `Embeddings`)."""
    own = getattr(embeddings, "model_id", None)
    if isinstance(own, str) and own:
        return own
    kind = type(embeddings)
    name = getattr(embeddings, "model", None) or getattr(embeddings, "model_name", None) or ""
    dims = getattr(embeddings, "dimensions", None)
    return f"custom:{kind.__module__}.{kind.__qualname__}:{name}" + (f":d{dims}" if dims else "")


def text_key(text: str) -> bytes:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()


def _unit(rows: Any) -> NDArray[np.float32]:
    array = np.asarray(rows, dtype=np.float32)
    if array.ndim != 2 or not np.all(np.isfinite(array)):
        raise EmbeddingsFailure("reply", f"the embeddings came back as an array of shape {array.shape} "
                                "with non-finite values or the wrong rank")
    norms = np.linalg.norm(array, axis=1, keepdims=True)
    unit: NDArray[np.float32] = (array / np.clip(norms, 1e-12, None)).astype(np.float32)
    return unit


class SemanticScorer:
    """Embed a query once, texts in batches, and score them by cosine similarity.

    Raises `EmbeddingsFailure` when the embeddings fail or answer with the wrong number of vectors,
    and `EmbeddingsUnavailable` when the local model cannot be loaded; never returns made-up scores.
    """

    def __init__(self, embeddings: Embeddings, *, model_id: str | None = None, batch_size: int = 32,
                 cache: VectorCache | None = None) -> None:
        self.embeddings = embeddings
        self.model_id = model_id or model_id_of(embeddings)
        self.batch_size = batch_size
        self.cache = VECTORS if cache is None else cache

    def embed_query(self, text: str) -> NDArray[np.float32]:
        """The query's unit vector, `(d,)`."""
        key: CacheKey = (self.model_id, "query", text_key(text))
        found = self.cache.get(key)
        if found is None:
            found = _unit([self.embeddings.embed_query(text)])[0]
            self.cache.put(key, found)
        return found

    def embed_texts(self, texts: Sequence[str]) -> NDArray[np.float32]:
        """One unit vector per text, `(len(texts), d)`; only texts not in the cache are embedded,
        each distinct text once, `batch_size` per call."""
        keys: list[CacheKey] = [(self.model_id, "document", text_key(t)) for t in texts]
        vectors: list[NDArray[np.float32] | None] = [self.cache.get(k) for k in keys]
        todo: dict[bytes, list[int]] = {}
        for i, vector in enumerate(vectors):
            if vector is None:
                todo.setdefault(keys[i][2], []).append(i)
        pending = list(todo.values())
        for start in range(0, len(pending), self.batch_size):
            group = pending[start : start + self.batch_size]
            batch = [texts[indexes[0]] for indexes in group]
            rows = self._encode(batch)
            for indexes, row in zip(group, rows, strict=True):
                self.cache.put(keys[indexes[0]], row)
                for i in indexes:
                    vectors[i] = row
        if not vectors:
            return np.zeros((0, 0), dtype=np.float32)
        return np.stack([v for v in vectors if v is not None])

    def similarities(self, query: str | NDArray[np.float32], texts: Sequence[str]) -> NDArray[np.float32]:
        """Cosine similarity of the query (a text, or its vector from `embed_query`) to each text, `(n,)`."""
        q = self.embed_query(query) if isinstance(query, str) else query
        if not texts:
            return np.zeros(0, dtype=np.float32)
        scores: NDArray[np.float32] = self.embed_texts(texts) @ q
        return scores

    def _encode(self, batch: list[str]) -> NDArray[np.float32]:
        encode = getattr(self.embeddings, "encode", None)  # the local model's array path skips lists of floats
        rows = encode(batch) if callable(encode) else self.embeddings.embed_documents(batch)
        if len(rows) != len(batch):
            raise EmbeddingsFailure("reply", f"the embeddings returned {len(rows)} vectors for {len(batch)} texts")
        return _unit(rows)
