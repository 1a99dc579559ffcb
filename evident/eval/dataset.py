"""The evaluation question file: one JSON object per line, checked line by line."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from evident.commands.verify import InputError, read_jsonl
from evident.models import Turn
from evident.settings import first_problem


class DatasetError(ValueError):
    """A question file that cannot be used; the message names the file and the line."""


class EvalQuery(BaseModel):
    """One question with its gold: pages that are sufficient to answer it and verbatim evidence.

    `history` (optional) holds the conversation's earlier messages when the question is a follow-up;
    it is then asked as a conversation, `{"messages": [*history, question]}`, as a chat client would.
    """

    model_config = ConfigDict(extra="ignore")

    id: str
    query: str = Field(min_length=1)
    answerable: bool | None = None
    gold_urls: list[str] = Field(default_factory=list)
    alt_urls: list[str] = Field(default_factory=list)
    gold_evidence: list[str] = Field(default_factory=list)
    answer: str | None = None
    history: list[Turn] = Field(default_factory=list)

    @field_validator("id", mode="before")
    @classmethod
    def _id_as_text(cls, v: object) -> object:
        return str(v) if isinstance(v, int) and not isinstance(v, bool) else v

    @field_validator("gold_urls", "alt_urls", "gold_evidence", "history", mode="before")
    @classmethod
    def _none_is_empty(cls, v: object) -> object:
        return [] if v is None else v

    @property
    def gold(self) -> set[str]:
        """Every page counted as correct: near-duplicate variants (`alt_urls`) hold the same evidence."""
        return set(self.gold_urls) | set(self.alt_urls)

    @property
    def is_answerable(self) -> bool:
        """Declared, or else implied by having gold pages."""
        return self.answerable if self.answerable is not None else bool(self.gold_urls)


def load_dataset(path: Path, limit: int | None = None) -> list[EvalQuery]:
    """Every question of `path` in file order (the first `limit` when given).

    Raises `DatasetError("FILE:LINE: problem")` on the first bad line, a repeated id, or an empty file.
    """
    try:
        lines = read_jsonl(path)  # the JSONL rules of `evident verify`: BOM, UTF-8, one object a line
    except InputError as exc:
        raise DatasetError(str(exc)) from None
    out: list[EvalQuery] = []
    seen: dict[str, int] = {}
    for no, obj in lines:
        try:
            item = EvalQuery.model_validate(obj)
        except ValidationError as exc:
            where, what = first_problem(exc, unknown="unknown field")
            raise DatasetError(f"{path}:{no}: field {where or 'line'}: {what}") from None
        if item.id in seen:
            raise DatasetError(f"{path}:{no}: id {item.id!r} repeats line {seen[item.id]}")
        seen[item.id] = no
        out.append(item)
        if limit is not None and len(out) >= limit:
            break
    if not out:
        raise DatasetError(f"{path}: no questions (the file is empty)")
    return out
