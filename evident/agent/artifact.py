"""What the EvidenT tool hands an agent besides the text its model reads: the evidence of one answer.

The tool's `ToolMessage.content` is the answer with compact numbered marks (`[1]`, `[2]`, …) and a short
list of sources; `ToolMessage.artifact` is an `EvidenceArtifact` as plain JSON (`model_dump(mode="json")`),
so that it looks the same in a local graph, a checkpoint, `RemoteGraph` and the SDK. `verify_answer`
reads the artifacts of a thread's tool messages back with `EvidenceArtifact.model_validate`.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field, model_validator

from evident.models import Evidence, SourceError, Status

ARTIFACT_KIND = "evident.evidence/v1"


class EvidencePassage(BaseModel):
    """One verified passage: the exact source text at its spans, and where in its document it stands."""

    passage_id: str
    url: str
    title: str = ""
    heading_path: list[str] = Field(default_factory=list,
                                    description="title › section › … of the unit the quote comes from, when known")
    spans: list[tuple[int, int]] = Field(default_factory=list, description="character offsets into the source text")
    quote: str = Field(description="the source text at `spans` (segments joined by ' … ')")
    content_hash: str = Field("", description="hash of the source text the spans index (SourceDocument.content_hash)")


class EvidenceCitation(BaseModel):
    """One answer sentence tied to one source: the number the content shows, the url and the spans."""

    number: int = Field(description="the mark the tool's content shows for this source, [number]")
    sentence: str
    url: str
    title: str = ""
    heading_path: list[str] = Field(default_factory=list)
    passage_ids: list[str] = Field(default_factory=list)
    spans: list[tuple[int, int]] = Field(default_factory=list)
    quote: str = ""
    content_hash: str = ""
    revision: str = Field("", description="the source's revision id of that text (Citation.revision), when it has one")


class EvidenceArtifact(BaseModel):
    """Everything an agent (or `verify_answer`) needs to check what the tool's answer claims."""

    kind: str = ARTIFACT_KIND
    query: str
    status: Status
    evidence: Evidence = Field(
        "clear", description="clear: the answer's sentences state it; weak: a hedged answer (it opens with 'The "
        "documentation does not explicitly state', its passages only come closest); none: no answer (status "
        "insufficient or error)")
    answer: str = Field(description="the verified answer as EvidenT wrote it, with its [url] marks")
    citations: list[EvidenceCitation] = Field(default_factory=list)
    passages: list[EvidencePassage] = Field(default_factory=list, description="every verified passage of the query")
    source_errors: list[SourceError] = Field(default_factory=list)
    error: str = Field("", description="why the query failed (status `error`), as the graph said it")

    @model_validator(mode="before")
    @classmethod
    def _evidence_of_older_artifacts(cls, data: Any) -> Any:
        """An artifact a thread kept from before `evidence` existed: read from its status (an answer then
        counted as clear)."""
        if isinstance(data, dict) and "evidence" not in data:
            return {**data, "evidence": "none" if data.get("status") in {"insufficient", "error"} else "clear"}
        return data
