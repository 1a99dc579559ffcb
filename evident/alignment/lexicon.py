"""Query-term vocabulary shared by lexical retrieval and the offline extractor."""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

# Deliberately small: question words and function words carry no evidence, but domain words
# such as "limit" or "policy" must survive.
STOPWORDS: frozenset[str] = frozenset(
    """a about above after again all am an and any are as at be because been before being below
    between both but by can could did do does doing down during each few for from further had has
    have having he her here hers him his how i if in into is it its itself just me more most my no
    nor not of off on once only or other our ours out over own same she should so some such than
    that the their theirs them then there these they this those through to too under until up very
    was we were what when where which while who whom why will with would you your yours
    tell please know need want get got much many us let""".split()
)

_WORD = re.compile(r"\w+", re.UNICODE)


def words(text: str) -> list[str]:
    """NFKC, case-folded word tokens (no offsets; see evident.alignment.tokenize for those)."""
    return _WORD.findall(unicodedata.normalize("NFKC", text).casefold())


def content_terms(text: str) -> list[str]:
    """Distinct query terms worth searching for, in first-seen order."""
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


# -- the asking part of a message ---------------------------------------------------------------
#
# People write "Hello. I just moved to New York and registered my car. I need help with inspection
# rules": a greeting, a scenario, then what they ask. Greetings and the phrases around a request
# ("I was wondering", "could you help me") name nothing a document says; the asking part names what
# the answer must say; the scenario helps choose between pages but must not outweigh the question.

# Words of greetings, thanks and requests: never evidence, so they weigh nothing in retrieval or
# matching (a rare one like "regarding" would otherwise outrank the topic words).
CHAT: frozenset[str] = frozenset(
    """hello hi hey hiya greetings morning afternoon evening good day thanks thank cheers dear sir madam
    wondering wonder wondered curious question questions ask asking asked inquire inquiry enquire enquiry
    information info details help helping assist assistance support regarding concerning related relating
    looking look find finding learn wanted wants needed like love hoping hope trying try am im ve ll
    provide give show explain guide guidance advice advise kindly okay ok yes sure things stuff topic
    something someone anything somebody anyone little bit few some could would today doing came come
    understand understanding obtain""".split()
)
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


def message_parts(query: str) -> list[tuple[str, float]]:
    """The message's sentences with their weight: 1 for the asking part, SCENARIO_WEIGHT for the
    rest; a message with no recognisable asking sentence weighs every sentence 1."""
    parts = [p.strip() for p in _SENTENCE_END.split(unicodedata.normalize("NFKC", query)) if p.strip()]
    content = [p for p in parts if any(w not in CHAT and w not in STOPWORDS for w in words(p))]
    if not content:
        return [(p, 1.0) for p in parts]
    asking = [p.rstrip().endswith("?") or (words(p)[:1] or [""])[0] in _ASK_OPENERS
              or bool(_REQUEST.search(p.casefold())) for p in content]
    if all(asking) or not any(asking):
        return [(p, 1.0) for p in content]
    # "Who do I tell and how quickly?" names nothing: the scenario before it says what it is about.
    named = {w for p, a in zip(content, asking) if a for w in words(p) if w not in CHAT and w not in STOPWORDS}
    scenario = SCENARIO_WEIGHT if len(named) >= MIN_ASKING_WORDS else 1.0
    return [(p, 1.0 if a else scenario) for p, a in zip(content, asking)]


def message_words(query: str) -> dict[str, float]:
    """Case-folded words of the message with their weight (the best over the parts that hold
    them); chat words weigh 0, stopwords are left out."""
    out: dict[str, float] = {}
    for part, weight in message_parts(query):
        for w in words(part):
            if w in STOPWORDS:
                continue
            value = 0.0 if w in CHAT or w in _STUBS or (len(w) == 1 and not w.isdigit()) else weight
            out[w] = max(out.get(w, 0.0), value)
    return out
