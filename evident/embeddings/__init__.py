"""Meaning as well as words: one seam for any LangChain `Embeddings` (docs/embeddings.md).

- `resolve.py`: the settings, and which embeddings a run uses or why none (`resolve_embeddings`,
  `GraphEmbeddings`);
- `scorer.py`: cosine similarities over any `Embeddings`, each text embedded once per process;
- `local.py`: the local default, all-MiniLM-L6-v2 on onnxruntime; `model_files.py`: its pinned files;
- `remote.py`: any `/v1/embeddings` server through langchain-openai;
- `failures.py`: what can go wrong.

Importing this package loads neither LangChain nor onnxruntime.
"""

from evident.embeddings.failures import EmbeddingsError, EmbeddingsFailure, EmbeddingsUnavailable
from evident.embeddings.resolve import (
    DEFAULT_EMBEDDINGS,
    EmbeddingsFactory,
    EmbeddingsSettings,
    GraphEmbeddings,
    ResolvedEmbeddings,
    describe,
    embeddings_note,
    resolve_embeddings,
)

__all__ = [
    "DEFAULT_EMBEDDINGS",
    "EmbeddingsError",
    "EmbeddingsFactory",
    "EmbeddingsFailure",
    "EmbeddingsSettings",
    "EmbeddingsUnavailable",
    "GraphEmbeddings",
    "ResolvedEmbeddings",
    "describe",
    "embeddings_note",
    "resolve_embeddings",
]
