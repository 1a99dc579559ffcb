"""Matching keys shared by the offline extractor and composer (query side and sentence side alike)."""

from __future__ import annotations

import re
import unicodedata
from itertools import pairwise

from evident.alignment.lexicon import STOPWORDS, stem, term_weight, words
from evident.alignment.tokenize import tokenize
from evident.conversation.asking import message_parts, message_words

__all__ = [
    "CONTINUATIONS", "QUANTITY", "coverage", "content_keys", "entity_keys", "matched", "pairs", "query_terms",
    "query_weights", "scenario_keys", "unit_terms",
]

# Sentences opening with these lean on the previous one: they are quoted and shown with it.
CONTINUATIONS = frozenset(
    """it its this these that those they them such however otherwise then also instead additionally
    note alternatively therefore thus here""".split()
)

_HIRAGANA = re.compile(r"[\u3040-\u309f]")
_CJK_RUN = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+")


def _cjk_keys(run: str) -> list[str]:
    # CJK has no spaces, so a \w+ "word" is a whole clause; overlapping character pairs let a query
    # term match inside it. Pairs touching hiragana are mostly particles and inflections: dropped
    # when the run has content pairs without it.
    if len(run) == 1:
        return [run]
    grams = [run[i : i + 2] for i in range(len(run) - 1)]
    content = [g for g in grams if not _HIRAGANA.search(g)]
    return content or grams


# The key every number in a text carries beside its own ("60", "three", "2.weeks.ago"'s 2): what a
# question that asks for a quantity ("How many days ...?", "What size ...?") is answered by. It is the
# answer's type, not a word, so it never forms a word pair.
QUANTITY = "#quantity"
_NUMBER_WORDS = frozenset(
    """one two three four five six seven eight nine ten eleven twelve fifteen twenty thirty forty fifty
    sixty hundred thousand million billion dozen""".split()
)
# "How long/many/much ..." and "what/which size/port/..." ask for a quantity.
_HOW_QUANTITY = frozenset("long many much often soon far old big large".split())
_MEASURES = frozenset(
    """size port number amount age length limit percentage percent rate duration period fee cost price
    time""".split()
)


def _keys(word: str) -> list[str]:
    if _CJK_RUN.search(word):
        out: list[str] = []
        pos = 0
        for m in _CJK_RUN.finditer(word):
            out.extend(k for part in (word[pos : m.start()],) if part for k in _keys(part))
            out.extend(_cjk_keys(m.group()))
            pos = m.end()
        if word[pos:]:
            out.extend(_keys(word[pos:]))
        return out
    if word in STOPWORDS or (len(word) == 1 and not word.isdigit()):
        return []
    return [stem(word)]


def unit_terms(text: str) -> list[str]:
    """Stemmed content terms of `text` in order, stopwords removed (adjacency after removal counts), each
    number followed by `QUANTITY`."""
    out: list[str] = []
    for w in words(text):
        out.extend(_keys(w))
        if w in _NUMBER_WORDS or any(ch.isdigit() for ch in w):
            out.append(QUANTITY)
    return out


def pairs(seq: list[str]) -> list[tuple[str, str]]:
    return list(pairwise(t for t in seq if t != QUANTITY))


def content_keys(text: str) -> tuple[str, ...]:
    """All case-folded words: the identity of a sentence across documents, whatever its markup."""
    return tuple(words(text))


# "... if I never set it?", "without options", "unless I say otherwise", "if I have not configured any": the
# question asks for the default, which the text calls by that word ("The default is ...", "Defaults to ...").
_ASKS_DEFAULT = re.compile(
    r"\b(?:if|when) (?:i|you|we) (?:never|don't|do not|haven't|have not|didn't|did not)\b(?: \w+){0,2}? "
    r"(?:set|choose|chose|configure|configured|specify|specified|pick|change|changed|say|give)\b"
    r"|\bwithout (?:any )?(?:options|settings|configuration|arguments)\b|\bunless (?:i|you) say otherwise\b",
    re.IGNORECASE,
)
_DEFAULT = "default"


def query_terms(query: str) -> list[tuple[str, float]]:
    """The query's matching keys in order, each with a corpus-free prior weight: filler words count
    less, the scenario of a message less than its asking part, greetings and requests not at all."""
    out: dict[str, float] = {}
    message = message_words(query)
    for part, part_weight in message_parts(query):
        prev = ""
        for w in words(part):
            # "How long/many/often ..." names the question, rarely the answer: the word counts little,
            # and the answer's type (a number) counts as a term.
            asks = (prev == "how" and w in _HOW_QUANTITY) or (prev in ("what", "which") and w in _MEASURES)
            prior = 0.3 if prev == "how" and w in _HOW_QUANTITY else term_weight(w)
            prev = w
            weight = prior * part_weight if message.get(w, 1.0) > 0 else 0.0
            if weight <= 0:
                continue
            for key in _keys(w):
                out[key] = max(out.get(key, 0.0), weight)
            if asks:
                out[QUANTITY] = max(out.get(QUANTITY, 0.0), part_weight)
        if _ASKS_DEFAULT.search(part):
            key = stem(_DEFAULT)
            out[key] = max(out.get(key, 0.0), part_weight)
    return list(out.items())


def scenario_keys(query: str) -> frozenset[str]:
    """Keys that occur only in the scenario of the message, not in its asking part: they help
    choose among passages, but a passage that does not mention them can still answer."""
    asking: set[str] = set()
    scenario: set[str] = set()
    for part, weight in message_parts(query):
        keys = {k for w in words(part) for k in _keys(w)}
        (asking if weight >= 1.0 else scenario).update(keys)
    return frozenset(scenario - asking)


ENTITY_WEIGHT = 1.5


def entity_keys(query: str) -> frozenset[str]:
    """Keys of the query's names: capitalised words that do not open a sentence (Lisbon, GraphQL, SEV1).

    A question about a named thing is answered by text about that thing; names are also what a
    paraphrase cannot replace, so they weigh more and their absence counts more.
    """
    # The tokenizer with offsets (the same words as `words`): the case is read from the text as written.
    toks = tokenize(unicodedata.normalize("NFKC", query))
    out: set[str] = set()
    opening = True
    for key, start, end in zip(toks.tokens, toks.starts, toks.ends, strict=True):
        if not opening and any(ch.isupper() for ch in toks.text[start:end]):
            out.update(_keys(key))
        # The next token opens a sentence if only sentence punctuation and spaces lie in between.
        tail = toks.text[end : end + 3].lstrip(" \"'”’)")
        opening = tail[:1] in (".", "?", "!", ":")
    return frozenset(out)


def query_weights(query: str) -> dict[str, float]:
    """Corpus-free weights of the query's terms (filler words count less, names more)."""
    names = entity_keys(query)
    return {t: w * (ENTITY_WEIGHT if t in names else 1.0) for t, w in query_terms(query)}


def matched(weights: dict[str, float], present: frozenset[str] | set[str]) -> float:
    """The weight of the query terms `present` holds. The answer's type (`QUANTITY`) counts only beside
    a word of the question: "The canteen opens at 8:00." does not answer "How long is parental leave?"."""
    words_weight = sum(w for t, w in weights.items() if t in present and t != QUANTITY)
    return words_weight + weights.get(QUANTITY, 0.0) if words_weight > 0 and QUANTITY in present else words_weight


def coverage(weights: dict[str, float], text: str) -> float:
    """Share of the query's term weight that `text` contains."""
    total = sum(weights.values())
    if total <= 0:
        return 0.0
    return matched(weights, set(unit_terms(text))) / total
