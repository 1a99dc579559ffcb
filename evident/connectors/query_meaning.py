"""A query's meaning, made once per run before any source is asked.

The query is embedded once; every embedded index among the run's sources is brought up to date with the
model's vectors where a question may do that (`StoresVectors.embeds_before_search`: the documents its own
refresh added or changed, `LocalCorpusRetriever.embed_index`), or handed to the server's background
embedding (`evident.connectors.background`); then the same `QueryMeaning` goes to every source and,
through the documents' metadata, to the extractor. An index whose embedding is unfinished is searched as
it is (words over every document, meaning over those with vectors) and the run says so: a `SourceError`
of source "embeddings" naming how many documents meaning ranked (the answer is `degraded`).

Nothing here raises: a failed embeddings call leaves the run to the words and says so as a `SourceError`
of source "embeddings"; embeddings that are off for a reason worth knowing (not installed, a model file
that fails its sha256) leave a note.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from langchain_core.retrievers import BaseRetriever

from evident.connectors.background import BackgroundEmbedding, embedded_indexes
from evident.connectors.index.store import IndexFileError
from evident.connectors.source import SourceFailure, StoresVectors
from evident.embeddings.failures import EmbeddingsError
from evident.embeddings.meaning import QueryMeaning, meaning_error
from evident.embeddings.resolve import ResolvedEmbeddings, embeddings_note
from evident.models import SourceError

if TYPE_CHECKING:
    from evident.embeddings.scorer import SemanticScorer

log = logging.getLogger(__name__)


@dataclass
class PreparedMeaning:
    """The run's `QueryMeaning` (None: words only), the errors to report and the notes to leave."""

    meaning: QueryMeaning | None = None
    errors: list[SourceError] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def prepare_meaning(
    retriever: BaseRetriever, resolved: ResolvedEmbeddings, query: str, weight: float, *,
    before_search: bool = True, background: BackgroundEmbedding | None = None,
) -> PreparedMeaning:
    """Embed `query`, and the embedded indexes of `retriever` that lack vectors of the model: before the
    search where `before_search` and the index allow it, else in `background` when given (a server's);
    an index left unfinished is reported (`partly_embedded`)."""
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
    for name, local in embedded_indexes(retriever):
        error = _bring_up_to_date(name, local, scorer, before_search, background)
        if error is not None:
            out.errors.append(error)
    out.meaning = QueryMeaning(scorer, vector, weight)
    return out


def _bring_up_to_date(name: str, local: StoresVectors, scorer: SemanticScorer, before_search: bool,
                      background: BackgroundEmbedding | None) -> SourceError | None:
    """Embed what `local` lacks now or in the background; the run's error when it is not complete."""
    try:
        if before_search and local.embeds_before_search(scorer.model_id):
            local.embed_index(scorer)
        missing, _ = local.missing_vectors(scorer.model_id)
    except EmbeddingsError as exc:  # that index ranks by words until its vectors can be made
        log.warning("evident: embedding the index of source %s failed: %s", name, exc.message)
        return meaning_error(f"source {name} was", exc)
    except (SourceFailure, IndexFileError) as exc:  # its store is unusable: its own search says so, as its error
        log.warning("evident: embedding the index of source %s failed: %s", name, exc)
        return None
    if not missing:
        return None
    queued = background is not None and background.embed(name, local, scorer)
    return partly_embedded(name, in_background=queued)


def partly_embedded(name: str, *, in_background: bool) -> SourceError:
    """The run's report of an index whose embedding is unfinished: meaning ranked only part of it.

    It names no count: the index's documents include those the caller may not see, and how many there
    are is not the caller's to learn (`evident index` and the server log show the progress)."""
    rest = ("its embedding goes on in the background" if in_background
            else "its embedding is unfinished (`evident index` finishes it)")
    return SourceError(source="embeddings", kind="error",
                       message=f"source {name} was ranked by meaning over part of its documents, the others by "
                               f"words only: {rest}")
