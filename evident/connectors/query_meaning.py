"""A query's meaning, made once per run before any source is asked (issue 23).

The query is embedded once; every embedded index among the run's sources is brought up to date with the
model's vectors (a no-op once done: `LocalCorpusRetriever.embed_index`); then the same `QueryMeaning`
goes to every source and, through the documents' metadata, to the extractor. Nothing here raises: a
failed embeddings call leaves the run to the words and says so as a `SourceError` of source
"embeddings" (the answer is `degraded`); embeddings that are off for a reason worth knowing (not
installed, a model file that fails its sha256) leave a note.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass, field

from langchain_core.retrievers import BaseRetriever

from evident.connectors.federated import FederatedRetriever
from evident.connectors.source import SourceFailure, StoresVectors
from evident.embeddings.failures import EmbeddingsError
from evident.embeddings.meaning import QueryMeaning, meaning_error
from evident.embeddings.resolve import ResolvedEmbeddings, embeddings_note
from evident.models import SourceError

log = logging.getLogger(__name__)


@dataclass
class PreparedMeaning:
    """The run's `QueryMeaning` (None: words only), the errors to report and the notes to leave."""

    meaning: QueryMeaning | None = None
    errors: list[SourceError] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _embedded_indexes(retriever: BaseRetriever) -> Iterator[tuple[str, StoresVectors]]:
    if isinstance(retriever, StoresVectors):
        yield str(getattr(retriever, "source_name", type(retriever).__name__)), retriever
    elif isinstance(retriever, FederatedRetriever):
        for source in retriever.sources:
            for _, local in _embedded_indexes(source.retriever):
                yield source.name, local


def prepare_meaning(
    retriever: BaseRetriever, resolved: ResolvedEmbeddings, query: str, weight: float
) -> PreparedMeaning:
    """Embed `query` and every embedded index of `retriever` that lacks vectors of the model."""
    out = PreparedMeaning()
    if not resolved.on or weight <= 0:
        if resolved.provider != "none" and weight > 0:
            note = embeddings_note(resolved)
            out.notes = [note] if note else []
        return out
    scorer = resolved.scorer
    assert scorer is not None  # resolved.on
    try:
        vector = scorer.embed_query(query)
    except EmbeddingsError as exc:
        log.warning("evident: embedding the query failed: %s", exc.message)
        out.errors.append(meaning_error("every source was", exc))
        return out
    for name, local in _embedded_indexes(retriever):
        try:
            local.embed_index(scorer)
        except EmbeddingsError as exc:  # that index ranks by words until its vectors can be made
            log.warning("evident: embedding the index of source %s failed: %s", name, exc.message)
            out.errors.append(meaning_error(f"source {name} was", exc))
        except SourceFailure as exc:  # its store is unreachable: its own search says so, as its error
            log.warning("evident: embedding the index of source %s failed: %s", name, exc.message)
    out.meaning = QueryMeaning(scorer, vector, weight)
    return out
