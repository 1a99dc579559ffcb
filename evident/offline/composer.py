"""Extractive answer composer: the offline stand-in for the answer-generation LLM call.

Every sentence it writes is verbatim text of a verified quote (whitespace collapsed), followed by the
`[url]` of each document it came from. The only words of its own are the "does not explicitly state"
preface of weak answers. The sentences are read from the quotes by `evident.offline.quotes` and chosen
by `evident.offline.selection`; this module lays them out. Pure Python, no framework imports.
"""

from __future__ import annotations

from collections.abc import Sequence

from evident.alignment.models import AlignmentDecision
from evident.conversation.said import said_text
from evident.offline.preface import OFFLINE_PREFACE, PREFACE, preface
from evident.offline.quotes import QuotedSentence, quoted_sentences
from evident.offline.selection import select_sentences
from evident.offline.terms import coverage, query_weights, scenario_keys, unit_terms
from evident.settings import DEFAULT_OFFLINE, OfflineSettings

__all__ = ["WEAK_COVERAGE", "compose_answer", "answer_coverage", "preface", "OFFLINE_PREFACE", "PREFACE"]

# Below this share of the question's word weight in the shown sentences, the answer is weak: it opens
# with the one-line preface and shows its sentences as a list of details.
WEAK_COVERAGE = 0.5


def answer_coverage(query: str, text: str) -> float:
    """Share of the query's content-term weight that `text` contains.

    A query with no content terms ("what is it?") has nothing to miss: 1.0 for any non-empty text.
    """
    weights = query_weights(query)
    if not weights:
        return 1.0 if text.strip() else 0.0
    # As the gate's coverage (`Scorer.coverage`): the scenario's words count only where they match, so a
    # message that tells its situation before asking does not read as weakly answered for its length.
    present = set(unit_terms(text))
    scenario = scenario_keys(query)
    return coverage({t: w for t, w in weights.items() if t not in scenario or t in present}, text)

def _cite(s: QuotedSentence) -> str:
    return f"{s.text} " + "".join(f"[{u}]" for u in s.urls)


def _same_stretch(s: QuotedSentence, nxt: QuotedSentence) -> bool:
    """`nxt` reads on from `s` in the same stretch of source text, quoted from the same pages: the two
    share one citation, which then resolves to the whole stretch (the reader sees one highlight)."""
    return (not s.bullet and not nxt.bullet and nxt.passage == s.passage and nxt.order == s.order + 1
            and nxt.adjacent and not nxt.after_gap and nxt.urls == s.urls)


def _table(rows: list[QuotedSentence]) -> str:
    """Rows of one table as a Markdown table under their header row (the first row, when the quote
    has none), every line the source's cells, then the rows' citations on a line of their own."""
    header = rows[0].header or rows[0].text
    body = [r.text for r in rows if r.text != header]
    columns = header.count("|") + 1
    lines = [f"| {header} |", "|" + "---|" * columns, *(f"| {text} |" for text in body)]
    urls = dict.fromkeys(u for r in rows for u in r.urls)
    return "\n".join(lines) + "\n\n" + "".join(f"[{u}]" for u in urls)


def _tables(sentences: list[QuotedSentence]) -> list[QuotedSentence | list[QuotedSentence]]:
    """`sentences` with each run of rows of one table (one passage, one header) gathered in a list."""
    out: list[QuotedSentence | list[QuotedSentence]] = []
    for s in sentences:
        last = out[-1] if out else None
        if s.kind != "row":
            out.append(s)
        elif isinstance(last, list) and last[-1].passage == s.passage and last[-1].header == s.header:
            last.append(s)
        else:
            out.append([s])
    return out


def _page_by_page(sentences: list[QuotedSentence]) -> list[QuotedSentence]:
    """`sentences` grouped by the page they are quoted from, the pages in the order the answer first cites
    them, each page's sentences in their order: an answer never goes back and forth between pages, so the
    reader reads each page's quotes together (a passage ranked lower on the first page is still its text)."""
    first: dict[str, int] = {}
    for s in sentences:
        first.setdefault(s.urls[0], len(first))
    return sorted(sentences, key=lambda s: first[s.urls[0]])


def _render(sentences: list[QuotedSentence]) -> str:
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

    items = _tables(sentences)
    for n, s in enumerate(items):
        if isinstance(s, list):
            flush()
            blocks.append(_table(s))
            continue
        if s.bullet:
            if paragraph:
                flush()
            bullets.append(f"- {_cite(s)}")
            continue
        if bullets or (paragraph and s.passage != passage):
            flush()
        nxt = items[n + 1] if n + 1 < len(items) else None
        paragraph.append(s.text if isinstance(nxt, QuotedSentence) and _same_stretch(s, nxt) else _cite(s))
        passage = s.passage
    flush()
    return "\n\n".join(blocks)


def _render_weak(sentences: list[QuotedSentence]) -> str:
    lines = [preface()]
    for s in _tables(sentences):
        if isinstance(s, list):
            lines.extend(["", _table(s), ""])
            continue
        nested = s.bullet and s.parent is not None and any(x.order == s.parent for x in sentences)
        lines.append(("  - " if nested else "- ") + _cite(s))
    return "\n".join(lines).rstrip()


def compose_answer(query: str, decisions: Sequence[AlignmentDecision], *,
                   settings: OfflineSettings = DEFAULT_OFFLINE, said: Sequence[str] = (), weak: bool = False) -> str:
    """An extractive, fully cited answer from the verified (non-dropped) decisions, in the order given.

    `said` holds the conversation's earlier answers: a sentence one of them already gave is left
    out, unless no other sentence answers the question.

    When the evidence is `weak` (`extractor.Extraction.weak`: the gate admitted it by a narrow margin) or
    the chosen sentences cover less than `WEAK_COVERAGE` of the query's term weight, the answer is the
    one-line "does not explicitly state" preface followed by the details as bullets. "" when nothing
    citable is left.
    """
    live = [d for d in decisions if d.action != "dropped" and d.quote.strip()]
    # A verified passage none of whose sentences are shown is not cited (drops.NOT_CHOSEN).
    earlier = said_text(said)
    sentences = _page_by_page(select_sentences(quoted_sentences(live), query, settings, earlier))
    if not sentences:
        return ""
    if weak or answer_coverage(query, " ".join(s.text for s in sentences)) < WEAK_COVERAGE:
        return _render_weak(sentences)
    return _render(sentences)
