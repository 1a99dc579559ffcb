"""FAQ prompts in the reader's voice, which the offline composer selects but does not show.

FAQ pages often put the question they answer as their reader would say it: "I received a letter that
says my badge is blocked. What can I do?", "My laptop was lost or stolen."
Shown in an answer, such a line reads as the answer speaking about itself, and it is never the
evidence: the sentence under it is. Pure Python, no framework imports.
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
        if start >= 0:
            self._end = start + len(raw)
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
    order: int
    relevance: float
    urls: list[str]
    after_gap: bool


S = TypeVar("S", bound=_Shown)


def unprompted(sentences: list[S], every: list[S]) -> list[S]:
    """`sentences` (in answer order, chosen from `every`, all sentences of the quotes in order) without
    the prompts whose answer is shown right after them: the first sentence after them in their passage
    that is no prompt, when it shares a question word (`relevance` > 0) and so answers the reader
    directly. A prompt stays in every other case: when that sentence shares no question word, the
    prompt is what ties it to the question ("My laptop was lost or stolen." before
    "You must report the device to the IT service desk."); when it was cut, the prompt is what
    the answer kept of its passage (and its page's citation). A prompt merged with the same line of
    another page is hidden only when its answer is cited on every page it is. So the words of a hidden
    prompt are always said by the answer that follows it, on the same pages. The prompts right before
    one answer are hidden together or shown together."""
    answer: dict[int, int] = {}  # a prompt's order -> the order of the sentence that answers it
    pending: list[S] = []
    for s in every:
        # Text left out before `s`, or its answer merged into an earlier page's copy: not its answer.
        if pending and (s.passage != pending[-1].passage or s.after_gap):
            pending = []
        if s.prompt:
            pending.append(s)
            continue
        answer.update((p.order, s.order) for p in pending)
        pending = []
    out: list[S] = []
    run: list[S] = []  # the prompts shown since the last other sentence
    for s in sentences:
        if s.prompt:
            run.append(s)
            continue
        # A run of prompts ("My badge stopped working." "What can I do?") goes or stays whole: half of it
        # would read as a question the answer starts with.
        if not all(answer.get(p.order) == s.order and s.relevance > 0 and set(p.urls) <= set(s.urls) for p in run):
            out.extend(run)
        run = []
        out.append(s)
    return out + run
