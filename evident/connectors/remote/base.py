"""The common shape of a live, permission-aware connector over an HTTP API."""

from __future__ import annotations

from abc import abstractmethod
from typing import Any, Unpack

import httpx
from langchain_core.callbacks import AsyncCallbackManagerForRetrieverRun, CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from pydantic import Field, PrivateAttr

from evident.connectors.acl import coerce_principal
from evident.connectors.remote.http import USER_AGENT, Flow, arun_flow, run_flow
from evident.connectors.source import AccessOptions, AccessReport, OpenedOnFirstUse, PermissionAware
from evident.models import Principal


class RemoteRetriever(PermissionAware, BaseRetriever):
    """A retriever whose search is one HTTP flow, run blocking under `invoke` and async under `ainvoke`.

    `invoke(query, principal=..., report=...)`: connectors that can check permissions with their
    system do so for `principal` and count in `report` the hits it may not see (they are not returned).
    """

    source_name: str = Field(min_length=1)
    k: int = Field(8, ge=1, le=100)
    timeout_s: float = Field(10.0, gt=0)
    verify_tls: bool | str = Field(True, description="False, or a CA bundle path, for private certificates.")
    trust_env: bool = Field(False, description="Use HTTP(S)_PROXY and friends from the environment.")

    _client: OpenedOnFirstUse[httpx.Client] = PrivateAttr(default_factory=OpenedOnFirstUse)

    @abstractmethod
    def _flow(self, query: str, principal: Principal | None, report: AccessReport) -> Flow[list[Document]]:
        """The protocol of one search, as a generator of requests (see evident.connectors.remote.http)."""

    def _access_flow(self, query: str, access: AccessOptions) -> Flow[list[Document]]:
        report = access.get("report")
        principal = coerce_principal(access.get("principal"))
        return self._flow(query, principal, report if report is not None else AccessReport())

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, **access: Unpack[AccessOptions]
    ) -> list[Document]:
        return run_flow(self._access_flow(query, access), self._client.get(self._new_client))

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun, **access: Unpack[AccessOptions]
    ) -> list[Document]:
        flow = self._access_flow(query, access)
        # A client per call: an AsyncClient is bound to the event loop that first used it.
        async with httpx.AsyncClient(**self._client_options()) as client:
            return await arun_flow(flow, client)

    def _client_options(self) -> dict[str, Any]:
        return {
            "timeout": httpx.Timeout(self.timeout_s),
            "verify": self.verify_tls,
            "follow_redirects": False,  # an API that redirects is misconfigured or asks us to log in
            "headers": {"User-Agent": USER_AGENT, "Accept": "application/json"},
            # Off by default: no proxy or .netrc credentials picked up behind the configuration's back.
            "trust_env": self.trust_env,
        }

    def _new_client(self) -> httpx.Client:
        return httpx.Client(**self._client_options())

    def close(self) -> None:
        self._client.close()
