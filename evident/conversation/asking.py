"""The asking part of a message: which sentences ask, and how much each word of the message weighs.

People write "Hello. I just moved to New York and registered my car. I need help with inspection
rules": a greeting, a scenario, then what they ask. Greetings and the phrases around a request
("I was wondering", "could you help me") name nothing a document says; the asking part names what
the answer must say; the scenario helps choose between pages but must not outweigh the question.
Retrieval (`weighted_terms`: the words every search engine is given, see docs/sources.md, "Words and
scores") and the offline engine (`evident.offline.terms`) weigh a message's words by it. Framework-free.
"""

from __future__ import annotations

import re
import unicodedata

from evident.alignment.lexicon import SEARCH_STOPWORDS, STOPWORDS, words

__all__ = ["CARRIED_WEIGHT", "CHAT", "MAX_TERMS", "MIN_ASKING_WORDS", "SCENARIO_WEIGHT", "carried_part",
           "message_parts", "message_words", "search_terms", "weighted_terms"]

# Words of greetings, thanks and requests: never evidence, so they weigh nothing in retrieval or
# matching (a rare one like "regarding" would otherwise outrank the topic words).
CHAT: frozenset[str] = frozenset(
    """hello hi hey hiya greetings morning afternoon evening good day thanks thank cheers dear sir madam
    wondering wonder wondered curious question questions ask asking asked inquire inquiry enquire enquiry
    information info details help helping assist assistance support regarding concerning related relating
    looking look find finding learn wanted wants needed like love hoping hope trying try am im ve ll
    provide give show explain guide guidance advice advise kindly okay ok yes sure things stuff topic
    something someone anything somebody anyone little bit few some could would today doing came come
    comes coming understand understanding obtain""".split()
)
# The frames of a question weigh nothing where they frame it, "what kind of", "any sort of", "be able
# to", "is it possible to": "kind" is rarer in pages than "documents" or "card", and for "What kind of
# documents are required to get a card?" ranked a moped page ("other kinds of proof") above the card
# pages (rule 54). Elsewhere the same words can be the topic: "an ABLE account", "in-kind support",
# "sort the report by date".
_FRAME = re.compile(
    r"\b(?:kinds?|sorts?)\s+of\b|\bable\s+to\b|\bpossible\s+(?:to|for|that)\b|\b(?:it|that|this)\s+possible\b",
    re.IGNORECASE,
)
_FRAME_WORDS = frozenset("kind kinds sort sorts able possible".split())


def _framed(part: str) -> set[str]:
    """The frame words of one sentence that frame it there ("kind" in "what kind of")."""
    return {w for m in _FRAME.finditer(part) for w in words(m.group()) if w in _FRAME_WORDS}


def _topic_words(part: str) -> set[str]:
    """The words of one sentence that name something: no chat word, stopword or frame."""
    framed = _framed(part)
    return {w for w in words(part) if w not in CHAT and w not in STOPWORDS and w not in framed}


# A sentence asks when it ends with "?" or opens like a question or a request.
_ASK_OPENERS = frozenset(
    """how what when where why who whom whose which can could do does did is are was were will would
    should shall may might must am have has tell explain""".split()
)
_REQUEST = re.compile(
    r"\b(?:i|we)\s*(?:'d|would|\w*)?\s*(?:like|want|wanted|need|needed|wish|hope|hoping)\s+(?:to\s+)?"
    r"(?:know|learn|find|understand|ask|get|see|check)\b|\bwondering\b|\btell me\b|\bhelp me\b|\bi need\b"
    r"|\bi want\b|\blooking (?:for|to)\b|\bquestions? (?:about|on|regarding)\b|\binformation (?:about|on)\b"
)
_SENTENCE_END = re.compile(r"(?<=[.?!])\s+|\n+")
# What "isn't", "I'm" and "you'll" leave of a word once the apostrophe splits it.
_STUBS = frozenset("isn aren wasn weren doesn don didn hasn haven hadn won wouldn couldn shouldn ve ll re".split())
# Weight of the scenario (the sentences that do not ask) relative to the asking part.
SCENARIO_WEIGHT = 0.7
# An asking part with fewer content words than this leans on the scenario, which then weighs fully.
MIN_ASKING_WORDS = 2


# Weight of the words a follow-up's standalone form carries over from the conversation (the
# parenthesised tail the offline rewrite adds, `evident.conversation.rule`) relative to the new
# turn's own words: they keep the topic, the new words say what is asked about it.
CARRIED_WEIGHT = 0.5
# The carried tail: one parenthesised group closing the message, "And who approves it? (expense report)".
_CARRIED = re.compile(r"\s*\(([^()]*)\)\s*$")


def carried_part(query: str) -> tuple[str, str]:
    """(the new turn's own words, the words carried from the conversation or "")."""
    match = _CARRIED.search(query)
    if not match or not match.group(1).strip() or not query[: match.start()].strip():
        return query, ""
    return query[: match.start()], match.group(1).strip()


def message_parts(query: str) -> list[tuple[str, float]]:
    """The message's sentences with their weight: 1 for the asking part, SCENARIO_WEIGHT for the
    rest; a message with no recognisable asking sentence weighs every sentence 1. Words carried over
    from the conversation (`carried_part`) come last, at CARRIED_WEIGHT, unless the new turn names
    nothing itself ("yes"), when they are the whole topic and weigh 1."""
    own, carried = carried_part(unicodedata.normalize("NFKC", query))
    parts = _own_parts(own)
    if not carried:
        return parts
    named = any(_topic_words(p) for p, _ in parts)
    return [*parts, (carried, CARRIED_WEIGHT if named else 1.0)]


# A blank line ends a paragraph: a message written in paragraphs says what happened first and asks last.
_PARAGRAPH_END = re.compile(r"\n\s*\n")


def _asking_paragraphs(query: str) -> tuple[list[str], int]:
    """The message's paragraphs that name something, and the index of the first one that asks."""
    paragraphs = [p for p in _PARAGRAPH_END.split(query) if _topic_words(p)]
    ask = max(len(paragraphs) - 1, 0)
    if ask and len(_topic_words(paragraphs[ask])) < MIN_ASKING_WORDS:
        ask -= 1
    return paragraphs, ask


def _own_parts(query: str) -> list[tuple[str, float]]:
    """The paragraphs of a message before the one it asks in are its scenario: "I registered my car in
    May.\n\nDo I need an inspection?\n\nAnd what does it cost?" asks what its last paragraph asks, about
    what the ones before say. Many users write a conversation's turns as one message, a question per
    paragraph; scored as one asking part, every earlier question's words would be required of the answer
    too, and the longer the message, the weaker any answer would read. The asking paragraph is the last
    one that names something ("Thanks!" after a question asks nothing), with the one before it when it
    names fewer than MIN_ASKING_WORDS content words ("And for a child?" asks about what came before)."""
    paragraphs, ask = _asking_paragraphs(query)
    if len(paragraphs) < 2:
        return _sentence_parts(query)
    scenario = [(p, SCENARIO_WEIGHT) for para in paragraphs[:ask] for p, _ in _sentence_parts(para)]
    return [*scenario, *(part for para in paragraphs[ask:] for part in _sentence_parts(para))]


def _sentence_parts(query: str) -> list[tuple[str, float]]:
    parts = [p.strip() for p in _SENTENCE_END.split(query) if p.strip()]
    content = [p for p in parts if _topic_words(p)]
    if not content:
        return [(p, 1.0) for p in parts]
    asking = [p.rstrip().endswith("?") or (words(p)[:1] or [""])[0] in _ASK_OPENERS
              or bool(_REQUEST.search(p.casefold())) for p in content]
    if all(asking) or not any(asking):
        return [(p, 1.0) for p in content]
    # "Who do I tell and how quickly?" names nothing: the scenario before it says what it is about.
    named = {w for p, a in zip(content, asking, strict=True) if a for w in _topic_words(p)}
    scenario = SCENARIO_WEIGHT if len(named) >= MIN_ASKING_WORDS else 1.0
    return [(p, 1.0 if a else scenario) for p, a in zip(content, asking, strict=True)]


def message_words(query: str) -> dict[str, float]:
    """Case-folded words of the message with their weight (the best over the parts that hold
    them); chat words weigh 0, stopwords are left out."""
    out: dict[str, float] = {}
    for part, weight in message_parts(query):
        framed = _framed(part)
        for w in words(part):
            if w in STOPWORDS:
                continue
            chat = w in CHAT or w in framed or w in _STUBS
            value = 0.0 if chat or (len(w) == 1 and not w.isdigit()) else weight
            out[w] = max(out.get(w, 0.0), value)
    return out


MAX_TERMS = 64  # enough for any real question; keeps a pasted 100 KB document fast to search
MAX_TERM_LENGTH = 64  # longer "words" are hashes, base64 or junk, and cannot match usefully
# A searched word the message analysis does not weigh (a stopword outside SEARCH_STOPWORDS: "not", "after",
# "many"): it still counts, but less than the topic words of the question.
UNWEIGHED = 0.3


def search_terms(text: str) -> list[str]:
    """The distinct words of `text` a search is given, in order of first appearance: the lexicon's words
    (`lexicon.words`) without SEARCH_STOPWORDS, at most MAX_TERMS, none longer than MAX_TERM_LENGTH. Each engine
    stems them with its own analyzer, the one its index was built with (docs/sources.md, "Words and scores")."""
    terms = [t for t in dict.fromkeys(words(text)) if t not in SEARCH_STOPWORDS and len(t) <= MAX_TERM_LENGTH]
    return terms[:MAX_TERMS]


def weighted_terms(text: str) -> tuple[list[str], dict[str, float]]:
    """`search_terms(text)` without the words of greetings and requests, each with its weight from the message
    analysis (`message_words`). A message of nothing but such words keeps all its terms at weight 1."""
    terms = search_terms(text)
    message = message_words(text)
    weights = {t: message.get(t, 0.0 if t in CHAT or (len(t) == 1 and not t.isdigit()) else UNWEIGHED) for t in terms}
    kept = [t for t in terms if weights[t] > 0]
    if not kept:
        return terms, {t: 1.0 for t in terms}
    return kept, weights
