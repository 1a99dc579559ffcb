"""Retrievers that stand for connectors in permission tests."""

from __future__ import annotations

from typing import Any

from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever

from evident.connectors.source import AccessReport, PermissionAware

UNMAPPED_REASON = "crm: the caller has groups but no CRM account"


class Unmapped(PermissionAware, BaseRetriever):
    """A connector that cannot map the caller to an account of its own: it hides itself, and says why."""

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, principal: Any = None,
        report: AccessReport | None = None,
    ) -> list[Document]:
        if report is not None:
            report.reasons.append(UNMAPPED_REASON)
        return []
