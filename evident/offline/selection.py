"""Which of the quoted sentences an offline answer shows: those that share the question's words or read
on from the one before them, the best passage whole, cut to `OfflineSettings.max_sentences` by their
rank. Pure Python, no framework imports."""

from __future__ import annotations

from evident.conversation.asking import carried_part
from evident.conversation.said import said_before
from evident.offline.quotes import QuotedSentence
from evident.offline.terms import CONTINUATIONS, QUANTITY, content_keys, matched, query_weights, unit_terms
from evident.settings import DEFAULT_OFFLINE, OfflineSettings

__all__ = ["kept_orders", "select_sentences"]


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
    if s.parent is not None or _awaits_answer(prev):
        return True
    first = content_keys(s.text)[:1]
    return bool(first and first[0] in CONTINUATIONS)


def _on_topic(sentences: list[QuotedSentence]) -> list[QuotedSentence]:
    """The sentences that share a query term, or continue the kept sentence right before them; and the
    line a quote opens with when it leads to such a sentence (a definition's term, "gc.auto", above
    "The default value is 6700."): without it the sentence does not say what it is about."""
    kept: list[QuotedSentence] = []
    for n, s in enumerate(sentences):
        if s.relevance > 0:
            prev = sentences[n - 1] if n else None
            if prev is not None and prev.relevance <= 0 and (not kept or kept[-1] is not prev) \
                    and _opens(prev, sentences) and _answers(prev, s):
                kept.append(prev)
            kept.append(s)
        elif kept and _continues(kept[-1], s):
            s.carried = max(kept[-1].relevance, kept[-1].carried)
            kept.append(s)
    return kept


def _opens(s: QuotedSentence, sentences: list[QuotedSentence]) -> bool:
    """`s` is the first sentence of its quote."""
    return not any(o.passage == s.passage and o.order < s.order for o in sentences)


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
    asked = set(unit_terms(query)) - {QUANTITY}

    def named(s: QuotedSentence) -> bool | None:
        keys = set(unit_terms(s.key)) - {QUANTITY} if s.key is not None else set()
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
    by_order = {s.order: s for s in sentences}
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
        # The line its quote opens with, which says what it is about (`_on_topic`), comes with it too.
        opener = by_order.get(s.order - 1)
        if opener is not None and opener.order not in keep and opener.relevance <= 0 \
                and _opens(opener, sentences) and _answers(opener, s):
            group.insert(0, opener)
        room = cap if len(group) == 1 else max(cap, min(settings.max_long_sentences, cap + len(group) - 1))
        if len(keep) + len(group) <= room:
            keep.update(g.order for g in group)
    return keep


def select_sentences(
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
        s.relevance = matched(weights, present)
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
    # The extractor's best window (`QuotedSentence.lead`) ranked first on more than the question's words
    # (the heading above it, the page's rank): it leads the answer, kept whole.
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
    # So would a table's header row with none of its rows left: the columns of nothing.
    headed = {(s.passage, s.header) for s in sentences if s.kind == "row" and s.header != s.text}
    # What was kept only because it reads on from a label that is now gone goes with it.
    return _on_topic([s for s in sentences
                      if (s.kind != "label" or (s.order in kept_parents and s.order in own))
                      and not (s.kind == "row" and s.header == s.text and (s.passage, s.header) not in headed)])
