"""The LangChain side of a retriever that applies permissions inside its own search (the embedded index,
PostgreSQL): the caller's principal and the source's policy become visibility tokens, the search returns
the caller's best k with their scores, and each hit becomes a `Document` of this source."""

from __future__ import annotations

from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForRetrieverRun, CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables.config import run_in_executor

from evident.alignment.models import SourceDocument
from evident.connectors.acl import coerce_principal
from evident.connectors.base import to_langchain_document
from evident.connectors.source import AccessReport, FiltersInSearch
from evident.connectors.visibility import AclPolicy, principal_tokens
from evident.embeddings.meaning import QueryMeaning
from evident.models import Principal


class SearchesVisible(FiltersInSearch, BaseRetriever):
    """`search_visible` is the search; no principal is anonymous, no policy is the source's defaults. A
    subclass that ranks by meaning itself also derives from `RanksByMeaning` (its `meaning` is then the
    query's; otherwise None, and the federation re-ranks its results)."""

    k: int = 8
    source_name: str = "local"

    def search_visible(
        self, query: str, visible: list[str], meaning: QueryMeaning | None
    ) -> list[tuple[SourceDocument, float]]:
        """The `k` best documents holding one of the `visible` tokens, best first, each with its score."""
        raise NotImplementedError

    def get_visible(self, url: str, visible: list[str]) -> SourceDocument | None:
        """The document whose id is `url` as the source holds it now, if it holds one of the `visible` tokens;
        None when there is none or it is hidden. A subclass that cannot read by id raises NotImplementedError."""
        raise NotImplementedError

    def fetch_visible(self, url: str, *, principal: Principal | dict[str, Any] | None = None,
                      policy: AclPolicy | None = None, revision: str = "") -> SourceDocument | None:
        """The document `url` as `principal` may read it now (`evident.connectors.revisions.FetchesById`)."""
        rules = policy if policy is not None else AclPolicy(source=self.source_name)
        doc = self.get_visible(url, principal_tokens(coerce_principal(principal), rules))
        return doc.model_copy(update={"source": self.source_name}) if doc is not None else None

    def _get_relevant_documents(
        self,
        query: str,
        *,
        run_manager: CallbackManagerForRetrieverRun,
        principal: Principal | dict[str, Any] | None = None,
        report: AccessReport | None = None,
        policy: AclPolicy | None = None,
        meaning: QueryMeaning | None = None,
    ) -> list[Document]:
        # `report` stays untouched: a search that never sees hidden documents has none to count.
        rules = policy if policy is not None else AclPolicy(source=self.source_name)
        visible = principal_tokens(coerce_principal(principal), rules)
        return [to_langchain_document(doc.model_copy(update={"source": self.source_name}), score=score)
                for doc, score in self.search_visible(query, visible, meaning)]  # fmt: skip

    async def _aget_relevant_documents(
        self,
        query: str,
        *,
        run_manager: AsyncCallbackManagerForRetrieverRun,
        principal: Principal | dict[str, Any] | None = None,
        report: AccessReport | None = None,
        policy: AclPolicy | None = None,
        meaning: QueryMeaning | None = None,
    ) -> list[Document]:
        # BaseRetriever's own async fallback passes no keywords on: the principal would be lost.
        return await run_in_executor(
            None, self._get_relevant_documents, query, run_manager=run_manager.get_sync(),
            principal=principal, report=report, policy=policy, meaning=meaning,
        )  # fmt: skip
