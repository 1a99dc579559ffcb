"""What one evaluation run records per query: the shared retrieval and each method's answer.

These records are the cache under `--out` (one JSONL file each) and the per-query part of
results.json; every metric is computed from them alone, so a report can be rebuilt without a run.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from evident.models import Evidence

Outcome = Literal["answered", "insufficient", "skipped", "error"]


class RetrievalRecord(BaseModel):
    """The documents one query retrieved, in rank order (their text is kept once, by content hash)."""

    key: str
    query_id: str
    # The standalone question retrieval searched for, when the question was a follow-up ("" otherwise).
    standalone_query: str = ""
    urls: list[str]
    hashes: list[str]
    latency_ms: float = 0.0
    errors: list[str] = Field(default_factory=list)
    # Per document (aligned with `hashes`), what the retrieval by meaning found in it for this query
    # (`evident.embeddings.meaning`: the best cosine and the windows' cosines); empty when by words only.
    # Kept here, not with the document's text: it belongs to the query.
    semantic: list[dict[str, Any]] = Field(default_factory=list)


class CitedFact(BaseModel):
    """One cited statement: the answer text before a citation, the cited URL, and (EvidenT, bm25)
    the exact source text the citation resolves to, under its heading path (EvidenT)."""

    sentence: str
    url: str
    quote: str = ""
    heading_path: list[str] = Field(default_factory=list)


class MethodRecord(BaseModel):
    """One method's answer to one query, reduced to what the metrics read."""

    key: str
    query_id: str
    method: str
    outcome: Outcome
    answer: str = ""
    facts: list[CitedFact] = Field(default_factory=list)
    passages: list[dict[str, Any]] = Field(
        default_factory=list, description="the extraction output as produced, before alignment (for --ablation)"
    )
    alignment: list[dict[str, Any]] = Field(default_factory=list)
    timings_ms: dict[str, float] = Field(default_factory=dict)
    model_calls: int = 0
    reason: str = Field("", description="why the method was skipped or failed, or which model step failed")
    degraded: bool = Field(False, description="a model step failed and EvidenT answered that step offline")
    evidence: Evidence | Literal[""] = Field(
        "", description="EvidenT's `evidence` (clear, weak: a hedged answer, none); '' for the baselines")
    judge: list[str] = Field(default_factory=list, description="LLM-as-judge label per fact (App. D.3)")

    @property
    def cited_urls(self) -> list[str]:
        """Distinct cited URLs in order of first citation."""
        return list(dict.fromkeys(f.url for f in self.facts))
