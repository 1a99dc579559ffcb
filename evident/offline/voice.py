"""FAQ prompts in the reader's voice, which the offline composer selects but does not show.

FAQ pages often put the question they answer as their reader would say it: "I received a Letter that
states my license is suspended. What can I do?", "My vehicle plates were lost, stolen or destroyed."
Shown in an answer, such a line reads as the answer speaking about itself, and it is never the
evidence: the sentence under it is (docs/evaluation.md, rule 55). Pure Python, no framework imports.
"""

from __future__ import annotations

import re
from typing import Protocol, TypeVar

__all__ = ["PromptReader", "unprompted"]

# "I"/"My" followed by a lower-case word: "I received", "I don t", "My vehicle"; not "I-94" or "I Bonds".
_READER_STATEMENT = re.compile(r"(?:I|I'm|I’m|I've|I’ve|My)\s+[a-z]")


class PromptReader:
    """Reads the units of one quote fragment in order and tells which are a reader's prompt: a
    first-person statement, or the question right after one on its line ("What can I do?")."""

    def __init__(self, part: str) -> None:
        self._part = part
        self._end = 0
        self._prompt = False

    def read(self, raw: str, text: str, item: bool = False) -> bool:
        """Whether `text` (the unit `raw` of the fragment, whitespace collapsed) is a prompt; a list
        item or table row (`item`) never is."""
        start = self._part.find(raw, self._end)
        same_line = start >= 0 and "\n" not in self._part[self._end : start]
        self._end = max(self._end, start + len(raw))
        if item:
            self._prompt = False
        elif text.endswith(("?", "？")):
            self._prompt = self._prompt and same_line
        else:
            self._prompt = bool(_READER_STATEMENT.match(text))
        return self._prompt


class _Shown(Protocol):
    prompt: bool
    passage: int
    relevance: float


S = TypeVar("S", bound=_Shown)


def unprompted(sentences: list[S]) -> list[S]:
    """`sentences` (in answer order) without the prompts whose answer, the next sentence of their
    passage, shares a question word (`relevance` > 0): that sentence answers the reader directly.
    A prompt whose next sentence shares none stays, as what ties that sentence to the question
    ("My vehicle plates were lost, stolen or destroyed." before "You must surrender the vehicle
    registration to the DMV."); a prompt whose answer was cut goes, as it promises an answer the
    reader does not get. An answer of prompts only is kept as it is."""
    out: list[S] = []
    pending: list[S] = []
    for s in sentences:
        if s.prompt:
            pending = [p for p in pending if p.passage == s.passage]
            pending.append(s)
            continue
        if pending and s.passage == pending[-1].passage and s.relevance <= 0:
            out.extend(pending)
        pending = []
        out.append(s)
    return out or pending
