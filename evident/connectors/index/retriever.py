"""A LangChain retriever over the embedded local index."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path

from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from pydantic import PrivateAttr

from evident.connectors.base import to_langchain_document
from evident.connectors.index.embedded import LocalIndex, default_index_path
from evident.connectors.index.loaders import DEFAULT_LIMITS, CorpusLimits, SkipHandler


class LocalCorpusRetriever(BaseRetriever):
    """BM25 search over a `LocalIndex`; each hit carries its score and EvidenT's fields in metadata."""

    index_path: Path
    k: int = 8
    source_name: str = "local"
    limits: CorpusLimits = DEFAULT_LIMITS

    _index: LocalIndex | None = PrivateAttr(default=None)
    _open_lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)

    @classmethod
    def from_corpus(
        cls,
        paths: str | Path | Sequence[str | Path],
        index_path: str | Path | None = None,
        k: int = 8,
        *,
        source_name: str = "local",
        on_skip: SkipHandler | None = None,
        limits: CorpusLimits = DEFAULT_LIMITS,
    ) -> LocalCorpusRetriever:
        """Build or incrementally refresh the index of `paths` and return a retriever over it.

        The index then mirrors exactly `paths`: documents from corpus paths no longer listed are
        removed, so reusing an `index_path` with a different path set cannot leak old documents.
        Raises `CorpusError` (index left as it was) when a path is missing or holds no documents.
        """
        roots = [paths] if isinstance(paths, (str, Path)) else list(paths)
        target = Path(index_path) if index_path is not None else default_index_path(roots)
        with LocalIndex(target, limits=limits) as index:
            index.refresh(roots, on_skip=on_skip)
        return cls(index_path=target, k=k, source_name=source_name, limits=limits)

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        return [
            to_langchain_document(doc.model_copy(update={"source": self.source_name}), score=score)
            for doc, score in self._open().search(query, k=self.k)
        ]

    def _open(self) -> LocalIndex:
        # Opened on first use, not at construction: building a graph must not touch the disk, and
        # LangGraph may construct retrievers in processes that never query them.
        with self._open_lock:
            if self._index is None:
                self._index = LocalIndex(self.index_path, limits=self.limits)
            return self._index

    def close(self) -> None:
        with self._open_lock:
            if self._index is not None:
                self._index.close()
                self._index = None
