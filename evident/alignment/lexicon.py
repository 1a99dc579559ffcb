"""Words and their matching keys, shared by the offline engine, the conversation rules and the support check.

`words` is the plain word tokenizer (the same tokens as alignment's, without offsets), `STOPWORDS` the one
stop-word list and `stem` the stemmer of every word comparison EvidenT makes itself: the offline engine, the
conversation rules, the asking part of a message, the support check and the index's title keys go through
them, and every search engine is given the words of `words` without `SEARCH_STOPWORDS` (part of the list;
`asking.search_terms`). The engines stem those words with the analyzer their index was built with (Tantivy's
English stemmer, FTS5's porter tokenizer in its fallback, PostgreSQL's text search configuration), since a
query token must be one the index holds (docs/sources.md, "Words and scores").
"""

from __future__ import annotations

from functools import lru_cache

from evident.alignment.tokenize import words

__all__ = ["FILLER", "SEARCH_STOPWORDS", "STOPWORDS", "content_terms", "stem", "term_weight", "words"]

# Deliberately small: question words and function words carry no evidence, but domain words
# such as "limit" or "policy" must survive. Two groups, one list: the glue of a sentence, which a search
# leaves out too (`SEARCH_STOPWORDS`), and the words a question asks with or that say how much, when or
# whether ("need", "many", "after", "not", "only"), which a search still gives, lightly
# (`asking.weighted_terms`): a page saying "too many records" or "only apply to my own clone" in those
# words may be the page asked about. Searched or not, they never name a question's topic, so every
# comparison EvidenT makes leaves out the whole list (`STOPWORDS`). Leaving both groups out of searches
# measured worse on the example questions (docs/sources.md, "Words and scores").
SEARCH_STOPWORDS: frozenset[str] = frozenset(
    """a an and are as at be been being but by can could did do does doing for from had has have having
    he her hers him his how i if in into is it its itself me my of on or our ours she so than that the
    their theirs them then there these they this those to too us was we were what when where which
    while who whom why will with would you your yours""".split()
)
STOPWORDS: frozenset[str] = SEARCH_STOPWORDS | frozenset(
    """about above after again all am any because before below between both down during each few
    further here just more most no nor not off once only other out over own same should some such
    through under until up very tell please know need want get got much many let""".split()
)


def content_terms(text: str) -> list[str]:
    """Distinct content words of `text` (no stopword, no single letter but a digit), in first-seen order."""
    seen: dict[str, None] = {}
    for w in words(text):
        if w not in STOPWORDS and (len(w) > 1 or w.isdigit()):
            seen.setdefault(w, None)
    return list(seen)


# Words people put in questions that rarely appear in the answering sentence; they still count,
# but lightly, so that a paraphrase-only word does not make a real question look unanswerable.
FILLER: frozenset[str] = frozenset(
    """able possible exactly currently actually really also still anything something anyone
    someone everything explain describe happens happen mean means way ways thing things kind
    sort go going like new okay ok""".split()
)


@lru_cache(maxsize=65536)
def stem(word: str) -> str:
    """Light suffix stripping so that inflections meet: limits/limit, submitted/submit, rates/rated/rate.

    Not a linguistic stemmer: it only has to map a word and its common inflections to the same key,
    and it leaves short, non-alphabetic or unknown shapes alone rather than guess.
    """
    w = word
    if len(w) <= 3 or not w.isalpha():
        return w
    # An adverb meets its adjective: "upgrade directly" / "direct upgrades". Only from 7 letters:
    # "family" and "supply" are no adverbs, at the price of "weekly" staying apart from "week".
    if w.endswith("ly") and len(w) >= 7:
        w = w[:-2]
    # US and UK spellings meet: itemized/itemised, organization/organisation.
    if "iz" in w and w.endswith(("ize", "izes", "ized", "izing", "ization", "izations")):
        w = w[: w.rindex("iz")] + "is" + w[w.rindex("iz") + 2 :]
    if w.endswith(("ies", "ied")) and len(w) > 4:
        w = w[:-3] + "y"
    elif w.endswith("sses"):
        w = w[:-2]
    elif w.endswith(("ss", "us", "is")):
        pass
    elif w.endswith("ing") and len(w) - 3 >= 3:
        w = w[:-3]
    elif w.endswith("ed") and len(w) - 2 >= 3:
        w = w[:-2]
    elif w.endswith("es") and w[:-2].endswith(("s", "x", "z", "ch", "sh")):
        w = w[:-2]
    elif w.endswith("s"):
        w = w[:-1]
    # rotation/rotate, deletion/delete, validation/validate (only -tion: other nominalisations vary).
    if w.endswith("tion") and len(w) > 6:
        w = w[:-3]
    # submitt -> submit, bill -> bil (applied to every word, so bill/billed/billing agree; "ss" stays
    # so that access/accessed agree).
    if len(w) > 3 and w[-1] == w[-2] and w[-1] not in "aeious":
        w = w[:-1]
    # rate/rated/rating and make/making end on the same key once a final e is dropped.
    if len(w) > 3 and w.endswith("e") and not w.endswith("ee"):
        w = w[:-1]
    return w


def term_weight(term: str) -> float:
    """Prior weight of a query term before any corpus statistics (filler words count less)."""
    return 0.3 if term in FILLER else 1.0


# Words that carry no content of their own: left out of the content words a sentence is compared by. Not
# STOPWORDS, which leave out what never names a question's topic: "before" or "after", "all" or "only", "can"
# or "should" change what a sentence states, so the support check compares them.
FUNCTION_WORDS = frozenset(
    """a an the this that these those it its they them their theirs there here
    i me my we us our ours you your yours he him his she her hers one
    is are was were be been being am do does did done have has had having
    of in on at by for from to into onto with as than then so such
    and or but nor if whether which who whom whose what when where how why
    also just very too about per via s""".split()
)
# All negations count as one ("must never" restates "must not"); "t" is what remains of "n't".
NEGATIONS = frozenset("not no never none nor neither nothing nobody nowhere cannot without t".split())
NOT = "not"


def content_tokens(text: str) -> list[str]:
    """The stemmed content words of `text`, every negation as "not": what verify and the evidence measure
    count as one notion of "content word"."""
    # "s" is a function word because `words` splits "trip's" into "trip", "s".
    return [NOT if t in NEGATIONS else stem(t) for t in words(text) if t not in FUNCTION_WORDS]
