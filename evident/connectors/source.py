"""A `Source`: one independent search system behind a LangChain retriever (paper §3.1).

The federated retriever treats every source as a black box: it only knows the source's name,
the kind of documents it holds, how many to ask for, how long to wait and how much to trust its
ranking. Permission-aware connectors additionally receive the caller's principal.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Literal, Protocol, TypedDict, TypeVar

from langchain_core.retrievers import BaseRetriever
from pydantic import BaseModel, ConfigDict, Field, SecretStr

from evident.connectors.acl import DefaultAcl
from evident.connectors.visibility import AclPolicy
from evident.embeddings.meaning import QueryMeaning
from evident.models import Principal

if TYPE_CHECKING:
    from evident.connectors.index.vectors import EmbedProgress, EmbedStats
    from evident.embeddings.scorer import SemanticScorer


class SourceConfigError(ValueError):
    """A source that cannot be built as configured; `str()` names the source."""

    def __init__(self, source: str, message: str) -> None:
        self.source = source
        self.message = message
        super().__init__(str(self))

    def __str__(self) -> str:
        return f"source {self.source!r}: {self.message}"


FailureKind = Literal["timeout", "error", "config"]
_FAILURE_KINDS: dict[str, FailureKind] = {"timeout": "timeout", "error": "error", "config": "config"}


class SourceFailure(Exception):
    """A source that failed for one query; the message is safe to show (no credentials, no text)."""

    def __init__(self, message: str, *, kind: str = "error") -> None:
        self.kind: FailureKind = _FAILURE_KINDS.get(kind, "error")
        self.message = message
        super().__init__(message)


class AccessReport:
    """Filled by a permission-aware retriever: how many hits the caller was not allowed to see.

    Passed as the `report` keyword of `invoke`, so that hits a source's own permission check
    removed are counted with the ones EvidenT's ACL filter removes (a count, never the documents).
    """

    __slots__ = ("denied", "reasons")

    def __init__(self) -> None:
        self.denied = 0
        self.reasons: list[str] = []  # why whole sources were hidden from this caller (no document named)


class PermissionAware:
    """Marker for retrievers whose `invoke` accepts `principal=` and `report=` keywords.

    Only these receive them: passing unknown keywords to an arbitrary retriever could change
    what it does.
    """

    accepts_principal: ClassVar[bool] = True


class FiltersInSearch(PermissionAware):
    """Marker for retrievers that apply permissions inside their search: `invoke` also accepts `policy=`
    (the source's `default_acl` and `acl`), and the top k it returns are the caller's top k.

    The others are over-fetched and refilled (`evident.connectors.refill`), then filtered.
    """

    filters_in_search: ClassVar[bool] = True


class RanksByMeaning:
    """Marker for retrievers that rank by meaning themselves: `invoke` also accepts `meaning=` (the
    query's `QueryMeaning`) and the documents it returns carry their `SEMANTIC_WINDOWS`. The results of
    every other source are re-ranked by meaning after they arrive (`evident.connectors.rerank`)."""

    ranks_by_meaning: ClassVar[bool] = True


class StoresVectors:
    """Marker for retrievers that keep their documents' vectors themselves (the embedded index, PostgreSQL):
    `embed_index(scorer)` gives every document without vectors of the scorer's model its vectors (None when
    there was nothing to do; raises what the embeddings, or the store, raise; `stop()` true between two
    steps ends it early, keeping what was stored). `evident.connectors.query_meaning` runs it before a
    query's search when `embeds_before_search` allows, or has it run in the background
    (`evident.connectors.background`); `missing_vectors` says how far it got."""

    stores_vectors: ClassVar[bool] = True

    def embed_index(self, scorer: SemanticScorer, *, progress: EmbedProgress | None = None,
                    stop: Callable[[], bool] | None = None) -> EmbedStats | None:
        raise NotImplementedError

    def embeds_before_search(self, model_id: str) -> bool:
        """Whether a query may run `embed_index` before its search (outside a server): by default yes."""
        return True

    def missing_vectors(self, model_id: str) -> tuple[int, int]:
        """(documents without vectors of `model_id`, documents): what a search ranks by words alone. (0, 0)
        for a store whose search makes the vectors it lacks itself."""
        return 0, 0


class AccessOptions(TypedDict, total=False):
    """The keywords a `PermissionAware` retriever's `invoke` accepts (`policy`: a `FiltersInSearch` one only,
    `meaning`: a `RanksByMeaning` one only)."""

    principal: Principal | dict[str, Any] | None
    report: AccessReport | None
    policy: AclPolicy
    meaning: QueryMeaning | None


def accepts_principal(retriever: BaseRetriever) -> bool:
    return bool(getattr(retriever, "accepts_principal", False))


def filters_in_search(retriever: BaseRetriever) -> bool:
    return bool(getattr(retriever, "filters_in_search", False))


def ranks_by_meaning(retriever: BaseRetriever) -> bool:
    return bool(getattr(retriever, "ranks_by_meaning", False))


class Source(BaseModel):
    """A named retriever with its federation settings."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    name: str = Field(min_length=1, description="Unique name; appears in citations' `source` and in errors.")
    retriever: BaseRetriever
    source_type: str = Field("", description="wiki, docs, policy, ...: used for documents that carry none.")
    k: int | None = Field(None, ge=1, description="At most this many documents are used from this source.")
    timeout_s: float = Field(10.0, gt=0, description="Per-query deadline; a slower source is skipped.")
    weight: float = Field(1.0, gt=0, description="Multiplies this source's reciprocal-rank-fusion scores.")
    default_acl: DefaultAcl = Field("public", description="Visibility of documents without an acl.")
    acl: Any = Field(None, description="ACL for documents of this source that carry none (see evident.connectors.acl).")
    secrets: list[SecretStr] = Field(
        default_factory=list, repr=False, description="Values never to show in an error message."
    )

    def policy(self) -> AclPolicy:
        return AclPolicy(default=self.default_acl, fallback_acl=self.acl, source=self.name)


# A resource a retriever opens on first use (an index file, an HTTP client) and shares between threads.
class Closable(Protocol):
    def close(self) -> None: ...


R = TypeVar("R", bound=Closable)


class OpenedOnFirstUse(Generic[R]):
    """Opened by the first caller that needs it, not at construction: building a graph must not touch the
    disk or the network, and LangGraph may construct retrievers in processes that never query them.

    `close()` closes it; the next `get` opens it again.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.current: R | None = None

    def get(self, open_it: Callable[[], R]) -> R:
        with self._lock:
            if self.current is None:
                self.current = open_it()
            return self.current

    def close(self) -> None:
        with self._lock:
            if self.current is not None:
                self.current.close()
                self.current = None
