"""Offline composer answers in tests: verified decisions from quotes, and the answer read back as
(sentence, urls) pairs whose sentences are checked to be verbatim quote text."""

from __future__ import annotations

import re

from evident.alignment.models import AlignmentDecision
from evident.alignment.sentences import split_sentences
from evident.citations.answer import is_table, table_rows
from evident.offline.composer import OFFLINE_PREFACE

# Citations are bracketed URLs; other brackets ("[1]" footnotes) are source text.
_CITES = re.compile(r"((?:\[https?://[^\[\]\s]+\])+)")


# A page that says when unused leave expires, not whether it is paid out: asked the latter (`WEAK_QUESTION`), the
# offline gate admits it by a narrow margin and the answer hedges; asked `CLEAR_QUESTION`, it answers outright.
HANDBOOK = ("# Time off\n\nEmployees get 25 days of annual leave per year. Unused days expire on 31 March of the "
            "next year.\n\n## Sick leave\n\nSick leave is paid from the first day with a doctor's note.\n\n"
            "## Travel\n\nTravel is booked through the travel desk.\n\n## Pets\n\n"
            "Staff may bring a dog to the office on Fridays.\n")
WEAK_QUESTION = "Are unused vacation days paid out when I resign?"
CLEAR_QUESTION = "How many days of annual leave do I get?"


def decision(pid: str, url: str, quote: str, action: str = "kept") -> AlignmentDecision:
    return AlignmentDecision(
        passage_id=pid,
        action=action,  # type: ignore[arg-type]
        url=url,
        original_url=url,
        overlap=1.0 if action != "dropped" else 0.0,
        final_overlap=1.0 if action != "dropped" else 0.0,
        spans=[(0, len(quote))] if action != "dropped" else [],
        quote=quote if action != "dropped" else "",
        content=quote,
    )


def norm(text: str) -> str:
    return " ".join(text.split())


def cited_sentences(answer: str) -> list[tuple[str, list[str]]]:
    """(sentence, urls) pairs, a citation shared by the sentences before it; fails if any text is
    left without a citation after it."""
    body = answer
    if body.startswith(OFFLINE_PREFACE):
        body = body.removeprefix(OFFLINE_PREFACE)
    pieces = _CITES.split(body)
    assert not pieces[-1].strip(), f"uncited text at the end: {pieces[-1]!r}"
    out = []
    for text, cites in zip(pieces[0::2], pieces[1::2], strict=False):  # the last piece has no citation
        sentence = text.strip()
        if sentence.startswith("- "):
            sentence = sentence[2:]
        assert sentence, "a citation with no sentence before it"
        # Consecutive sentences of one stretch of text share one citation: each is read back with it.
        urls = re.findall(r"\[([^\[\]]+)\]", cites)
        if is_table(sentence):  # a table, cited on the line after it: each row is read back with it
            out.extend((row.strip("|").strip(), urls) for row in table_rows(sentence))
            continue
        out.extend((sentence[a:b], urls) for a, b in split_sentences(sentence))
    return out


def assert_grounded(answer: str, decisions: list[AlignmentDecision]) -> list[tuple[str, list[str]]]:
    pairs = cited_sentences(answer)
    for sentence, urls in pairs:
        for url in urls:
            quotes = [norm(d.quote) for d in decisions if d.url == url and d.action != "dropped"]
            assert any(norm(sentence) in q for q in quotes), (sentence, url)
    return pairs
