"""What `verify_answer` reads of a thread: the agent's final answer and the evidence EvidenT returned before it.

Only the thread's own messages are read: the artifacts of its tool messages (`EvidenceArtifact`, as a model
or as its JSON) are the only passages an answer is checked against. Nothing is searched or fetched, so a
check can never see a passage the caller's EvidenT tool did not already return to the caller.

How a mark in the answer resolves to a source (`ThreadEvidence.sources_for`):

- `[n]` names source n of an EvidenT tool call: the `EvidenceCitation`s numbered n in that call's artifact
  give its url, and its passages are every verified passage of that url in the same artifact. When several
  calls in the thread numbered a source n, every one is a candidate, the latest call first; the sentence is
  checked against each in that order and the mark stands for the first that supports it.
- `[url]` names the document with that url: its passages in every artifact, the latest call first.
- `[1, 2]` and `[1,2]` are read as `[1][2]`. A mark that resolves to nothing (a number no call gave, a url no
  call returned) is a citation to nothing and is removed.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, HumanMessage, ToolMessage
from pydantic import ValidationError

from evident.agent.artifact import ARTIFACT_KIND, EvidenceArtifact, EvidencePassage
from evident.conversation.messages import read_messages

# A group of numbered marks written with commas: "[1, 2]" or "[1,2]" (read as "[1][2]").
_MARK_LIST = re.compile(r"\[\s*(\d{1,3}(?:\s*,\s*\d{1,3})+)\s*\]")


@dataclass(frozen=True)
class Source:
    """One source of one EvidenT tool call: what a mark can stand for, and the passages it is checked against."""

    mark: str  # the number of the source in its call as text ("2"), or its url when the call gave it none
    url: str
    title: str
    passages: tuple[EvidencePassage, ...]
    call: int  # the position of the call's tool message in the thread; later calls have larger values
    tool_call_id: str


@dataclass(frozen=True)
class ThreadEvidence:
    """The EvidenT artifacts of a thread, in thread order, and what could not be read as one."""

    artifacts: tuple[tuple[int, str, EvidenceArtifact], ...]  # (position, tool_call_id, artifact)
    notes: tuple[str, ...] = ()

    @cached_property
    def all_sources(self) -> tuple[Source, ...]:
        """Every source of every call, the latest call first, each call's sources in their own order."""
        out: list[Source] = []
        for position, call_id, artifact in reversed(self.artifacts):
            numbers: dict[str, int] = {}
            for c in artifact.citations:
                numbers.setdefault(c.url, c.number)
            titles = {c.url: c.title for c in artifact.citations} | {p.url: p.title for p in artifact.passages}
            urls = list(dict.fromkeys([c.url for c in sorted(artifact.citations, key=lambda c: c.number)]
                                      + [p.url for p in artifact.passages]))
            for url in urls:
                number = numbers.get(url)
                out.append(Source(
                    mark=str(number) if number is not None else url, url=url, title=titles.get(url, ""),
                    passages=_passages(artifact, url), call=position, tool_call_id=call_id,
                ))
        return tuple(out)

    def sources_for(self, mark: str) -> list[Source]:
        """The candidates a mark stands for, the latest call first (module docstring)."""
        mark = mark.strip()
        if mark.isdigit():
            return [s for s in self.all_sources if s.mark == str(int(mark))]
        return [s for s in self.all_sources if s.url == mark]

    def marks(self) -> frozenset[str]:
        """Every token that is a mark in an answer of this thread: the numbers and the urls of its sources."""
        return frozenset(m for s in self.all_sources for m in (s.mark, s.url))


def _passages(artifact: EvidenceArtifact, url: str) -> tuple[EvidencePassage, ...]:
    """The verified passages of `url` in one artifact; an artifact that lists none falls back to its
    citations' own quotes and spans (each citation is a verified passage's part)."""
    found = tuple(p for p in artifact.passages if p.url == url)
    if found:
        return found
    return tuple(
        EvidencePassage(passage_id=(c.passage_ids or [f"citation-{i}"])[0], url=c.url, title=c.title,
                        heading_path=c.heading_path, spans=c.spans, quote=c.quote, content_hash=c.content_hash)
        for i, c in enumerate(artifact.citations) if c.url == url and c.quote
    )


def as_messages(messages: Iterable[BaseMessage | Mapping[str, Any]]) -> list[AnyMessage]:
    """Messages as LangChain messages (a served thread's state holds their JSON): `read_messages`."""
    return list(read_messages(messages))  # type: ignore[arg-type]  # read_messages returns message objects


def final_answer(messages: Sequence[BaseMessage]) -> int | None:
    """The position of the agent's final answer: the last AI message that calls no tool, after the last human
    message (None: the current question has no answer yet; an earlier turn's answer is not checked again)."""
    for i in range(len(messages) - 1, -1, -1):
        m = messages[i]
        if isinstance(m, HumanMessage):
            return None
        if isinstance(m, AIMessage) and not m.tool_calls:
            return i
    return None


def is_evidence(artifact: Any) -> bool:
    """Whether a tool message's artifact is EvidenT's (as a model, or as JSON naming its kind)."""
    return isinstance(artifact, EvidenceArtifact) or (
        isinstance(artifact, Mapping) and artifact.get("kind") == ARTIFACT_KIND)


def thread_evidence(messages: Sequence[BaseMessage], before: int | None = None) -> ThreadEvidence:
    """The EvidenT artifacts of the tool messages before position `before` (all when None).

    An artifact that names EvidenT's kind but does not validate is left out and named in `notes`;
    other tools' artifacts are not EvidenT's evidence and are skipped without a note."""
    found: list[tuple[int, str, EvidenceArtifact]] = []
    notes: list[str] = []
    for i, m in enumerate(messages[:before]):
        if not isinstance(m, ToolMessage) or not is_evidence(m.artifact):
            continue
        try:
            found.append((i, m.tool_call_id, EvidenceArtifact.model_validate(m.artifact)))
        except ValidationError as exc:
            notes.append(f"the artifact of tool call {m.tool_call_id!r} is not a valid EvidenT evidence artifact "
                         f"and was not read ({exc.error_count()} error(s), first: {exc.errors()[0]['msg']})")
    return ThreadEvidence(tuple(found), tuple(notes))


def split_mark_lists(text: str, marks: frozenset[str]) -> str:
    """`[1, 2]` as `[1][2]` when every number in it is a mark of the thread; other brackets as they are."""
    def split(m: re.Match[str]) -> str:
        numbers = [x.strip() for x in m.group(1).split(",")]
        return "".join(f"[{x}]" for x in numbers) if all(x in marks for x in numbers) else m.group(0)
    return _MARK_LIST.sub(split, text)
