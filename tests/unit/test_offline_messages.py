"""Real users' messages: greetings, a scenario before the question, no question mark, several parts;
the asking part weighs most, the scenario chooses without vetoing, abstention only when the
retrieved text does not address the question."""

from __future__ import annotations

from pathlib import Path

import pytest

from evident.alignment.lexicon import SEARCH_STOPWORDS, STOPWORDS
from evident.alignment.models import AlignmentDecision, SourceDocument
from evident.connectors.index.embedded import LocalIndex
from evident.conversation.asking import (
    SCENARIO_WEIGHT,
    UNWEIGHED,
    message_parts,
    message_words,
    search_terms,
    weighted_terms,
)
from evident.offline.answerability import DEFAULT_GATE
from evident.offline.composer import compose_answer
from evident.offline.extractor import address_score, extract_passages
from evident.settings import OfflineSettings

SETTINGS = OfflineSettings()

LEAVE = SourceDocument(
    url="hr/leave.md", title="Leave",
    content=(
        "Leave\n\n"
        "Employees get 25 days of annual leave per year. Unused days expire on 31 March of the next year.\n\n"
        "Parental leave lasts 16 weeks at full pay. It can be split into two blocks.\n\n"
        "I need an extension (I am away right now)\n"
        "If you are abroad when your leave ends, your manager can add up to five days of unpaid leave.\n"
    ),
)
CANTEEN = SourceDocument(
    url="KB-7", title="Canteen",
    content="The canteen opens at 8:00 and closes at 15:00. Lunch is served from 11:30.",
)


def decision(url: str, quote: str) -> AlignmentDecision:
    return AlignmentDecision(passage_id="p1", action="kept", url=url, original_url=url, overlap=1.0,
                             final_overlap=1.0, spans=[(0, len(quote))], quote=quote, content=quote)


def test_the_asking_part_weighs_more_than_the_scenario_and_greetings_nothing() -> None:
    message = ("Hello there. I just moved to Lisbon with my two cats and a bike. "
               "I need to know how many days of annual leave I get")
    parts = message_parts(message)
    assert [w for _, w in parts] == [SCENARIO_WEIGHT, 1.0]  # "Hello there." is gone; no "?" needed
    weights = message_words(message)
    assert weights["annual"] == weights["leave"] == 1.0
    assert weights["lisbon"] == weights["cats"] == SCENARIO_WEIGHT
    assert weights.get("hello", 0.0) == weights.get("need", 0.0) == 0.0


def test_an_asking_part_that_names_nothing_leans_on_the_scenario() -> None:
    parts = message_parts("I lost my work laptop on the train last night. Who do I tell and how quickly?")
    assert [w for _, w in parts] == [1.0, 1.0]


def test_search_terms_drop_greetings_and_weigh_the_question() -> None:
    message = "Hi! I have a question regarding parental leave. My son was born in May. How long is it"
    terms, weights = weighted_terms(message)
    assert "regarding" not in terms and "question" not in terms and "hi" not in terms
    assert weights["parental"] == 1.0 and weights["son"] == SCENARIO_WEIGHT
    only_chat, flat = weighted_terms("hello, a question")
    assert only_chat and set(flat.values()) == {1.0}  # nothing else to search with: keep what there is


def test_a_search_keeps_the_stopwords_that_say_how_much_or_when_at_a_light_weight() -> None:
    # The glue of the stop-word list is never searched; "too many records ... end up" found the example
    # corpus's configuration page only while "many" and "up" were searched (docs/sources.md, "Words and scores").
    question = "Why does Flow stop a pipeline when too many records end up in the dead-letter queue?"
    terms, weights = weighted_terms(question)
    assert set(search_terms(question)) & SEARCH_STOPWORDS == set() and {"many", "up"} <= set(terms)
    assert weights["many"] == weights["up"] == UNWEIGHED < weights["records"] == 1.0
    assert {"many", "up"} <= STOPWORDS  # every comparison EvidenT makes itself leaves them out


def test_the_frame_of_a_question_is_not_searched() -> None:
    for message, frame in [("What kind of documents are required to get a card?", "kind"),
                           ("Is it possible to work while receiving benefits?", "possible"),
                           ("Will I be able to get any sort of financial aid?", "able"),
                           ("Will I be able to get any sort of financial aid?", "sort"),
                           ("What comes next after I'm approved for disability benefits?", "comes")]:
        terms, _ = weighted_terms(message)
        assert frame not in terms and terms


def test_frame_words_outside_a_frame_are_topic_words() -> None:
    # Review: "an ABLE account", "sort the report" name the topic; only the frame weighs nothing.
    assert message_words("How do I open an ABLE account?")["able"] > 0
    assert message_words("How do I sort the report by date?")["sort"] > 0
    assert message_words("WHAT KIND OF DOCUMENTS do I need?")["kind"] == 0
    # A frame word is no topic word of the asking part either: the scenario before it keeps its weight.
    parts = message_parts("I lost my card abroad. What kind of documents?")
    assert [w for _, w in parts] == [1.0, 1.0]


def test_a_rare_request_word_no_longer_outranks_the_topic(tmp_path: Path) -> None:
    corpus = tmp_path / "c.jsonl"
    corpus.write_text(
        '{"url": "KB-1", "title": "Contact", "text": "Hello! Questions regarding anything? We are happy to help."}\n'
        '{"url": "KB-2", "title": "Parental leave", "text": "Parental leave lasts 16 weeks at full pay."}\n'
        '{"url": "KB-3", "title": "Annual leave", '
        '"text": "Annual leave is 25 days. Leave requests go to your manager."}\n',
        encoding="utf-8")
    with LocalIndex(tmp_path / "i.sqlite3") as index:
        index.add_corpus(corpus)
        hits = [d.url for d, _ in index.search("Hello, I have a question regarding parental leave", 3)]
    assert hits[0] == "KB-2"


def test_the_scenario_does_not_veto_an_answer() -> None:
    message = ("I just moved to Lisbon from Toronto with my two cats, a bike and a very old piano. "
               "How many days of annual leave do I get?")
    passages = extract_passages(message, [LEAVE, CANTEEN])
    assert passages and passages[0].url == "hr/leave.md"
    assert "25 days of annual leave" in passages[0].content


def test_greeting_and_no_question_mark() -> None:
    message = "Hello, I have a question about how long parental leave lasts"
    passages = extract_passages(message, [CANTEEN, LEAVE])
    assert passages and passages[0].content.startswith("Parental leave lasts 16 weeks")


def test_a_matching_section_heading_points_at_the_text_below_it() -> None:
    query = "I need an extension, I am away right now"
    passages = extract_passages(query, [LEAVE])
    assert passages and "If you are abroad when your leave ends" in passages[0].content
    answer = compose_answer(query, [decision(p.url, p.content) for p in passages])
    below = "If you are abroad when your leave ends, your manager can add up to five days of unpaid leave."
    assert f"{below} [hr/leave.md]" in answer


def test_abstains_when_the_retrieved_text_does_not_address_the_question() -> None:
    query = "How do I disinfect my kitchen during the pandemic?"
    assert address_score(query, [LEAVE, CANTEEN]) < DEFAULT_GATE.words_gate
    assert extract_passages(query, [LEAVE, CANTEEN]) == []
    assert address_score("How long does parental leave last?", [LEAVE, CANTEEN]) >= DEFAULT_GATE.words_gate


def test_answers_stay_short_and_on_topic_unless_a_sentence_continues_the_last() -> None:
    best = "Parental leave is paid by the company."
    quote = ("Parental leave lasts 16 weeks at full pay. It can be split into two blocks. "
             "The canteen opens at 8:00. Parental leave starts on the day you choose.")
    answer = compose_answer("How long does parental leave last?",
                            [decision("hr/pay.md", best), decision("hr/leave.md", quote)])
    assert "It can be split into two blocks." in answer  # continues the sentence before it
    # An aside in a passage after the best one is left out; the best passage is read whole (below).
    assert "canteen" not in answer and "Parental leave starts on the day you choose." in answer
    many = " ".join(f"Parental leave rule {i} applies to leave taken in block {i}." for i in range(1, 9))
    long_answer = compose_answer("Which parental leave rules apply?", [decision("hr/leave.md", many)])
    # Sentences as on-topic as the best one make a longer answer, never a page.
    assert SETTINGS.max_sentences < long_answer.count("applies to leave") == SETTINGS.max_long_sentences
    # One stretch of the page: one citation after its last sentence.
    assert long_answer.count("[hr/leave.md]") == 1 and long_answer.endswith("[hr/leave.md]")
    weaker = [decision(f"KB-{i}", f"Parental leave is booked in block {i}.") for i in range(1, 9)]
    usual = compose_answer("Which parental leave rules apply?",
                           [decision("hr/leave.md", "Parental leave rules apply to all employees."), *weaker])
    assert usual.count("[") == SETTINGS.max_sentences < SETTINGS.max_long_sentences
    assert usual.startswith("Parental leave rules apply to all employees. [hr/leave.md]")


LAPTOP = SourceDocument(
    url="it/laptop.md", title="Laptops",
    content=(
        "# Laptops\n\n"
        "Every employee gets a laptop on the first day. Restart it once a week for updates.\n\n"
        "## Lost or stolen\n\n"
        "A lost or stolen laptop is a security incident. Report it to security@example.com within one "
        "hour of noticing. IT can lock and wipe the laptop remotely.\n"
    ),
)


def test_the_best_passage_is_read_whole() -> None:
    # The sentence that says what to do shares no word with the question; it sits between two that do.
    query = "I lost my laptop on the train, what now?"
    passages = extract_passages(query, [LAPTOP, CANTEEN])
    assert passages and passages[0].content.startswith("A lost or stolen laptop")
    answer = compose_answer(query, [decision(p.url, p.content) for p in passages])
    assert "Report it to security@example.com within one hour of noticing." in answer
    assert answer.index("security incident") < answer.index("Report it") < answer.index("wipe the laptop")


def test_yes_after_a_question_is_kept_as_its_answer() -> None:
    quote = "Can unused leave be carried over?\nYes. Up to five days carry over to the next year."
    answer = compose_answer("Can I carry over unused leave?", [decision("hr/leave.md", quote)])
    assert "Can unused leave be carried over? Yes. Up to five days" in answer


def test_a_message_in_paragraphs_asks_in_its_last_one() -> None:
    # A conversation's turns written as one message: the earlier questions are what came before.
    message = ("How many days of annual leave do I get?\n\nCan unused days be carried over?\n\n"
               "How long does parental leave last?")
    assert [w for _, w in message_parts(message)] == [SCENARIO_WEIGHT, SCENARIO_WEIGHT, 1.0]
    weights = message_words(message)
    assert weights["parental"] == 1.0 and weights["annual"] == weights["carried"] == SCENARIO_WEIGHT
    # The earlier questions do not veto an answer: the text addresses the message as well as its last question.
    alone = address_score("How long does parental leave last?", [LEAVE, CANTEEN])
    assert address_score(message, [LEAVE, CANTEEN]) == pytest.approx(alone)
    # A last paragraph naming too little asks about the one before it; one naming nothing is left out.
    parts = message_parts("How many days of annual leave do I get?\n\nAnd for a contractor?\n\nThanks!")
    assert [w for _, w in parts] == [1.0, 1.0]
    # Sentences of one paragraph are read as before.
    assert message_parts("I moved to Lisbon.\nHow many days of annual leave do I get?") == message_parts(
        "I moved to Lisbon. How many days of annual leave do I get?")
