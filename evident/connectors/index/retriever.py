"""A LangChain retriever over the embedded local index."""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import PrivateAttr

from evident.alignment.models import SourceDocument
from evident.connectors.in_search import SearchesVisible
from evident.connectors.index.embedded import LocalIndex, default_index_path
from evident.connectors.index.loaders import DEFAULT_LIMITS, CorpusLimits, SkipHandler
from evident.connectors.index.vectors import STEP_WINDOWS
from evident.connectors.index.visible_ranking import CANDIDATE_POOL
from evident.connectors.source import OpenedOnFirstUse, RanksByMeaning, StoresVectors
from evident.embeddings.meaning import QueryMeaning

if TYPE_CHECKING:
    from collections.abc import Callable

    from evident.connectors.index.vectors import EmbedProgress, EmbedStats
    from evident.embeddings.scorer import SemanticScorer

log = logging.getLogger(__name__)


class LocalCorpusRetriever(StoresVectors, RanksByMeaning, SearchesVisible):
    """BM25 search over a `LocalIndex`; each hit carries its score and EvidenT's fields in metadata.
    The documents come in ranking order; their BM25 scores need not descend (`LocalIndex.search`).
    Given the query's `meaning` (and once `embed_index` has run for its model), the ranking is hybrid.

    Permissions are part of the search: the k documents returned are the best k the `principal` may
    see under `policy` (a source's `default_acl` and `acl`; by default public documents, and those
    without an acl), and the ranking's statistics count only those. No principal is anonymous.
    """

    index_path: Path
    limits: CorpusLimits = DEFAULT_LIMITS
    candidate_pool: int = CANDIDATE_POOL  # of a filtered search's exact ranking (visible_ranking.ExactRanker)
    # How many documents without vectors a query may embed before its search over an index whose embedding
    # started (`embeds_before_search`); None: any number. `from_corpus` sets it to what its refresh changed.
    embed_up_to: int | None = None
    embed_step_windows: int = STEP_WINDOWS  # windows per committed step of `embed_index` (vectors.STEP_WINDOWS)

    _opened: OpenedOnFirstUse[LocalIndex] = PrivateAttr(default_factory=OpenedOnFirstUse)
    _embedding: threading.Lock = PrivateAttr(default_factory=threading.Lock)

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
        candidate_pool: int = CANDIDATE_POOL,
    ) -> LocalCorpusRetriever:
        """Build or incrementally refresh the index of `paths` and return a retriever over it.

        The index then mirrors exactly `paths`: documents from corpus paths no longer listed are
        removed, so reusing an `index_path` with a different path set cannot leak old documents.
        Raises `CorpusError` (index left as it was) when a path is missing or holds no documents.

        A query embeds before its search the documents this refresh added or changed, as `evident index`
        would have (`embed_up_to`), and an index never embedded with its model; an embedding another run
        started and left unfinished, or is still doing, is not taken over by a question, which is answered
        at once with what is there (`embeds_before_search`).
        """
        roots = [paths] if isinstance(paths, (str, Path)) else list(paths)
        target = Path(index_path) if index_path is not None else default_index_path(roots)
        with LocalIndex(target, limits=limits) as index:
            stats = index.refresh(roots, on_skip=on_skip)
        return cls(index_path=target, k=k, source_name=source_name, limits=limits, candidate_pool=candidate_pool,
                   embed_up_to=stats.added + stats.updated)

    def search_visible(
        self, query: str, visible: list[str], meaning: QueryMeaning | None
    ) -> list[tuple[SourceDocument, float]]:
        return self._open().search(query, k=self.k, visible=visible, meaning=meaning)

    def get_visible(self, url: str, visible: list[str]) -> SourceDocument | None:
        return self._open().get(url, visible=visible)

    def _open(self) -> LocalIndex:
        return self._opened.get(lambda: LocalIndex(self.index_path, limits=self.limits,
                                                   candidate_pool=self.candidate_pool))

    def embed_index(self, scorer: SemanticScorer, *, progress: EmbedProgress | None = None,
                    stop: Callable[[], bool] | None = None) -> EmbedStats | None:
        """Give every document of the index that has none the vectors of `scorer`'s model (`LocalIndex.embed`:
        in steps, resumable; `stop`). None when there was nothing to do. Raises what the embeddings raise;
        what was stored before stays.

        It writes through a `LocalIndex` of its own, so this retriever's searches go on meanwhile (a served
        index embedding in the background), each seeing the steps committed so far. While another process
        embeds the index it does nothing (`EmbedStats.elsewhere`): the searches see that one's steps."""
        with self._embedding:
            if self.missing_vectors(scorer.model_id)[0] == 0:
                return None
            log.info("%s: embedding the index with %s", self.index_path, scorer.model_id)
            with LocalIndex(self.index_path, limits=self.limits) as index:
                stats = index.embed(scorer, progress=progress, stop=stop, step_windows=self.embed_step_windows,
                                    beside_another=False)  # fmt: skip
            if stats.elsewhere:
                log.info("%s: another process is embedding the index; its steps show here as they commit",
                         self.index_path)  # fmt: skip
                return stats
            log.info("%s: embedded %d documents (%d windows) in %.1f s%s", self.index_path, stats.documents,
                     stats.windows, stats.seconds, " (stopped)" if stats.stopped else "")  # fmt: skip
            return stats

    def embeds_before_search(self, model_id: str) -> bool:
        """Whether a query embeds the documents without vectors before its search: those its own refresh
        added or changed (`embed_up_to`), or an index whose embedding with this model never started (built by
        words only, or for another model). An embedding that `evident index` or a server started and left
        unfinished, or is still doing, stays theirs: the query searches what is there."""
        if self.embed_up_to is None or self.missing_vectors(model_id)[0] <= self.embed_up_to:
            return True
        return not self._open().embedding_started(model_id)

    def missing_vectors(self, model_id: str) -> tuple[int, int]:
        index = self._open()
        return index.unembedded(model_id), index.count()

    @property
    def opened(self) -> LocalIndex | None:
        """The open index, or None before the first search and after `close()`."""
        return self._opened.current

    def close(self) -> None:
        self._opened.close()
