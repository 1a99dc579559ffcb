"""The local default: all-MiniLM-L6-v2 (int8 ONNX) on onnxruntime, with the HF `tokenizers` tokenizer.

It computes what sentence-transformers computes for this model (its modules.json: Transformer, then
mean pooling, then Normalize; 1_Pooling/config.json: `pooling_mode_mean_tokens`; sentence_bert_config.json:
`max_seq_length` 256): word-piece tokens truncated to 256, the last hidden state averaged over the
attention mask, the average scaled to unit length. The packaged tokenizer.json pads and truncates to
128 on its own; here texts are cut at 256 and each batch is padded to its own longest text.

onnxruntime and tokenizers are imported when the first text is embedded, not before: an `evident ask`
that never reaches the embeddings starts as fast as without them.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from langchain_core.embeddings import Embeddings

from evident.embeddings.failures import EmbeddingsUnavailable
from evident.embeddings.model_files import (
    MODEL_SHA256,
    ModelFiles,
    locate_model_files,
    missing_runtime,
)

if TYPE_CHECKING:
    from numpy.typing import NDArray

MODEL_NAME = "all-MiniLM-L6-v2-int8"
DIMENSION = 384
MAX_SEQ_LENGTH = 256
# Tokens per model call: attention holds batch × 12 heads × length² floats per layer, so 32 passages of
# 256 tokens peak near 1 GB; 1,024 tokens (4 such passages, or 32 short sentences) runs as fast with
# about 100 MB (benchmarks/embeddings.py).
MAX_BATCH_TOKENS = 1024
# onnxruntime sets a session up in about 40 ms without graph optimisations and in about 220 ms with
# them, which then run a text about 4x faster (8 against 30-60 ms here). A process that embeds one
# query and exits (`evident ask`) is faster without; indexing, or a server's stream of queries, with
# them. So the first few texts of a model go through the quick session, and anything more (a batch
# of documents, the ninth query) builds the optimised one, which serves from then on. Both give the
# same vectors to within 1e-7.
QUICK_TEXTS = 8


def available_cores() -> int:
    """The CPU cores this process may run on (its affinity, where the system says; else all of them)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # not Linux
        return max(1, os.cpu_count() or 1)


class LocalEmbeddings(Embeddings):
    """all-MiniLM-L6-v2 on this machine: 384-dimensional unit vectors, no network.

    `threads` is onnxruntime's intra-op thread count (one batch's matrix products; default: the cores
    this process may use, `available_cores`); `batch_size` the texts per model call. Safe to share
    between threads.
    """

    def __init__(self, files: ModelFiles | None = None, *, threads: int | None = None, batch_size: int = 32) -> None:
        self._files = files
        self.threads = threads if threads is not None else available_cores()
        self.batch_size = batch_size
        self._lock = threading.Lock()
        self._session: Any = None
        self._tokenizer: Any = None
        self._quick: Any = None  # the session without graph optimisations, for the first QUICK_TEXTS texts
        self._quick_texts = 0

    @property
    def model_id(self) -> str:
        """Stable while the model's bytes and the way texts are cut stay the same."""
        return f"local:{MODEL_NAME}:d{DIMENSION}:max{MAX_SEQ_LENGTH}:sha256={MODEL_SHA256}"

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [[float(x) for x in row] for row in self.encode(texts)]

    def embed_query(self, text: str) -> list[float]:
        return [float(x) for x in self.encode([text])[0]]

    def encode(self, texts: Sequence[str]) -> NDArray[np.float32]:
        """One unit vector per text, as a `(len(texts), 384)` float32 array."""
        out = np.zeros((len(texts), DIMENSION), dtype=np.float32)
        if not texts:
            return out
        session, tokenizer = self._session_for(len(texts))
        encodings = tokenizer.encode_batch(list(texts))
        # Texts of like length in one batch waste less on padding; results go back to the input order.
        order = sorted(range(len(texts)), key=lambda i: len(encodings[i].ids))
        batch: list[int] = []
        for i in order:
            width = len(encodings[i].ids)  # the longest so far: the order is by length
            if batch and (len(batch) >= self.batch_size or (len(batch) + 1) * width > MAX_BATCH_TOKENS):
                out[batch] = _embed_batch(session, [encodings[j] for j in batch])
                batch = []
            batch.append(i)
        out[batch] = _embed_batch(session, [encodings[j] for j in batch])
        return out

    def load(self) -> None:
        """Load the model now (otherwise the first `encode` does); `EmbeddingsUnavailable` if it cannot."""
        self._loaded()

    @property
    def loaded_sessions(self) -> tuple[str, ...]:
        """The onnxruntime sessions held now: "quick" and/or "optimised" (see QUICK_TEXTS)."""
        with self._lock:
            return (("quick",) if self._quick is not None else ()) + (
                ("optimised",) if self._session is not None else ())

    def token_count(self, text: str) -> int:
        """How many tokens of `text` the model reads (at most MAX_SEQ_LENGTH: the rest is cut off)."""
        _, tokenizer = self._loaded()
        return len(tokenizer.encode(text).ids)

    def _loaded(self) -> tuple[Any, Any]:
        """The optimised session and the tokenizer, loaded on first use."""
        with self._lock:
            if self._session is None:
                self._session, self._tokenizer = self._load()
                self._quick = None
            return self._session, self._tokenizer

    def _session_for(self, count: int) -> tuple[Any, Any]:
        """The session to embed `count` more texts with (see QUICK_TEXTS), and the tokenizer."""
        with self._lock:
            if self._session is None and self._quick_texts + count <= QUICK_TEXTS:
                if self._quick is None:
                    self._quick, self._tokenizer = self._load(optimised=False)
                self._quick_texts += count
                return self._quick, self._tokenizer
        return self._loaded()

    def _load(self, *, optimised: bool = True) -> tuple[Any, Any]:
        problem = missing_runtime()
        if problem:
            raise EmbeddingsUnavailable(problem)
        files = self._files or locate_model_files()
        # Checked again at load: cheap (the digest is cached by size and mtime) and catches a file
        # replaced since it was located.
        files = locate_model_files(str(files.model), str(files.tokenizer))
        # optional dependency: the [semantic] extra
        import onnxruntime
        from tokenizers import Tokenizer

        try:
            tokenizer = Tokenizer.from_file(str(files.tokenizer))
            tokenizer.enable_truncation(max_length=MAX_SEQ_LENGTH)
            tokenizer.no_padding()  # batches are padded here, each to its own longest text
            options = onnxruntime.SessionOptions()
            options.intra_op_num_threads = self.threads
            options.inter_op_num_threads = 1
            options.log_severity_level = 3  # its warnings are about graph fusions, not about our inputs
            if not optimised:
                options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL
            session = onnxruntime.InferenceSession(str(files.model), sess_options=options,
                                                   providers=["CPUExecutionProvider"])
        except Exception as exc:  # a runtime too old for the file, a broken install
            raise EmbeddingsUnavailable(f"the local embeddings model cannot be loaded from {files.model}: "
                                        f"{type(exc).__name__}: {exc}") from None
        return session, tokenizer


def _embed_batch(session: Any, encodings: list[Any]) -> NDArray[np.float32]:
    # Padding positions are masked out of attention and pooling, so their id ([PAD] is 0) never counts.
    width = max(len(e.ids) for e in encodings)
    ids = np.zeros((len(encodings), width), dtype=np.int64)
    mask = np.zeros_like(ids)
    types = np.zeros_like(ids)
    for row, e in enumerate(encodings):
        n = len(e.ids)
        ids[row, :n], mask[row, :n], types[row, :n] = e.ids, e.attention_mask, e.type_ids
    (hidden,) = session.run(["last_hidden_state"], {"input_ids": ids, "attention_mask": mask,
                                                     "token_type_ids": types})
    weights = mask[:, :, None].astype(np.float32)
    pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
    norms = np.linalg.norm(pooled, axis=1, keepdims=True)
    unit: NDArray[np.float32] = (pooled / np.clip(norms, 1e-12, None)).astype(np.float32)
    return unit
