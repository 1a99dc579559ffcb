"""The shared state the graph's nodes read and update.

`typing_extensions.TypedDict` on purpose: the LangGraph server builds the assistant's JSON schema
from these types, and `typing.TypedDict` on Python 3.11 makes that endpoint fail.
"""

from __future__ import annotations

import operator
from typing import Annotated, Any

from typing_extensions import NotRequired, Required, TypedDict

from evident.llm_output import BatchExtraction, merge_extractions
from evident.models import (
    AlignmentDecision,
    Citation,
    Passage,
    Principal,
    RetrievedRef,
    SourceDocument,
    SourceError,
    SourceRun,
)


def merge_timings(left: dict[str, float] | None, right: dict[str, float] | None) -> dict[str, float]:
    return {**(left or {}), **(right or {})}


class InputState(TypedDict, total=False):
    """What a caller passes: the question and, optionally, who is asking."""

    query: Required[str]
    principal: NotRequired[Principal | dict[str, Any] | None]


class EvidentState(TypedDict, total=False):
    query: Required[str]
    principal: Principal | dict[str, Any] | None
    mode: str
    documents: list[SourceDocument]
    retrieved: list[RetrievedRef]
    source_errors: Annotated[list[SourceError], operator.add]
    source_runs: list[SourceRun]  # per source: status, documents kept, documents denied, latency
    acl_dropped: int  # documents removed because the principal may not see them (a count, no titles)
    model_errors: Annotated[list[SourceError], operator.add]
    passages: list[Passage]
    extractions: Annotated[list[BatchExtraction], merge_extractions]  # LLM extraction batches
    alignment: list[AlignmentDecision]
    verified: list[AlignmentDecision]
    draft: str
    generated_by: str  # "model" or "offline": which measure verify applies to the draft
    removed_sentences: list[str]
    answer: str
    citations: list[Citation]
    status: str
    error: str
    timings_ms: Annotated[dict[str, float], merge_timings]
