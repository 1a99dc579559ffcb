"""What the conversation's earlier answers already said: a follow-up is answered by what it adds.

Framework-free. `said_text` folds the earlier answers once; `said_before` tells whether a sentence or
a passage's quote is in them, modulo case, whitespace and its closing punctuation.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from evident.alignment.models import AlignmentDecision

__all__ = ["fresh_passages", "fold", "said_before", "said_text"]


def fold(text: str) -> str:
    return " ".join(text.casefold().split()).rstrip(".!?;:")


def said_text(answers: Sequence[str]) -> str:
    """The earlier answers, folded, one search text."""
    return " \n ".join(" ".join(a.casefold().split()) for a in answers)


_SENTENCE_END = re.compile(r"(?<=[.?!])\s+|\s*\n\s*")


def said_before(text: str, said: str) -> bool:
    """Whether every sentence of `text` is in `said` (an answer cites after each sentence, so a
    quote of several sentences is found sentence by sentence)."""
    parts = [fold(p) for p in _SENTENCE_END.split(text)]
    parts = [p for p in parts if p]
    return bool(said and parts and all(p in said for p in parts))


def fresh_passages(decisions: Sequence[AlignmentDecision], said: str) -> list[AlignmentDecision]:
    """The passages whose quote an earlier answer did not already give; all of them when every one
    was given before (the new turn then asks for them again)."""
    fresh = [d for d in decisions if not said_before(d.quote, said)]
    return fresh or list(decisions)
