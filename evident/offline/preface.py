"""The "does not explicitly state" preface of a weak offline answer (paper App. D.2): fixed wording
around the question turned into a clause, so that the verify step can recognise it. Pure Python."""

from __future__ import annotations

import re

from evident.citations.answer import PREFACE, PREFACE_TAIL

__all__ = ["PREFACE_LEAD", "PREFACE_TAIL", "preface"]

PREFACE_LEAD = PREFACE
_WORD = re.compile(r"\b\w+\b")

# Common question shapes turned into the clause the preface needs; anything else is quoted as asked.
_LEADS = [
    (re.compile(r"^how\s+(?:do|can|should|would|could)\s+(?:i|we|you)\s+(.+)$", re.I), "how to {0}"),
    (re.compile(r"^(can|could|may|should)\s+(?:i|we|you)\s+(.+)$", re.I), "whether you {0} {1}"),
    (re.compile(r"^is\s+it\s+possible\s+to\s+(.+)$", re.I), "whether it is possible to {0}"),
    (re.compile(r"^what\s+(is|are)\s+(.+)$", re.I), "what {1} {0}"),
]
# The asker's first person becomes the reader's second person inside the preface.
_PRONOUNS = {
    "i": "you", "me": "you", "my": "your", "mine": "yours", "myself": "yourself", "am": "are",
    "we": "you", "us": "you", "our": "your", "ours": "yours", "ourselves": "yourselves",
}


def _second_person(m: re.Match[str]) -> str:
    return _PRONOUNS.get(m.group().lower(), m.group())


def _query_content(query: str) -> str:
    """The query as a clause after "does not explicitly state" (a quoted fallback when unsure)."""
    asked = " ".join(query.split())
    q = asked.rstrip("?.!？！。 ")
    if not q:
        return "the answer to this question"
    for pattern, template in _LEADS:
        m = pattern.match(q)
        if m:
            parts = [_WORD.sub(_second_person, g) for g in m.groups()]
            if len(parts) == 2 and template.startswith("whether"):
                parts[0] = parts[0].lower()
            return template.format(*parts)
    # Keep a question mark (it says this was a question); drop a full stop before our own.
    return f'the answer to "{asked if asked.endswith("?") else q}"'


def preface(query: str) -> str:
    """The weak-evidence lead-in of App. D.2 (fixed wording, so the verify step can recognise it)."""
    return f"{PREFACE_LEAD} {_query_content(query)}. {PREFACE_TAIL}"
