"""Re-verification of a stored answer: each citation's source read again as the caller may see it now.

`recheck_answer(answer, context=..., principal=...)` takes an answer as `evident ask --json` prints it, or an
EvidenT tool's artifact (`EvidenceArtifact` or its JSON), and reports per citation `unchanged`, `moved`,
`changed` or `gone` (evident/citations/recheck.py), or `unchecked` when its source could not be asked. The
sources are the configured ones (`context`, or the `retriever` given), read by document id with the caller's
principal: a document the caller may no longer see reads as `gone`, exactly as a deleted one.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.retrievers import BaseRetriever
from pydantic import BaseModel, Field, ValidationError

from evident.alignment.models import SourceDocument
from evident.citations.recheck import OUTCOMES, UNCHECKED, CitationCheck, recheck, revision_of
from evident.connectors.acl import coerce_principal
from evident.connectors.retrievers import as_federated, default_retriever
from evident.connectors.revisions import read_now
from evident.connectors.source import Source, SourceFailure
from evident.context import EvidentContext
from evident.models import Citation, Principal


class AnswerError(ValueError):
    """An answer that cannot be re-checked as given; the message says what is wrong with it."""


class AnswerCheck(BaseModel):
    """Every citation of one answer, checked against its source as it reads now."""

    query: str = ""
    checks: list[CitationCheck] = Field(default_factory=list)
    counts: dict[str, int] = Field(default_factory=dict, description="citations per outcome")

    @property
    def stands(self) -> bool:
        """Whether every citation's quote still stands in its source (unchanged or moved)."""
        return all(c.outcome in ("unchanged", "moved") for c in self.checks)


def answer_citations(answer: Mapping[str, Any]) -> list[Citation]:
    """The citations of an `ask --json` answer or a tool artifact; `AnswerError` names the first bad one."""
    raw = answer.get("citations")
    if not isinstance(raw, list):
        raise AnswerError('no "citations" list (expected the output of `evident ask --json` or a tool artifact)')
    citations = []
    for i, item in enumerate(raw):
        try:
            citations.append(Citation.model_validate(item))
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            raise AnswerError(f"citation {i}: {where}: {first['msg']}") from None
    return citations


def _sources_of(answer: Mapping[str, Any]) -> dict[str, str]:
    """Which source each retrieved url came from, as the answer recorded it."""
    found: dict[str, str] = {}
    for item in answer.get("retrieved") or []:
        if isinstance(item, Mapping) and isinstance(item.get("url"), str) and isinstance(item.get("source"), str):
            found.setdefault(item["url"], item["source"])
    return found


class CheckCache:
    """Checks already made, keyed by the citation's quote and spans and the content hash of the text it was
    checked against: the same quote against the same text decides the same. A caller reaches an entry only
    after reading that text itself (its hash is part of the key), so the cache shows nobody a text they may
    not read. Bounded: the oldest entries go first."""

    def __init__(self, size: int = 4096) -> None:
        self.size = size
        self.hits = 0
        self.misses = 0
        self._checks: OrderedDict[tuple[Any, ...], CitationCheck] = OrderedDict()
        self._lock = threading.Lock()

    def check(self, index: int, citation: Citation, now: SourceDocument, *, n: int, threshold: float) -> CitationCheck:
        """`recheck(index, citation, now, …)`, from the cache when this quote met this text before."""
        key = (citation.url, citation.quote, tuple(citation.spans), citation.content_hash, now.content_hash, n,
               threshold)
        with self._lock:
            known = self._checks.get(key)
            if known is not None:
                self.hits += 1
                self._checks.move_to_end(key)
        if known is not None:
            return known.model_copy(update={"citation": index, "sentence": citation.sentence,
                                            "revision": citation.revision, "revision_now": revision_of(now)})
        checked = recheck(index, citation, now, n=n, threshold=threshold)
        with self._lock:
            self.misses += 1
            self._checks[key] = checked
            while len(self._checks) > self.size:
                self._checks.popitem(last=False)
        return checked


CHECKS = CheckCache()


def recheck_citations(citations: Sequence[Citation], sources: Sequence[Source], principal: Principal | None, *,
                      source_of: Mapping[str, str] | None = None, n: int = 5,
                      threshold: float = 0.7) -> list[CitationCheck]:
    """One check per citation, in order; each cited document is read once (per url and revision)."""
    read: dict[tuple[str, str], SourceDocument | None | str] = {}
    checks = []
    for i, citation in enumerate(citations):
        key = (citation.url, citation.revision)
        if key not in read:
            try:
                read[key] = read_now(sources, citation.url, principal, source=(source_of or {}).get(citation.url, ""),
                                     revision=citation.revision)
            except SourceFailure as exc:
                read[key] = exc.message
            except Exception as exc:  # a source's own failure: the check goes on with the other citations
                read[key] = f"{type(exc).__name__} while reading the source"
        now = read[key]
        if isinstance(now, str):
            checks.append(CitationCheck(citation=i, url=citation.url, sentence=citation.sentence, outcome=UNCHECKED,
                                        quote=citation.quote, spans=list(citation.spans),
                                        content_hash=citation.content_hash, revision=citation.revision, reason=now))
        else:
            checks.append(CHECKS.check(i, citation, now, n=n, threshold=threshold) if now is not None
                          else recheck(i, citation, None))
    return checks


def recheck_answer(answer: Mapping[str, Any], *, context: EvidentContext | None = None,
                   principal: Principal | Mapping[str, Any] | None = None,
                   retriever: BaseRetriever | None = None) -> AnswerCheck:
    """Re-check every citation of `answer` (see the module docstring) against the sources of `context` (or
    `retriever`), as `principal` may see them now (None: anonymous). Raises `AnswerError` on a bad answer."""
    ctx = context if context is not None else EvidentContext.from_env()
    citations = answer_citations(answer)
    who = coerce_principal(dict(principal) if isinstance(principal, Mapping) else principal)
    sources = as_federated(retriever if retriever is not None else default_retriever(ctx), ctx).sources
    checks = recheck_citations(citations, sources, who, source_of=_sources_of(answer), n=ctx.ngram_n,
                               threshold=ctx.threshold)
    counts = {outcome: sum(c.outcome == outcome for c in checks) for outcome in (*OUTCOMES, UNCHECKED)}
    query = answer.get("query")
    return AnswerCheck(query=query if isinstance(query, str) else "", checks=checks,
                       counts={k: v for k, v in counts.items() if v})
