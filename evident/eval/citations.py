"""Cited facts of an answer (paper §6.2: the text preceding each citation is one fact).

EvidenT and its offline mode cite `[url]`; the baselines (App. B, C) cite reference numbers such as
`[1]` or `[1, 2]` and list `[1] url` under a closing "References" heading. A number is resolved
through that list first (it is what the reader sees), else to the numbered document of the prompt;
a number that resolves to nothing stays as `[k]`, a citation outside the retrieved set.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from evident.eval.records import CitedFact
from evident.models import INSUFFICIENT_ANSWER

_REFERENCES = re.compile(r"^\s*[#*_ ]*(?:references|sources)[*_ ]*:?[*_ ]*(?P<rest>.*)$", re.I | re.M)
_REFERENCE_ITEM = re.compile(r"\[?(?P<num>\d{1,3})[\].):]?\s*[-–:]?\s*<?(?P<url>[a-zA-Z][\w+.-]*:[^\s>\]]+)")
_GROUP = re.compile(
    r"(?:\[\s*(?:\d{1,3}|[a-zA-Z][\w+.-]*:[^\]\s]+)(?:\s*[,;]\s*(?:\d{1,3}|[a-zA-Z][\w+.-]*:[^\]\s]+))*\s*\]\s*)+"
)
_ITEM = re.compile(r"\d{1,3}|[a-zA-Z][\w+.-]*:[^\]\s,;]+")


def is_abstention(answer: str) -> bool:
    """The fixed "Not sufficient information to answer." reply (punctuation and case aside)."""
    flat = " ".join(answer.split()).casefold().rstrip(".! ")
    return flat.startswith(INSUFFICIENT_ANSWER.casefold().rstrip("."))


def split_references(answer: str) -> tuple[str, dict[int, str]]:
    """The answer body and its reference list `{number: url}`."""
    m = None
    for found in _REFERENCES.finditer(answer):
        m = found  # the last heading: "references" may also appear in the body
    if m is None:
        return answer, {}
    body, tail = answer[: m.start()], answer[m.start("rest"):]
    refs: dict[int, str] = {}
    for item in _REFERENCE_ITEM.finditer(tail):
        refs.setdefault(int(item["num"]), item["url"].rstrip(".,;"))
    return body, refs


def numbered_facts(answer: str, documents: Sequence[str]) -> list[CitedFact]:
    """Facts of a reference-numbered (or `[url]`) answer; `documents` are the prompt's URLs, 1-based."""
    body, refs = split_references(answer)
    facts: list[CitedFact] = []
    pos = 0
    for group in _GROUP.finditer(body):
        sentence = " ".join(body[pos : group.start()].split())
        pos = group.end()
        for token in _ITEM.findall(group.group(0)):
            if token.isdigit():
                k = int(token)
                url = refs.get(k) or (documents[k - 1] if 1 <= k <= len(documents) else f"[{k}]")
            else:
                url = token
            if not re.search(r"\w", sentence) and facts:
                sentence = facts[-1].sentence  # "… [1], [2]." after one sentence: both cite it
            facts.append(CitedFact(sentence=sentence, url=url))
    return facts
