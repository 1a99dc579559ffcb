"""The offline rewrite of a follow-up, and the limits a conversation must keep. No LangChain import.

A follow-up such as "and if I'm a contractor?" or "how long does that take?" says nothing about its
topic; retrieval would search for "contractor" or "long take" alone. The rule keeps the user's words
and, when the message is elliptical, adds the salient terms of the previous question (in its own
standalone form, so a chain of follow-ups keeps its topic):

    "How many days do I have to submit an expense report?" → "And if I'm a contractor?"
    ⇒ "And if I'm a contractor? (days submit expense report)"

A message that replies to the assistant's question ("yes", "no, I'm a veteran") is the answer to
that question: it carries the question's terms first, then the previous question's:

    "Are you applying as a veteran?" → "no"  ⇒ "no (applying veteran …)"

The carried terms stay in parentheses at the end: retrieval and the offline engine weigh them
below the new turn's own words (`evident.conversation.asking.CARRIED_WEIGHT`).

Deterministic: the same conversation always gives the same question.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence

from evident.alignment.lexicon import STOPWORDS, content_terms
from evident.conversation.asking import CHAT
from evident.models import INSUFFICIENT_ANSWER, Turn

# A message that opens like this continues the previous question rather than asking a new one.
_OPENERS = re.compile(
    r"^\s*(and|but|or|also|so|then|what about|how about|what if|same for|and if|what else|why not|"
    r"in that case|if so|if not)\b",
    re.IGNORECASE,
)
# Words that point back at something said before.
_ANAPHORS = frozenset(
    "it its it's that this these those they them their theirs there then he she him her his such same one ones "
    "former latter above".split()
)
# A message that opens like this replies to a question the assistant asked.
_REPLIES = re.compile(
    r"^\s*(yes|yeah|yep|yup|no|nope|nah|not|sure|ok|okay|correct|right|exactly|of course|i do|i don'?t|i am|i'?m not|"
    r"i have|i haven'?t|i did|i didn'?t)\b",
    re.IGNORECASE,
)
_CITATION = re.compile(r"\[[^\]]*\]")
_QUESTION = re.compile(r"[^.?!\n]*\?")
_DEMONSTRATIVE = re.compile(r"\b(?:these|those)\s+[a-z]\w*", re.IGNORECASE)
# A question with more content words than this, and no opener, names its own topic.
SELF_CONTAINED_TERMS = 3
MAX_ADDED_TERMS = 12
# Words as the user wrote them, case and all, apostrophes and hyphens kept ("it's", "e-mail"): they
# are put back into the question, so unlike `lexicon.words` (folded match keys) they stay whole.
_WORD = re.compile(r"[\w'’-]+", re.UNICODE)


def _fold(word: str) -> str:
    return unicodedata.normalize("NFKC", word).casefold().strip("'’-")


def is_elliptical(question: str) -> bool:
    """Whether a message leans on the conversation: it continues ("and if …", "what about …"), points
    back ("that", "it") without naming much itself, or names almost nothing ("how long?")."""
    terms = content_terms(question)
    if _OPENERS.match(question):
        return True
    written = _WORD.findall(question)
    pointing = any(_fold(w) in _ANAPHORS for w in written)
    if pointing and len(terms) <= SELF_CONTAINED_TERMS:
        return True
    # "those days", "these forms": a plural demonstrative before a noun names something said before,
    # however many words the message has ("Do business trips count towards those days?").
    if _DEMONSTRATIVE.search(question):
        return True
    # One lower-case content word ("how long?", "what is the deadline?") names no topic; a name or an
    # acronym ("what is Ledgerly?", "what is the VPN?") does.
    named = any(_fold(w) in terms and not w.islower() for w in written[1:])
    return len(terms) < 2 and not named


def salient_terms(text: str, exclude: Sequence[str] = ()) -> list[str]:
    """The content words of `text` as written (first occurrence), minus those in `exclude` and the
    words of greetings and requests ("hello", "wondering", "information"), which name no topic."""
    wanted = set(content_terms(text)) - {t for t in (_fold(e) for e in exclude)} - CHAT
    out: list[str] = []
    seen: set[str] = set()
    for word in _WORD.findall(text):
        key = _fold(word)
        if key in wanted and key not in seen and key not in STOPWORDS:
            seen.add(key)
            out.append(word.strip("'’-"))
    return out


def previous_question(history: Sequence[Turn]) -> str | None:
    """The last earlier question, standing alone: the form an answer of the graph records, else the
    user's words, themselves condensed against what came before them (a client that sends the whole
    conversation with its own assistant messages records nothing)."""
    for i in range(len(history) - 1, -1, -1):
        turn = history[i]
        if turn.role == "assistant" and turn.standalone:
            return turn.standalone
        if turn.role == "user":
            return condense(turn.content, history[:i])[0]
    return None


def last_answer(history: Sequence[Turn]) -> str:
    """The text of the last assistant message without its citations ("" when it answered nothing)."""
    for turn in reversed(history):
        if turn.role == "assistant":
            text = _CITATION.sub(" ", turn.content)
            return "" if text.strip() == INSUFFICIENT_ANSWER else text
    return ""


def asked_back(question: str, history: Sequence[Turn]) -> str | None:
    """The assistant's question that `question` replies to ("yes", "no, I'm a veteran"): the last
    question in the assistant's last message, when the message opens like a reply; else None."""
    if not history or history[-1].role != "assistant" or not _REPLIES.match(question):
        return None
    asked = _QUESTION.findall(history[-1].content)
    return asked[-1].strip() if asked else None


def condense(question: str, history: Sequence[Turn], *, continued: bool = False) -> tuple[str, bool]:
    """(the standalone question, whether the rule changed it). `history` is the conversation before
    `question`, oldest first. `continued`: read `question` as continuing the conversation's topic
    even when it seems to name its own (the extractor's second reading of a turn no text answers)."""
    question = question.strip()
    before = previous_question(history)
    reply_to = asked_back(question, history)
    if not before or not (reply_to or continued or is_elliptical(question)):
        return question, False
    # What a follow-up refers to, nearest first: the assistant's question it replies to, the previous
    # question, then, for a reply, the rest of the assistant's message (the question's context).
    said = last_answer(history) if reply_to else ""
    referred = " ".join(x for x in (reply_to, before, said) if x)
    added = salient_terms(referred, exclude=content_terms(question))[:MAX_ADDED_TERMS]
    if not added:
        return question, False
    return f"{question} ({' '.join(added)})", True


def check_turns(sizes: Sequence[int], *, asked: bool, max_messages: int, max_chars: int) -> str | None:
    """Why a conversation cannot be taken (None when it can): more than `max_messages` messages or
    `max_chars` characters in all (every message counts, instructions, tool calls and tool results
    too), or no user's question among the messages the graph has not answered yet (`asked`)."""
    problem = oversized(sizes, max_messages=max_messages, max_chars=max_chars)
    if problem:
        return problem
    if not asked:
        return ("the conversation holds no question: the messages after the last answer need a user (human) "
                "message")
    return None


def oversized(sizes: Sequence[int], *, max_messages: int, max_chars: int) -> str | None:
    """Why messages of these sizes break a conversation's bounds (None when they do not)."""
    if len(sizes) > max_messages:
        return f"the conversation has too many messages: {len(sizes)} (the limit is {max_messages})"
    total = sum(sizes)
    if total > max_chars:
        return f"the conversation is too long: {total} characters (the limit is {max_chars})"
    return None


def query_too_long(query: str, max_chars: int) -> str | None:
    if len(query) > max_chars:
        return f"the query is too long: {len(query)} characters (the limit is {max_chars})"
    return None


def overflow(sizes: Sequence[int], *, max_messages: int, max_chars: int, room: int) -> int:
    """How many of the oldest messages a thread drops so that one more question of up to `room`
    characters still fits its limits; the last two messages (the latest exchange) always stay."""
    drop = 0
    total = sum(sizes)
    while len(sizes) - drop > 2 and (len(sizes) - drop + 1 > max_messages or total + room > max_chars):
        total -= sizes[drop]
        drop += 1
    return drop
