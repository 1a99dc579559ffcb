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
