"""The offline rewrite of a follow-up and the limits of a conversation (evident/conversation/rule.py)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from evident.conversation.asking import CARRIED_WEIGHT, carried_part, message_words
from evident.conversation.rule import (
    Turn,
    asked_back,
    check_turns,
    condense,
    is_elliptical,
    overflow,
    previous_question,
)

EXPENSES = "How many days do I have to submit my expense report after a business trip?"


def user(text: str) -> Turn:
    return Turn(role="user", content=text)


def answer(text: str, standalone: str | None = None) -> Turn:
    return Turn(role="assistant", content=text, standalone=standalone)


def test_elliptical_messages_are_recognised() -> None:
    for message in ["and if I'm a contractor?", "How long does that take?", "What about Seattle?",
                    "Who approves it?", "how long?", "what is the deadline?", "Same for interns?",
                    "Where should I keep my laptop then?", "Do business trips count towards those days?"]:
        assert is_elliptical(message), message


def test_questions_that_name_their_topic_stand_alone() -> None:
    for message in [EXPENSES, "What is the VPN?", "What is Ledgerly?",
                    "Is there a policy that covers remote work abroad?",
                    "Can I book premium economy for a seven-hour flight?"]:
        assert not is_elliptical(message), message


def test_a_follow_up_gets_the_salient_terms_of_the_previous_question() -> None:
    question, changed = condense("And if I'm a contractor?", [user(EXPENSES), answer("Within 30 days. [x]")])
    assert changed
    assert question == "And if I'm a contractor? (days submit expense report business trip)"


def test_a_chain_of_follow_ups_keeps_its_topic_through_the_recorded_standalone_question() -> None:
    first, _ = condense("and receipts?", [user(EXPENSES), answer("30 days [x]")])
    history = [user(EXPENSES), answer("30 days [x]"), user("and receipts?"), answer("Itemised. [x]", first)]
    question, changed = condense("how long does that take?", history)
    assert changed and question.startswith("how long does that take? (")
    assert "receipts" in question and "expense" in question
    # The answers' own text never feeds the rewrite: only questions do.
    assert "Itemised" not in question and "30" not in question


def test_a_standalone_question_or_a_first_question_is_kept_as_asked() -> None:
    assert condense("  What is the VPN?  ", [user(EXPENSES), answer("30 days")]) == ("What is the VPN?", False)
    assert condense("how long does that take?", []) == ("how long does that take?", False)


def test_the_previous_question_prefers_what_the_answer_recorded() -> None:
    assert previous_question([user("and receipts?"), answer("x", "and receipts? (expense report)")]) == \
        "and receipts? (expense report)"
    # A client's own assistant message records nothing: the user's words are used, condensed in turn.
    assert previous_question([user("and receipts?"), answer("x")]) == "and receipts?"
    chain = [user(EXPENSES), answer("30 days"), user("and receipts?"), answer("x")]
    assert previous_question(chain) == "and receipts? (days submit expense report business trip)"
    assert previous_question([answer("x")]) is None


VETERAN = "Are you applying for disability compensation as a veteran? [x]"


def test_a_reply_to_the_assistants_question_continues_that_question() -> None:
    history = [user("How do I apply for compensation?"), answer("You can apply online. " + VETERAN)]
    assert asked_back("yes", history) == "Are you applying for disability compensation as a veteran?"
    assert asked_back("no, I'm a veteran", history) is not None
    # Not a reply: the message does not open like one, or the assistant asked nothing.
    assert asked_back("What forms do I need?", history) is None
    assert asked_back("yes", [user("How do I apply for compensation?"), answer("Online. [x]")]) is None
    question, changed = condense("yes", history)
    assert changed
    own, carried = carried_part(question)
    assert own == "yes"
    # The question replied to comes first, then the previous question.
    assert carried.split()[:4] == ["applying", "disability", "compensation", "veteran"]
    assert "apply" in carried
    question, changed = condense("no, I'm a veteran", history)
    assert changed and "compensation" in carried_part(question)[1]


def test_carried_terms_weigh_below_the_new_turns_own_words() -> None:
    weights = message_words("And who approves it? (days submit expense report)")
    assert weights["approves"] == 1.0
    assert weights["expense"] == weights["report"] == CARRIED_WEIGHT < 1.0
    # A turn that names nothing itself ("yes") takes its topic from the carried terms, fully.
    assert message_words("yes (veteran compensation)")["veteran"] == 1.0
    # A question that merely ends in parentheses is not a follow-up's carried part when nothing precedes it.
    assert carried_part("(expense report)") == ("(expense report)", "")


def test_the_conversation_is_checked() -> None:
    ok = dict(max_messages=4, max_chars=100)
    assert check_turns([10], asked=True, **ok) is None
    assert check_turns([10, 10, 10], asked=True, **ok) is None
    # Every message counts toward the bounds, whatever its kind: the sizes are all the messages'.
    assert "too many messages: 5 (the limit is 4)" in (check_turns([1] * 5, asked=True, **ok) or "")
    assert "too long: 101 characters (the limit is 100)" in (check_turns([101], asked=True, **ok) or "")
    assert "holds no question" in (check_turns([1, 1], asked=False, **ok) or "")
    assert "holds no question" in (check_turns([], asked=False, **ok) or "")


@given(st.lists(st.integers(min_value=0, max_value=500), max_size=40), st.integers(2, 12),
       st.integers(1000, 3000), st.integers(0, 400))
def test_a_thread_keeps_room_for_one_more_question(sizes: list[int], max_messages: int, max_chars: int,
                                                   room: int) -> None:
    drop = overflow(sizes, max_messages=max_messages, max_chars=max_chars, room=room)
    kept = sizes[drop:]
    assert 0 <= drop <= max(0, len(sizes) - 2)  # the latest exchange always stays
    if len(kept) > 2:
        assert len(kept) + 1 <= max_messages and sum(kept) + room <= max_chars
    if drop:  # nothing is dropped that did not need to be
        before = sizes[drop - 1:]
        assert len(before) + 1 > max_messages or sum(before) + room > max_chars


def test_greetings_and_requests_are_not_carried() -> None:
    history = [user("Hello, I would like to know what suicide prevention measures there are for veterans"),
               answer("We offer a crisis line. [x]")]
    question, changed = condense("and for their families?", history)
    assert changed and question == "and for their families? (suicide prevention measures veterans)"


def test_a_turn_read_as_continued_carries_the_topic_even_when_it_names_its_own() -> None:
    history = [user(EXPENSES), answer("Within 30 days. [x]")]
    asked = "Can my manager approve a late report online?"
    assert condense(asked, history) == (asked, False)
    question, changed = condense(asked, history, continued=True)
    assert changed and question.startswith(asked + " (") and "expense" in question
    # A first question has nothing to continue.
    assert condense(asked, [], continued=True) == (asked, False)
