"""Extractive answer composer: the offline stand-in for the answer-generation LLM call.

Every sentence it writes is verbatim text of a verified quote (whitespace collapsed), followed by the
`[url]` of each document it came from. The only words of its own are the "does not explicitly state"
preface of weak answers. Pure Python, no framework imports.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Sequence

from evident.alignment.models import AlignmentDecision
from evident.offline.sentences import is_noise, split_units, strip_marker
from evident.offline.terms import content_keys, coverage, query_weights, unit_terms

__all__ = ["compose_answer", "answer_coverage", "preface", "PREFACE_LEAD", "PREFACE_TAIL", "MAX_SENTENCES"]

PREFACE_LEAD = "The documentation does not explicitly state"
PREFACE_TAIL = "Here are some details from the documentation which may help:"
MAX_SENTENCES = 8
PASSAGE_RELEVANCE = 0.5
# Alignment joins the non-adjacent spans of one quote with this separator.
_GAP = " … "


@dataclass
class _Sentence:
    text: str
    bullet: bool
    label: bool
    passage: int
    order: int
    key: tuple[str, ...]
    urls: list[str] = field(default_factory=list)
    relevance: float = 0.0
    parent: int | None = None


def answer_coverage(query: str, text: str) -> float:
    """Share of the query's content-term weight that `text` contains (1.0 for a query with no terms)."""
    weights = query_weights(query)
    if not weights:
        return 1.0 if text.strip() else 0.0
    return coverage(weights, text)


_LEADS = [
    (re.compile(r"^(?:how)\s+(?:do|can|should|would|could)\s+(?:i|we|you)\s+(.+)$", re.I), "how to {}"),
    (re.compile(r"^(?:can|could|may|should)\s+(?:i|we|you)\s+(.+)$", re.I), "whether you can {}"),
    (re.compile(r"^(?:is it possible to)\s+(.+)$", re.I), "whether it is possible to {}"),
    (re.compile(r"^what\s+(is|are)\s+(.+)$", re.I), "what {1} {0}"),
]
_PRONOUNS = {"i": "you", "me": "you", "my": "your", "mine": "yours", "myself": "yourself", "am": "are"}


def _query_content(query: str) -> str:
    """The query as a clause after "does not explicitly state" (a quoted fallback when unsure)."""
    q = " ".join(query.split()).rstrip("?.!？！。 ")
    if not q:
        return "the answer to this question"
    for pattern, template in _LEADS:
        m = pattern.match(q)
        if m:
            parts = [re.sub(r"\b(\w+)\b", lambda w: _PRONOUNS.get(w.group(1).lower(), w.group(1)), g) for g in m.groups()]
            return template.format(*parts)
    return f'the answer to "{q}?"'


def preface(query: str) -> str:
    """The weak-evidence lead-in of App. D.2 (fixed wording, so the verify step can recognise it)."""
    return f"{PREFACE_LEAD} {_query_content(query)}. {PREFACE_TAIL}"


def _sentences(decisions: Sequence[AlignmentDecision]) -> list[_Sentence]:
    """Citable units of the quotes, in order, with duplicates merged under all their URLs."""
    out: list[_Sentence] = []
    by_key: dict[tuple[str, ...], _Sentence] = {}
    for p, decision in enumerate(decisions):
        last_label: int | None = None
        for part in decision.quote.split(_GAP):
            for s, e, kind in split_units(part):
                raw = part[s:e]
                if kind in ("heading", "fence", "rule") or is_noise(raw):
                    continue
                bullet = kind in ("item", "row", "code")
                text = " ".join((strip_marker(raw) if kind in ("item", "row") else raw).split())
                key = content_keys(text)
                if not key:
                    continue
                if key in by_key:
                    seen = by_key[key]
                    if decision.url not in seen.urls:
                        seen.urls.append(decision.url)
                    continue
                label = not bullet and text.endswith(":")
                sentence = _Sentence(text, bullet, label, p, len(out), key, [decision.url])
                sentence.parent = last_label if bullet else None
                if label:
                    last_label = sentence.order
                elif not bullet:
                    last_label = None
                by_key[key] = sentence
                out.append(sentence)
    return out


def _select(sentences: list[_Sentence], query: str) -> list[_Sentence]:
    """At most MAX_SENTENCES, preferring those that share query terms, kept in source order."""
    weights = query_weights(query)
    for s in sentences:
        present = set(unit_terms(s.text))
        s.relevance = sum(w for t, w in weights.items() if t in present)
    for s in sentences:
        # A list item is as relevant as the label that introduces it, and the label as its best item.
        if s.parent is not None:
            label = sentences[s.parent]
            s.relevance = max(s.relevance, label.relevance)
            label.relevance = max(label.relevance, s.relevance)
    # Passages far less on-topic than the best one make the answer longer, not better.
    best: dict[int, float] = {}
    for s in sentences:
        best[s.passage] = max(best.get(s.passage, 0.0), s.relevance)
    top = max(best.values(), default=0.0)
    sentences = [s for s in sentences if best[s.passage] >= PASSAGE_RELEVANCE * top]
    if len(sentences) > MAX_SENTENCES:
        ranked = sorted(sentences, key=lambda s: (-s.relevance, s.order))[:MAX_SENTENCES]
        keep = {s.order for s in ranked}
        sentences = [s for s in sentences if s.order in keep]
    # A label with none of its items left would dangle ("Not available for:" and nothing after).
    kept_parents = {s.parent for s in sentences if s.parent is not None}
    return [s for s in sentences if not s.label or s.order in kept_parents]


def _cite(s: _Sentence) -> str:
    return f"{s.text} " + "".join(f"[{u}]" for u in s.urls)


def _render(sentences: list[_Sentence]) -> str:
    blocks: list[str] = []
    paragraph: list[str] = []
    passage = -1
    bullets: list[str] = []

    def flush() -> None:
        if paragraph:
            blocks.append(" ".join(paragraph))
            paragraph.clear()
        if bullets:
            blocks.append("\n".join(bullets))
            bullets.clear()

    for s in sentences:
        if s.bullet:
            if paragraph:
                flush()
            bullets.append(f"- {_cite(s)}")
            continue
        if bullets or (paragraph and s.passage != passage):
            flush()
        paragraph.append(_cite(s))
        passage = s.passage
    flush()
    return "\n\n".join(blocks)


def _render_weak(query: str, sentences: list[_Sentence]) -> str:
    lines = [preface(query)]
    for s in sentences:
        nested = s.bullet and s.parent is not None and any(x.order == s.parent for x in sentences)
        lines.append(("  - " if nested else "- ") + _cite(s))
    return "\n".join(lines)


def compose_answer(query: str, decisions: Sequence[AlignmentDecision], *, weak_coverage: float = 0.5) -> str:
    """An extractive, fully cited answer from the verified (non-dropped) decisions, in the order given.

    When the chosen sentences cover less than `weak_coverage` of the query's term weight, the answer
    is the "does not explicitly state" preface followed by the details as bullets. "" when nothing
    citable is left.
    """
    live = [d for d in decisions if d.action != "dropped" and d.quote.strip()]
    sentences = _select(_sentences(live), query)
    if not sentences:
        return ""
    covered = answer_coverage(query, " ".join(s.text for s in sentences))
    if covered < weak_coverage:
        return _render_weak(query, sentences)
    return _render(sentences)
