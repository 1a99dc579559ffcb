"""Offline composer: which sentences an answer keeps when it must be cut (docs/evaluation.md, "How the offline
engine decides": composing the answer)."""

from __future__ import annotations

from evident.alignment.models import AlignmentDecision
from evident.offline.composer import compose_answer
from evident.settings import DEFAULT_OFFLINE, OfflineSettings
from tests.support.offline import assert_grounded, cited_sentences, decision

DOCS = "https://docs.acme.example/errors"
CONFIG = "https://docs.acme.example/configuration"
FAQ = "https://benefits.acme.example/faq"
RESUME = "Look at the dead-letter queue records before you resume the pipeline, or it will stop again."
THRESHOLD = "The stop threshold keeps a pipeline from silently sending every record to the dead-letter queue."


def shown(query: str, decisions: list[AlignmentDecision], settings: OfflineSettings = DEFAULT_OFFLINE) -> list[str]:
    answer = compose_answer(query, decisions, settings=settings)
    assert_grounded(answer, decisions)
    return [s for s, _ in cited_sentences(answer)]


def test_an_answer_lengthened_for_its_strong_sentences_keeps_them() -> None:
    # Five sentences hold most of the question's words, so an answer of usually four is five long; the
    # table row of the second passage, less on-topic, does not take the place of the fifth of them.
    query = "Why does Flow stop a pipeline when too many records end up in the dead-letter queue?"
    decisions = [
        decision("p1", DOCS, "Flow sends a failed record to the dead-letter queue or stops the pipeline."),
        decision("p2", DOCS, "| E1 | Record timed out | The record goes to the dead-letter queue |\n"
                             "| E2 | Threshold exceeded | The pipeline stops |"),
        decision("p3", DOCS, RESUME),
        decision("p4", CONFIG, "The dlq command shows the dead-letter queue records of a stopped pipeline."),
        decision("p5", CONFIG, "After the last try, the record goes to the dead-letter queue or the pipeline stops."),
        decision("p6", CONFIG, THRESHOLD),
    ]
    sentences = shown(query, decisions, OfflineSettings(max_sentences=4))
    assert len(sentences) == 5
    assert THRESHOLD in sentences
    assert not any(s.startswith("E1 |") for s in sentences)


def test_table_rows_about_another_thing_than_the_one_asked_are_left_out() -> None:
    table = ("| E-2202 | Login to the sink failed | The pipeline stops |\n"
             "| E-2301 | Permission denied | The pipeline stops |\n"
             "| E-2401 | TLS handshake failed | The pipeline stops |")
    named = shown("Our pipeline stopped with error E-2202. How do we fix it?", [decision("p1", DOCS, table)])
    assert named == ["E-2202 | Login to the sink failed | The pipeline stops"]
    # A question naming no row keeps the rows that share its words.
    assert len(shown("Which errors stop the pipeline?", [decision("p1", DOCS, table)])) == 3
    # The header row names the columns, not a thing: it stays with the named row.
    headed = "| Error | What stops |\n|---|---|\n" + table
    named = shown("Which pipeline error stops at E-2301?", [decision("p1", DOCS, headed)])
    assert named == ["Error | What stops", "E-2301 | Permission denied | The pipeline stops"]
    # A row number is no name: "the 3 steps" keeps every step.
    steps = ("| 1 | Stop the pipeline before the upgrade |\n| 2 | Upgrade the pipeline agent |\n"
             "| 3 | Start the pipeline again |")
    assert len(shown("What are the 3 steps to upgrade the pipeline?", [decision("p1", DOCS, steps)])) == 3


def test_a_question_on_the_page_is_kept_only_with_its_answer() -> None:
    query = "Can I use my GI Bill benefits for classes after my first degree?"
    best = ("After your first degree, you can use any GI Bill benefits left to pay for classes. "
            "GI Bill benefits also pay for classes online. Your degree classes count too.")
    decisions = [
        decision("p1", FAQ, best),
        decision("p2", FAQ, "Can I use the GI Bill to pay for classes toward more than one degree?\n\nYes."),
        decision("p3", FAQ, "You can use your GI Bill benefits for classes in many ways."),
    ]
    sentences = shown(query, decisions)
    question = sentences.index("Can I use the GI Bill to pay for classes toward more than one degree?")
    assert sentences[question + 1] == "Yes."


def test_a_title_is_not_paired_across_a_sentence_merged_into_another_page() -> None:
    # The SSI page opens with its title and a sentence the planner page (cited first) says word for
    # word; that sentence is merged there, so the title's next sentence in the list is not the one
    # under it in the source, and the two are not shown as a pair.
    from evident.offline.quotes import quoted_sentences
    from evident.offline.selection import kept_orders

    ssi = "The SSI program pays benefits to disabled adults and children with limited income."
    decisions = [
        decision("p1", CONFIG, "We pay disability benefits under two programs. " + ssi),
        decision("p2", FAQ, "Supplemental Security Income Benefits\n" + ssi + " SSI is also paid at 65."),
    ]
    sentences = quoted_sentences(decisions)
    title = next(s for s in sentences if s.text == "Supplemental Security Income Benefits")
    after = next(s for s in sentences if s.text == "SSI is also paid at 65.")
    assert after.order == title.order + 1 and after.after_gap
    assert title.urls == [FAQ] and next(s for s in sentences if s.text == ssi).urls == [CONFIG, FAQ]
    for s in sentences:
        s.relevance = 1.0
    kept = kept_orders(sentences, 3)  # the two sentences of the first passage, then the title
    assert title.order in kept and after.order not in kept  # alone, not with the sentence after the gap


def test_a_question_is_not_paired_with_text_after_a_gap_in_the_quote() -> None:
    # A quote that left text out ("…") between the question and the next sentence: that sentence is
    # not the question's answer.
    from evident.alignment.aligner import QUOTE_JOINER
    from evident.offline.quotes import quoted_sentences
    from evident.offline.selection import kept_orders

    quote = "Can I use the GI Bill for a second degree?" + QUOTE_JOINER + "The office is closed on Sundays."
    sentences = quoted_sentences([decision("p1", FAQ, quote)])
    question, after = sentences
    assert after.order == question.order + 1 and after.after_gap
    for s in sentences:
        s.relevance = 1.0
    assert kept_orders(sentences, 1) == {question.order}




def test_a_follow_up_gives_its_places_to_sentences_of_its_own_words() -> None:
    # "And what about the receipts?" after an expense-report question: the rewrite carries
    # "(expense report)". Sentences holding only the carried words are about the earlier turn; when the
    # answer must be cut, they come after those that name the receipts, even from earlier passages.
    query = "And what about the receipts? (expense report)"
    receipts = ["Keep every receipt of an expense report for seven years.", "A lost receipt needs a signed note.",
                "Receipts are scanned in the expense app.", "Paper receipts may be thrown away after scanning.",
                "Receipts in a foreign language need a short translation."]
    decisions = [
        decision("p1", FAQ, receipts[0]),
        decision("p2", DOCS, "Expense reports are due within 30 days. Late expense reports need a reason."),
        decision("p3", DOCS, "An expense report goes to your manager first."),
        *(decision(f"p{i}", CONFIG, text) for i, text in enumerate(receipts[1:], start=4)),
    ]
    sentences = shown(query, decisions)
    assert sentences == receipts[: DEFAULT_OFFLINE.max_sentences]
    # A first question (nothing carried) ranks on all its words, the earlier passages first.
    first = shown("What about receipts and expense reports?", decisions)
    assert "Expense reports are due within 30 days." in first
