"""Extractive answer composer: the offline stand-in for the answer-generation LLM call.

Every sentence it writes is verbatim text of a verified quote (whitespace collapsed), followed by the
`[url]` of each document it came from. The only words of its own are the "does not explicitly state"
preface of weak answers. Pure Python, no framework imports.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from evident.alignment.aligner import QUOTE_JOINER
from evident.alignment.models import AlignmentDecision
from evident.context import DEFAULT_OFFLINE, OfflineSettings
from evident.conversation.asking import carried_part
from evident.conversation.said import said_before, said_text
from evident.offline.preface import OFFLINE_PREFACE, PREFACE, preface
from evident.offline.sentences import CONTINUATIONS, Kind, is_noise, split_units, strip_marker
from evident.offline.terms import content_keys, coverage, query_weights, unit_terms
from evident.offline.voice import PromptReader, unprompted

__all__ = ["WEAK_COVERAGE", "compose_answer", "answer_coverage", "preface", "OFFLINE_PREFACE", "PREFACE"]

# Below this share of the question's word weight in the shown sentences, the answer is weak: it opens
# with the one-line preface and shows its sentences as a list of details.
WEAK_COVERAGE = 0.5


@dataclass
class QuotedSentence:
    text: str
    bullet: bool
    label: bool
    passage: int
    order: int
    urls: list[str] = field(default_factory=list)
    # A table row's first cell: the thing the row is about ("TF-2202" in "TF-2202 | Authentication failed").
    key: str | None = None
    relevance: float = 0.0
    parent: int | None = None
    # A continuation ranks with the sentence it continues when the answer must be cut.
    carried: float = 0.0
    # A sentence merged into an earlier passage's copy, or text the quote left out ("…"), came right
    # before it: the sentence before it in the list is not the one before it in the source.
    after_gap: bool = False
    # One of the sentences (at least `strong_relevance` as on-topic as the best) the answer was made
    # longer than `max_sentences` for: kept before the others of later passages.
    strong: bool = False
    # Of the extractor's best window, kept whole and cut last.
    lead: bool = False
    # Holds a word of the new turn itself, not only words a follow-up carried over from the
    # conversation (always, for a first question or a turn that names nothing of its own).
    own: bool = True
    prompt: bool = False  # a FAQ prompt in the reader's voice (offline/voice.py): selected, not shown
    # The unit right before it in its quote is the sentence before it in the list (nothing skipped).
    adjacent: bool = False
    # A table row, with the header row of its table (the row above the |---| line; itself, for that
    # row), shown in a table of the rows kept.
    row: bool = False
    header: str | None = None


def answer_coverage(query: str, text: str) -> float:
    """Share of the query's content-term weight that `text` contains.

    A query with no content terms ("what is it?") has nothing to miss: 1.0 for any non-empty text.
    """
    weights = query_weights(query)
    if not weights:
        return 1.0 if text.strip() else 0.0
    return coverage(weights, text)


_TERMINAL = (".", "!", "?", ":", ";", "。", "！", "？", ")", '"', "”", "’")
_NOT_TITLE = re.compile(r"[-_=/.<>{}\[\]$`|@#]")


def _is_title(text: str) -> bool:
    """A short unpunctuated line standing alone: a heading that lost its markup in HTML extraction."""
    return (
        not text.endswith(_TERMINAL)
        and len(text.split()) <= 8
        and text[:1].isupper()
        and not _NOT_TITLE.search(text)
    )


def _units(part: str) -> list[tuple[str, Kind]]:
    """Units of one quote fragment, with the kinds alignment's trimming hides restored.

    Alignment quotes start at the first word, so a quote that began with "- " or "| " or "## " has
    lost the marker that made its first line an item, a row or a heading.
    """
    units = split_units(part)
    out: list[tuple[str, Kind]] = []
    for i, (s, e, kind) in enumerate(units):
        raw = part[s:e]
        nxt: Kind | None = units[i + 1][2] if i + 1 < len(units) else None
        alone = part[e : e + 4].lstrip(" \t").startswith(("\n\n", "\r\n\r\n")) or nxt is None
        if kind != "prose":
            pass
        elif alone and (i == 0 or part[:s].rstrip(" \t").endswith("\n\n")) and _is_title(raw):
            kind = "heading"
        elif i == 0 and nxt == "item" and not raw.endswith(":"):
            kind = "item"
        elif i == 0 and "|" in raw and (nxt == "row" or (raw.endswith("|") and "|" in raw[:-1])):
            # A row that lost its leading "| " still has the pipes between its cells; a sentence right
            # above a table has none.
            kind = "row"
        out.append((raw, kind))
    return out


_TABLE_RULE = "|-: \t"


def quoted_sentences(decisions: Sequence[AlignmentDecision]) -> list[QuotedSentence]:
    """Citable units of the quotes, in order, with duplicates merged under all their URLs."""
    out: list[QuotedSentence] = []
    by_key: dict[str, QuotedSentence] = {}
    for p, decision in enumerate(decisions):
        last_label: int | None = None
        gap = False
        for n, part in enumerate(decision.quote.split(QUOTE_JOINER)):
            gap = gap or n > 0  # the quote left text out between its parts ("…")
            units = _units(part)
            reader = PromptReader(part)
            shown_before = -2  # the index in `units` of the last unit appended from this part
            header_row: str | None = None
            for i, (raw, kind) in enumerate(units):
                if kind != "row":
                    header_row = None
                if kind in ("heading", "fence", "rule") or is_noise(raw, kind):
                    continue
                bullet = kind in ("item", "row", "code")
                text = " ".join((strip_marker(raw, kind) if kind in ("item", "row") else raw).split())
                if not content_keys(text):
                    continue
                prompt = reader.read(raw, text, bullet)
                # Merged only when identical (modulo spacing): the one sentence shown must be a
                # verbatim quote of every document it cites.
                if text in by_key:
                    seen = by_key[text]
                    if decision.url not in seen.urls:
                        seen.urls.append(decision.url)
                    gap = True
                    continue
                label = not bullet and text.endswith(":")
                sentence = QuotedSentence(text, bullet, label, p, len(out), [decision.url], after_gap=gap,
                                          prompt=prompt, adjacent=shown_before == i - 1)
                shown_before = i
                gap = False
                # A header row (the one above the |---| line) names the columns, not a thing.
                header = i + 1 < len(units) and not units[i + 1][0].strip(_TABLE_RULE)
                if kind == "row" and "|" in text and not header:
                    sentence.key = text.split("|", 1)[0]
                if kind == "row":
                    header_row = text if header else header_row
                    sentence.row, sentence.header = True, header_row
                sentence.parent = last_label if bullet else None
                if label:
                    last_label = sentence.order
                elif not bullet:
                    last_label = None
                by_key[text] = sentence
                out.append(sentence)
    return out


def _rank(s: QuotedSentence, decay: float) -> tuple[bool, bool, bool, float, int]:
    """When the answer must be cut: the best passage first, then the strong sentences, then those
    holding the new turn's own words (a follow-up's carried words alone keep the earlier topic), then by
    query-term relevance (a continuation's is the sentence's it continues) times `decay` ** its
    passage's place (`OfflineSettings.passage_decay`: the extractor ranked the passages on more than
    the question's words, and a follow-up's carried words reach pages about the earlier turn)."""
    return (not s.lead, not s.strong, not s.own, -max(s.relevance, s.carried) * decay ** s.passage, s.order)


def _continues(prev: QuotedSentence | None, s: QuotedSentence) -> bool:
    """`s` reads on from `prev`, the sentence right before it in the same quote: an item under its
    label, the text under a heading, the answer after a question ("Yes.", "Nothing."), any sentence
    of the best passage, or a sentence opening with "This", "It"..."""
    if prev is None or prev.passage != s.passage or prev.order != s.order - 1:
        return False
    # The best passage (the extractor's first window, at most a short paragraph) is read whole: the
    # sentence between two on-topic ones often says what to do in other words than the question's
    # ("Report it to security within one hour"), and "Learn more below to see whether you qualify."
    # completes it even without a question word.
    if s.lead:
        return True
    ends = prev.text.rstrip("\"'”’)")
    if s.parent is not None or ends.endswith((":", "?", "？")) or not ends.endswith((".", "!", ";", "。", "！")):
        return True
    first = content_keys(s.text)[:1]
    return bool(first and first[0] in CONTINUATIONS)


def _on_topic(sentences: list[QuotedSentence]) -> list[QuotedSentence]:
    """The sentences that share a query term, or continue the kept sentence right before them."""
    kept: list[QuotedSentence] = []
    for s in sentences:
        if s.relevance > 0:
            kept.append(s)
        elif kept and _continues(kept[-1], s):
            s.carried = max(kept[-1].relevance, kept[-1].carried)
            kept.append(s)
    return kept


def _folded(text: str) -> str:
    return " ".join(text.casefold().split()).rstrip(".!?;:")


def _unrepeated(sentences: list[QuotedSentence]) -> list[QuotedSentence]:
    """Without the sentences another one of the same page already says word for word ("Parking"
    inside "...free parking for visitors"): they add nothing, and their citation would resolve
    to the copy inside the other sentence instead of where they were quoted from."""
    folded = [_folded(s.text) for s in sentences]
    return [
        s for i, s in enumerate(sentences)
        if not any(
            j != i and folded[i] in folded[j] and (folded[i] != folded[j] or j < i) and set(s.urls) & set(o.urls)
            for j, o in enumerate(sentences)
        )
    ]


def _unsaid(sentences: list[QuotedSentence], said: str) -> list[QuotedSentence]:
    """Without the sentences an earlier answer of the conversation already gave (`said`, folded),
    when the question finds something new: a follow-up is answered by what it adds. When every
    relevant sentence was said before, the new turn asks for them again and they stay."""
    if not said:
        return sentences
    new = [s for s in sentences if not said_before(s.text, said)]
    return new if any(s.relevance > 0 for s in new) else sentences


def _named_rows(sentences: list[QuotedSentence], query: str) -> list[QuotedSentence]:
    """Without the table rows about something else than the row the question names: asked about
    "error TF-2202", the rows of TF-2301 and TF-2401 share only their columns' words ("The pipeline
    stops") with the question. A row is named when every word of its first cell is in the question;
    the other rows of a passage (one table window) go only when one of its rows is named. A first cell
    of one- or two-digit numbers is a row number ("the 3 steps" names no step), not a name."""
    asked = set(unit_terms(query))

    def named(s: QuotedSentence) -> bool | None:
        keys = set(unit_terms(s.key)) if s.key is not None else set()
        if not keys or all(k.isdigit() and len(k) < 3 for k in keys):
            return None
        return keys <= asked

    tables = {s.passage for s in sentences if named(s)}
    return [s for s in sentences if s.passage not in tables or named(s) is not False]


def _awaits_answer(s: QuotedSentence) -> bool:
    """`s` does not end like a sentence: a question, a title or a label, which the next sentence answers."""
    ends = s.text.rstrip("\"'”’)")
    return ends.endswith((":", "?", "？")) or not ends.endswith((".", "!", ";", "。", "！"))


def _answers(s: QuotedSentence, answer: QuotedSentence) -> bool:
    """`answer`, the sentence after `s` in the list, is what the question or title line `s` leads to."""
    return not s.bullet and _awaits_answer(s) and answer.passage == s.passage and not answer.after_gap


def kept_orders(sentences: list[QuotedSentence], cap: int, settings: OfflineSettings = DEFAULT_OFFLINE) -> set[int]:
    """The orders of the `cap` best-ranked sentences. A question, title or label comes with the
    sentence right after it in the source ("Can I take unused leave into next year?" "Yes."; "Apply
    at your local office" and its first sentence): shown without it, it promises an answer the reader
    does not get. Such a pair may take the last place and one more, up to
    `settings.max_long_sentences`. When that sentence is not in the list right after it (merged into an earlier
    page's copy, or left out of the quote: `after_gap`), the line is ranked on its own."""
    following = {s.order - 1: s for s in sentences}
    keep: set[int] = set()
    for s in sorted(sentences, key=lambda s: _rank(s, settings.passage_decay)):
        if len(keep) >= cap:
            break
        if s.order in keep:
            continue
        group = [s]
        answer = following.get(s.order)
        if answer is not None and _answers(s, answer):
            group.append(answer)
        room = cap if len(group) == 1 else max(cap, min(settings.max_long_sentences, cap + len(group) - 1))
        if len(keep) + len(group) <= room:
            keep.update(g.order for g in group)
    return keep


def _select(
    sentences: list[QuotedSentence], query: str, settings: OfflineSettings, said: str = ""
) -> list[QuotedSentence]:
    """Usually `settings.max_sentences` (up to `max_long_sentences`, see there), preferring those that
    share query terms, kept in source order; sentences already said (`_unsaid`) only when nothing new
    is found."""
    weights = query_weights(query)
    own_text, carried = carried_part(query)
    own_terms = set(query_weights(own_text)) if carried else set()
    for s in sentences:
        present = set(unit_terms(s.text))
        s.relevance = sum(w for t, w in weights.items() if t in present)
        s.own = not own_terms or bool(own_terms & present)
    own = {s.order for s in sentences if s.relevance > 0}
    for s in sentences:
        # A list item is as relevant as the label that introduces it, and the label as its best item.
        if s.parent is not None:
            label = sentences[s.parent]
            s.relevance = max(s.relevance, label.relevance)
            label.relevance = max(label.relevance, s.relevance)
    # A passage's topicality counts the sentences an earlier answer gave.
    best: dict[int, float] = {}
    for s in sentences:
        best[s.passage] = max(best.get(s.passage, 0.0), s.relevance)
    # After the labels lent their relevance (they are found by position in the full list).
    sentences = _unsaid(sentences, said)
    # The extractor's best window ranked first on more than the question's words (the heading above
    # it, the page's rank): it leads the answer, kept whole.
    for s in sentences:
        s.lead = s.passage == 0
    sentences = _on_topic(_named_rows(_unrepeated(sentences), query))
    # A passage is read from its start: when the answer is cut, its first on-topic sentence ranks
    # with the passage's best one (the rule a page states before the link that explains it).
    opener: dict[int, QuotedSentence] = {}
    for s in sentences:
        opener.setdefault(s.passage, s)
    for s in opener.values():
        if s.relevance > 0:
            s.carried = max(s.carried, best[s.passage])
    top_relevance = max((s.relevance for s in sentences), default=0.0)
    strong_floor = settings.strong_relevance * top_relevance
    strong = sum(1 for s in sentences if s.relevance >= strong_floor)
    whole = sum(1 for s in sentences if s.lead)
    cap = min(settings.max_long_sentences, max(settings.max_sentences, whole, strong))
    # An answer made longer for its strong sentences keeps those: a weaker sentence of an earlier
    # passage does not take the place of one the answer was lengthened for.
    if strong > max(settings.max_sentences, whole):
        for s in sentences:
            s.strong = s.relevance >= strong_floor
    while len(sentences) > cap:
        keep = kept_orders(sentences, cap, settings)
        # A continuation whose lead was cut would now follow the wrong sentence.
        trimmed = _on_topic([s for s in sentences if s.order in keep])
        if len(trimmed) == len(sentences):
            break  # a question and its answer took the last place and one more
        sentences = trimmed
    # A label with none of its items left would dangle ("Not available for:" and nothing after).
    # A label sharing no word with the question ("Breaking changes:") would open the answer's next
    # paragraph off-topic: its items stand as bullets without it.
    kept_parents = {s.parent for s in sentences if s.parent is not None}
    # What was kept only because it reads on from a label that is now gone goes with it.
    return _on_topic([s for s in sentences if not s.label or (s.order in kept_parents and s.order in own)])


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
        if s.row and isinstance(last, list) and last[-1].passage == s.passage and last[-1].header == s.header:
            last.append(s)
        elif s.row:
            out.append([s])
        else:
            out.append(s)
    return out


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
                   settings: OfflineSettings = DEFAULT_OFFLINE, said: Sequence[str] = ()) -> str:
    """An extractive, fully cited answer from the verified (non-dropped) decisions, in the order given.

    `said` holds the conversation's earlier answers: a sentence one of them already gave is left
    out, unless no other sentence answers the question.

    When the chosen sentences cover less than `WEAK_COVERAGE` of the query's term weight, the
    answer is the one-line "does not explicitly state" preface followed by the details as bullets. "" when nothing
    citable is left.
    """
    live = [d for d in decisions if d.action != "dropped" and d.quote.strip()]
    # A verified passage none of whose sentences are shown is not cited (drops.NOT_CHOSEN).
    earlier = said_text(said)
    sentences = unprompted(selected := _select(every := quoted_sentences(live), query, settings, earlier), every)
    if not sentences:
        return ""
    covered = answer_coverage(query, " ".join(s.text for s in selected))  # a prompt says what is answered
    if covered < WEAK_COVERAGE:
        return _render_weak(sentences)
    return _render(sentences)
