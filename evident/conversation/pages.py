"""The pages a conversation is about: a follow-up is most often answered on the page the earlier turns
were answered on.

"What about the receipts?" after a question on expense reports names one word of its topic; searched
alone, or with a few carried terms, it can rank another page first. The earlier messages, searched
together, name the conversation's page far better (the user's questions say what was asked, the
answers quote the page). `retrieve` (evident/nodes/retrieve.py) searches both and fuses the two
rankings by reciprocal rank, the conversation's at `EvidentContext.conversation_weight`: the new
turn's words still choose among the pages near the conversation, and move to another page when they
point there and the conversation names no page strongly.

Framework-free: the documents are anything with a `url`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Protocol, TypeVar

from evident.models import INSUFFICIENT_ANSWER, Turn

__all__ = ["FUSION_K", "HISTORY_MESSAGES", "conversation_text", "with_conversation"]

# Reciprocal-rank constant of the fusion: small, so that the first places of each ranking count far
# more than the rest (a page the conversation ranks first stays near the top).
FUSION_K = 1
# Earlier messages searched: the recent ones say what the conversation is about now.
HISTORY_MESSAGES = 6
_CITATION = re.compile(r"\[[^\]]*\]")


class HasUrl(Protocol):
    @property
    def url(self) -> str: ...


D = TypeVar("D", bound=HasUrl)


def conversation_text(history: Sequence[Turn], max_chars: int) -> str:
    """The last HISTORY_MESSAGES messages of `history` as one search text, oldest first, without
    citation markers or refusals; at most `max_chars`, the newest messages kept first."""
    parts: list[str] = []
    room = max_chars
    for turn in reversed(history[-HISTORY_MESSAGES:]):
        text = " ".join(_CITATION.sub(" ", turn.content).split())
        if not text or text == INSUFFICIENT_ANSWER:
            continue
        text = text[:room]
        parts.append(text)
        room -= len(text) + 1
        if room <= 0:
            break
    return " ".join(reversed(parts))


def with_conversation(found: Sequence[D], conversation: Sequence[D], weight: float, limit: int,
                      key: Callable[[str], str] = str) -> list[D]:
    """`found` (the new turn's ranking) fused with `conversation` (the earlier messages' ranking):
    each page scores 1 / (FUSION_K + rank) in `found` plus `weight` / (FUSION_K + rank) in
    `conversation`; the best `limit`, ties in `found`'s order. A page in both is `found`'s copy (its
    metadata was made for the new turn). `key` says when two urls are one page."""
    scores: dict[str, float] = {}
    docs: dict[str, D] = {}
    for ranking, share in ((found, 1.0), (conversation, weight)):
        for rank, doc in enumerate(ranking, start=1):
            page = key(doc.url)
            scores[page] = scores.get(page, 0.0) + share / (FUSION_K + rank)
            docs.setdefault(page, doc)
    order = sorted(scores, key=lambda page: -scores[page])  # stable: ties keep `found` first
    return [docs[page] for page in order[:limit]]
