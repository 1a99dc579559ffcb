"""Data models crossing the alignment boundary (pydantic only, no framework)."""

from __future__ import annotations

import hashlib
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

Action = Literal["kept", "corrected", "truncated", "relinked", "dropped"]
ACTIONS: tuple[Action, ...] = ("kept", "corrected", "truncated", "relinked", "dropped")


def content_hash(text: str) -> str:
    """Stable hash of a document's text: the key of the per-document index cache and of dedup."""
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()


class SourceDocument(BaseModel):
    """A retrieved document: the only text a passage may be verified against."""

    model_config = ConfigDict(extra="ignore")

    url: str
    content: str
    title: str = ""
    source: str = ""
    source_type: str = ""
    content_hash: str = ""
    metadata: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _accept_text_synonym(cls, data: Any) -> Any:
        if isinstance(data, dict) and "content" not in data and "text" in data:
            data = {**data, "content": data["text"]}
        return data

    @model_validator(mode="after")
    def _fill_hash(self) -> SourceDocument:
        if not self.content_hash:
            self.content_hash = content_hash(self.content)
        return self


class Passage(BaseModel):
    """A passage an extractor claims to have copied verbatim from the document at `url`."""

    model_config = ConfigDict(extra="ignore")

    passage_id: str
    url: str
    content: str

    @model_validator(mode="before")
    @classmethod
    def _accept_synonyms(cls, data: Any) -> Any:
        # The paper's extraction JSON names the text field "passage"; models also emit ints as ids.
        if isinstance(data, dict):
            data = dict(data)
            if "content" not in data and "passage" in data:
                data["content"] = data["passage"]
            if isinstance(data.get("passage_id"), int):
                data["passage_id"] = str(data["passage_id"])
        return data


class Substitution(BaseModel):
    """One place where the passage says something other than its source (a number, a name, a negation).

    Either side may be empty: a word the passage added, or one it left out ("not").
    """

    passage: str = Field(description="what the passage says there")
    source: str = Field(description="what the source says there (this is what the quote shows)")


class AlignmentDecision(BaseModel):
    """What alignment decided for one passage, with the exact source spans that survive."""

    passage_id: str
    action: Action
    url: str
    original_url: str
    overlap: float = Field(description="overlap_n against the cited document (0 if it was not retrieved)")
    final_overlap: float = Field(0.0, description="overlap_n against the final document")
    spans: list[tuple[int, int]] = Field(default_factory=list)
    quote: str = ""
    substitutions: list[Substitution] = Field(
        default_factory=list, description="where the passage differs from the quote, in passage order")
    reason: str = ""
    content: str = Field("", description="the passage text as the extractor gave it")
    heading_path: list[str] = Field(
        default_factory=list, description="the title and headings the quote sits under, outermost first "
        "(evident.alignment.outline); context for the quote, never part of it")

    @property
    def verified(self) -> bool:
        return self.action != "dropped"

    def as_dropped(self, reason: str) -> AlignmentDecision:
        """This decision turned into a drop: no document, no spans, no quote (what `dropped` promises)."""
        return self.model_copy(update={"action": "dropped", "url": "", "spans": [], "quote": "",
                                       "substitutions": [], "reason": reason})
