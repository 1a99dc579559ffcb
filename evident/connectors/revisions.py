"""Which revision of a source a citation quotes, and the cited document read again as a caller may see it now.

A citation carries the content hash of the text its spans index and the source's own revision id, which a
connector states in a document's `metadata["revision"]` as `kind=value`: the embedded index `mtime_ns=…;size=…`
of the file a document was read from (or the revision a JSONL line states itself), MediaWiki `revid=…`, a
crawled docs site `etag=…` or `last-modified=…`. A source with no revision id leaves it out; the content
hash always identifies the text.

Reading a document again goes by its id through a source that can (`FetchesById`: the embedded index, the
PostgreSQL source, MediaWiki), with the caller's principal and the source's permission settings, and then
through EvidenT's own permission filter, as every search hit does.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

from evident.alignment.models import SourceDocument
from evident.citations.recheck import REVISION, revision_of
from evident.connectors.acl import filter_documents
from evident.connectors.chunks import CHUNK_OF
from evident.connectors.source import Source, SourceFailure
from evident.connectors.visibility import AclPolicy
from evident.models import Citation, Principal

__all__ = ["REVISION", "FetchesById", "pinned", "read_now", "revision_of"]


def pinned(citation: Citation, doc: SourceDocument | None) -> Citation:
    """`citation` with the content hash and revision of the text its spans index (`doc`, as retrieved).

    A chunk cited at document offsets indexes its document's text, which was not retrieved whole: its
    hash stays '' rather than naming the chunk's text."""
    if doc is None:
        return citation
    whole = CHUNK_OF not in doc.metadata or citation.span_base == "chunk"
    return citation.model_copy(update={"content_hash": doc.content_hash if whole else "",
                                       "revision": revision_of(doc)})


@runtime_checkable
class FetchesById(Protocol):
    """A retriever that reads one document by its id as a caller may see it now."""

    def fetch_visible(self, url: str, *, principal: Principal | dict[str, Any] | None = None,
                      policy: AclPolicy | None = None, revision: str = "") -> SourceDocument | None:
        """The document `url` as `principal` may read it now; None when it is deleted or hidden alike.
        `revision`: the revision a citation names, which a source may use to find the document."""


def read_now(sources: Sequence[Source], url: str, principal: Principal | None, *, source: str = "",
             revision: str = "") -> SourceDocument | None:
    """The document `url` as `principal` may read it now through `sources` (only the one named `source`,
    when it is among them); None when no source holds it for this caller. Raises what a source raises
    (`SourceFailure` when it cannot be asked, or when none of them can read by id)."""
    named = [s for s in sources if s.name == source]
    asked = False
    for candidate in named or sources:
        retriever = candidate.retriever
        if not isinstance(retriever, FetchesById):
            continue
        try:
            doc = retriever.fetch_visible(url, principal=principal, policy=candidate.policy(), revision=revision)
        except NotImplementedError:  # a search-only subclass of a retriever that can read by id
            continue
        asked = True
        if doc is None:
            continue
        doc = doc.model_copy(update={"source": candidate.name})
        visible, _ = filter_documents([doc], principal, default=candidate.default_acl, fallback_acl=candidate.acl)
        if visible:
            return visible[0]
    if not asked:
        # Not `gone`: nothing was asked, so nothing may be concluded about the document.
        raise SourceFailure("no configured source can read a document by its id here (the embedded index, "
                            "PostgreSQL and MediaWiki can)")
    return None
