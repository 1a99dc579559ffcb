"""Offline extractive composer: cited verbatim sentences, merged duplicates, bullets, weak-evidence preface."""

from __future__ import annotations

from hypothesis import example, given, settings
from hypothesis import strategies as st

from evident.offline.composer import (
    OFFLINE_PREFACE,
    PREFACE,
    WEAK_COVERAGE,
    answer_coverage,
    compose_answer,
    preface,
)
from evident.settings import OfflineSettings
from tests.support.offline import assert_grounded, cited_sentences, decision, norm

BILLING = "https://help.acme.example/billing"
POLICY = "https://policies.acme.example/refunds"
LIMITS = "https://help.acme.example/limits"

REFUND = (
    "Annual plans can be refunded within 30 days of purchase. Monthly plans are not refunded, but you can "
    "cancel at any time and keep access until the end of the period."
)


def test_every_sentence_is_cited_and_verbatim() -> None:
    decisions = [
        decision("p1", BILLING, REFUND),
        decision("p2", BILLING,
                 "Refund requests for annual plans are submitted by a workspace owner\nthrough the portal."),
    ]
    answer = compose_answer("How many days do I have to get a refund on an annual plan?", decisions)
    assert not answer.startswith(PREFACE)
    pairs = assert_grounded(answer, decisions)
    assert [s for s, _ in pairs] == [
        "Annual plans can be refunded within 30 days of purchase.",
        "Monthly plans are not refunded, but you can cancel at any time and keep access until the end of the period.",
        "Refund requests for annual plans are submitted by a workspace owner through the portal.",
    ]
    assert all(urls == [BILLING] for _, urls in pairs)
    # Consecutive sentences of one passage share one citation; the next passage gets its own.
    assert answer.startswith("Annual plans can be refunded within 30 days of purchase. Monthly")
    assert answer.count(f"[{BILLING}]") == 2


def test_duplicate_sentence_from_two_documents_is_merged() -> None:
    decisions = [
        decision("p1", BILLING, REFUND),
        decision("p2", POLICY,
                 "Annual plans can be refunded within 30 days of purchase.\r\nAsk billing for exceptions."),
    ]
    answer = compose_answer("Can annual plans be refunded?", decisions)
    pairs = assert_grounded(answer, decisions)
    sentences = [s for s, _ in pairs]
    assert sentences.count("Annual plans can be refunded within 30 days of purchase.") == 1
    assert f"Annual plans can be refunded within 30 days of purchase. [{BILLING}][{POLICY}]" in answer


def test_list_items_stay_bullets() -> None:
    quote = (
        "Refunds are not available for:\n"
        "- Add-ons bought through a reseller (i.e. not via Acme directly).\n"
        "- Usage overages that were already invoiced.\n"
        "* Domains registered through Acme."
    )
    decisions = [decision("p1", BILLING, quote)]
    answer = compose_answer("What is not available for a refund?", decisions)
    assert_grounded(answer, decisions)
    lines = answer.splitlines()
    assert lines[0] == f"Refunds are not available for: [{BILLING}]"
    assert f"- Add-ons bought through a reseller (i.e. not via Acme directly). [{BILLING}]" in lines
    assert f"- Usage overages that were already invoiced. [{BILLING}]" in lines
    assert f"- Domains registered through Acme. [{BILLING}]" in lines


def test_weak_evidence_gets_the_preface_and_bullets() -> None:
    decisions = [
        decision("p1", LIMITS, "Throttled requests receive HTTP 429 with a Retry-After header."),
        decision("p2", LIMITS, "Clients that are throttled should schedule a retry after the Retry-After delay."),
    ]
    query = "Can I schedule automatic retries every 5 minutes for throttled webhook deliveries?"
    assert answer_coverage(query, " ".join(d.quote for d in decisions)) < 0.5
    answer = compose_answer(query, decisions)
    first, *rest = answer.splitlines()
    assert first == preface() == OFFLINE_PREFACE
    assert rest == [
        f"- Throttled requests receive HTTP 429 with a Retry-After header. [{LIMITS}]",
        f"- Clients that are throttled should schedule a retry after the Retry-After delay. [{LIMITS}]",
    ]
    assert_grounded(answer, decisions)


def test_the_preface_is_one_sentence_that_never_quotes_the_message() -> None:
    decisions = [decision("p1", LIMITS, "Throttled requests receive HTTP 429 with a Retry-After header.")]
    long_message = ("We moved our integration to a new region last week and our nightly job now fails. "
                    "My manager wants a fix today. Can I schedule automatic retries every 5 minutes?")
    first = compose_answer(long_message, decisions).splitlines()[0]
    assert first == OFFLINE_PREFACE
    assert first.startswith(PREFACE) and first.count(".") == 0
    assert not {"region", "manager", "nightly", "schedule"} & set(first.casefold().replace(";", " ").split())


def test_dropped_and_noise_are_left_out() -> None:
    decisions = [
        decision("p1", BILLING, "", action="dropped"),
        decision(
            "p2",
            BILLING,
            "Acme Help Center › Billing › Refunds\nEdit | History\n\n## Refunds\n\n"
            "Annual plans can be refunded within 30 days of purchase.\n|---|---|\nWas this page helpful?",
        ),
        decision("p3", POLICY, "Refunds are paid to the original payment method.", action="truncated"),
        decision("p4", LIMITS, "Annual plan refunds take 5 business days.", action="relinked"),
    ]
    answer = compose_answer("How are annual plan refunds paid?", decisions)
    pairs = assert_grounded(answer, decisions)
    assert [s for s, _ in pairs] == [
        "Annual plans can be refunded within 30 days of purchase.",
        "Refunds are paid to the original payment method.",
        "Annual plan refunds take 5 business days.",
    ]
    for junk in ("›", "Edit", "##", "|---", "helpful"):
        assert junk not in answer


def test_gapped_quotes_are_split_at_the_ellipsis() -> None:
    quote = "Annual plans can be refunded within 30 days of purchase. … Refunds are paid by bank transfer."
    decisions = [decision("p1", BILLING, quote, action="truncated")]
    answer = compose_answer("How are annual plan refunds paid?", decisions)
    pairs = assert_grounded(answer, decisions)
    assert [s for s, _ in pairs] == [
        "Annual plans can be refunded within 30 days of purchase.",
        "Refunds are paid by bank transfer.",
    ]
    assert "…" not in answer


def test_concise_and_prefers_sentences_on_topic() -> None:
    filler = " ".join(f"Workspace note number {i} concerns the office plants." for i in range(12))
    decisions = [decision("p1", BILLING, filler + " Refunds for annual plans take 30 days.")]
    answer = compose_answer("How long do annual plan refunds take?", decisions)
    pairs = assert_grounded(answer, decisions)
    assert len(pairs) <= 8
    assert "Refunds for annual plans take 30 days." in [s for s, _ in pairs]


def test_table_rows_and_non_latin() -> None:
    decisions = [
        decision("p1", BILLING, "| Method | Plans |\n|---|---|\n| Bank transfer | Annual plans only |"),
        decision("p2", POLICY, "返金は30日以内に申請してください。期限を過ぎると返金されません。"),
    ]
    answer = compose_answer("Which plans can pay by bank transfer?", decisions[:1])
    # A row is shown as a row, under its table's header, the table cited on the line after it.
    assert answer == f"| Method | Plans |\n|---|---|\n| Bank transfer | Annual plans only |\n\n[{BILLING}]"
    assert_grounded(answer, decisions)
    answer = compose_answer("返金の期限", decisions[1:])
    assert answer.startswith("返金は30日以内に申請してください。 期限を過ぎると")
    assert_grounded(answer, decisions)


def test_nothing_to_say() -> None:
    assert compose_answer("anything?", []) == ""
    assert compose_answer("refunds?", [decision("p1", BILLING, "", action="dropped")]) == ""
    assert compose_answer("refunds?", [decision("p1", BILLING, "Edit | History\n---")]) == ""


def test_answer_coverage() -> None:
    query = "How many days do I have to get a refund on an annual plan?"
    assert answer_coverage(query, REFUND) == 1.0
    assert answer_coverage(query, "Nothing relevant here.") == 0.0
    assert 0.0 < answer_coverage(query, "Refunds are possible.") < 1.0
    assert answer_coverage("what is it?", "Some text.") == 1.0


def test_quotes_trimmed_by_alignment_keep_their_structure() -> None:
    from evident.alignment import align
    from evident.alignment.models import Passage, SourceDocument

    page = (
        "## Hotels\n\nBook hotels through TripDesk.\n\n| Location | Nightly cap |\n|---|---|\n"
        "| Standard cities | 250 USD |\n| New York | 350 USD |\n\nCovered items\n\n"
        "- Wi-Fi in the room.\n- Breakfast when it is not included.\n"
    )
    doc = SourceDocument(url=BILLING, content=page)
    table = page[page.index("| Location") : page.index("\n\nCovered")]
    passages = [
        Passage(passage_id="p1", url=BILLING, content=table),
        Passage(passage_id="p2", url=BILLING, content="## Hotels\n\nBook hotels through TripDesk."),
        Passage(passage_id="p3", url=BILLING,
                content="Covered items\n\n- Wi-Fi in the room.\n- Breakfast when it is not included."),
    ]
    decisions = align(passages, [doc])
    assert [d.action for d in decisions] == ["kept"] * 3
    answer = compose_answer("What is the nightly hotel cap in New York, and is room Wi-Fi covered?", decisions)
    lines = answer.splitlines()
    assert "| Location | Nightly cap |\n|---|---|\n| New York | 350 USD |\n\n" f"[{BILLING}]" in answer
    assert f"- Wi-Fi in the room. [{BILLING}]" in lines
    # Headings (marked up or left bare by HTML extraction) are labels, not statements.
    assert "Hotels [" not in answer and "Covered items" not in answer
    assert_grounded(answer, decisions)


_QUOTE_LINES = st.sampled_from(
    [
        "Annual plans can be refunded within 30 days.",
        "- Refund item one.",
        "| Plan | Window |",
        "|---|---|",
        "Refunds are not available for:",
        "Home › Billing",
        "## Refunds",
        "e.g. this, etc. and v2.4.1 too.",
        "",
    ]
)


@settings(max_examples=150, deadline=None)
# A sentence right above a table row, merged with the same sentence on another page, was read as the row's
# first cell (a quote's first line loses its "| "): the table then cited that page for a row it lacks.
@example(raw=[(POLICY, ["Annual plans can be refunded within 30 days.", "| Plan | Window |"]),
              (BILLING, ["Annual plans can be refunded within 30 days."])])
@given(
    st.lists(
        st.tuples(
            st.sampled_from([BILLING, POLICY, LIMITS]),
            st.lists(st.one_of(_QUOTE_LINES, st.text(max_size=25)), max_size=8),
        ),
        max_size=5,
    )
)
def test_property_every_sentence_is_cited_and_quoted(raw: list[tuple[str, list[str]]]) -> None:
    decisions = [decision(f"p{i}", url, "\n".join(lines)) for i, (url, lines) in enumerate(raw)]
    decisions = [d for d in decisions if d.quote.strip()]
    answer = compose_answer("When can annual plans be refunded?", decisions)
    if not answer:
        return
    for sentence, urls in cited_sentences(answer):
        assert urls
        for url in urls:
            quotes = [norm(d.quote) for d in decisions if d.url == url]
            assert any(norm(sentence) in q for q in quotes), (sentence, url)


def test_a_sentence_another_one_already_says_is_left_out() -> None:
    # The second "Find out if you qualify and how to apply" (a link line without its full stop) adds
    # nothing, and its citation would resolve to the first copy on the page, away from its neighbour.
    answer = compose_answer("Can spouses apply for health care?", [
        decision("p1", BILLING, "Apply for health care. Find out if you qualify and how to apply."),
        decision("p2", BILLING, "Spouses may qualify for health care.\nFind out if you qualify and how to apply"),
    ])
    sentences = [s for s, _ in cited_sentences(answer)]
    assert sentences.count("Find out if you qualify and how to apply.") == 1
    assert "Find out if you qualify and how to apply" not in sentences
    assert "Spouses may qualify for health care." in sentences


def test_a_label_sharing_no_word_with_the_question_is_left_out() -> None:
    quote = "Breaking changes:\n\n- Flow 5 requires PostgreSQL 14.\n- Flow 5 drops the old keys."
    answer = compose_answer("Which PostgreSQL version does Flow 5 require?", [decision("p1", POLICY, quote)])
    assert "Breaking changes:" not in answer
    assert "- Flow 5 requires PostgreSQL 14. [https://policies.acme.example/refunds]" in answer
    labelled = compose_answer("Which PostgreSQL changes break Flow 5?", [decision("p1", POLICY, quote)])
    assert labelled.startswith("Breaking changes: [https://policies.acme.example/refunds]")


def test_the_best_passage_is_kept_whole_before_the_answer_is_cut() -> None:
    best = ("Refunds are issued within 14 days. They go to the original card. "
            "Refunds for annual plans are prorated. A refund can take 5 more days to show.")
    others = [decision(f"p{i}", LIMITS, f"Refunds are issued for plan {i}.") for i in range(2, 6)]
    answer = compose_answer("How are refunds issued?", [decision("p1", POLICY, best), *others])
    assert norm(best) in norm(answer.replace(f" [{POLICY}]", ""))


def test_the_best_passage_reads_as_one_quote() -> None:
    # The extractor's best window is a short paragraph: its closing sentence is shown even though it
    # shares no word with the question; the same kind of sentence in a later passage is not.
    query = "Can my student loan be forgiven if my school misled me?"
    best = (
        "Borrowers may be eligible for forgiveness of their student loans if the school misled them. "
        "Learn more in the sections below to see whether you qualify."
    )
    later = "Your school must tell you about student loan repayment. Call us on weekdays between 8 and 5."
    answer = compose_answer(query, [decision("p1", POLICY, best), decision("p2", BILLING, later)])
    shown = [s for s, _ in cited_sentences(answer)]
    assert "Learn more in the sections below to see whether you qualify." in shown
    assert "Call us on weekdays between 8 and 5." not in shown


def test_a_line_kept_only_after_a_dropped_label_goes_with_it() -> None:
    # "... for:" with no list items under it is dropped; the line that read on from it would open a
    # paragraph that shares no word with the question.
    query = "How do I apply for SSI benefits?"
    best = "You can apply for SSI benefits online or at a local office. SSI benefits are paid monthly."
    labelled = "If you would like to apply for SSI benefits for:\n\nAn adult with a disability\nCall the office."
    answer = compose_answer(query, [decision("p1", POLICY, best), decision("p2", BILLING, labelled)])
    shown = [s for s, _ in cited_sentences(answer)]
    assert "You can apply for SSI benefits online or at a local office." in shown
    assert not any(s.startswith("An adult with a disability") for s in shown)
    assert "Call the office." not in shown


def test_a_passage_is_read_from_its_first_on_topic_sentence() -> None:
    # When the answer is cut (here to four of five sentences), a passage's opening sentence ranks with
    # its best one: the reader gets "If you move ... within 30 days." rather than only the link line after it.
    query = "How do I exchange my out-of-state driver license?"
    decisions = [
        decision("p1", POLICY, "You can exchange a New York State driver license for a non-driver ID card. "
                               "You must apply by mail or in a DMV office."),
        decision("p2", BILLING, "If you are from another state, see how to exchange your out-of-state driver license."),
        decision("p3", LIMITS, "If you move to New York State, you must get a New York State driver license "
                               "within 30 days. Learn how to exchange your out-of-state driver license."),
    ]
    answer = compose_answer(query, decisions, settings=OfflineSettings(max_sentences=4))
    shown = [s for s, _ in assert_grounded(answer, decisions)]
    assert "If you move to New York State, you must get a New York State driver license within 30 days." in shown
    assert len(shown) == 4


def test_a_question_is_shown_with_its_answer() -> None:
    # A FAQ question (or a title line) kept when the answer is cut says nothing without the sentence
    # after it: the pair takes the last place and one more (never past `max_long_sentences`).
    query = "What does family coverage cost for a child?"
    decisions = [
        decision("p1", POLICY, "Family coverage is offered for the spouse and each child of a service member. "
                               "Coverage starts on the first day of service."),
        decision("p2", BILLING, "Family coverage for a spouse costs more with age. "
                                "A child of a spouse is covered too."),
        decision("p3", LIMITS, "What does coverage cost for a child?\nThere is no charge until the age of 18."),
    ]
    shown = [s for s, _ in assert_grounded(compose_answer(query, decisions), decisions)]
    assert shown[-2:] == ["What does coverage cost for a child?", "There is no charge until the age of 18."]
    assert len(shown) == 5


def test_a_table_header_without_its_rows_is_left_out() -> None:
    # The answer's places went to other sentences before the rows: the header alone would name the
    # columns of nothing (a table of one "| Country | Annual leave per year |" line).
    lead = "You may carry over up to 5 unused days of annual leave. Carried-over days expire on 31 March."
    table = "| Country | Annual leave per year |\n|---|---|\n| Germany | 30 days |\n| Portugal | 25 days |"
    short = OfflineSettings(max_sentences=3, max_long_sentences=3)
    answer = compose_answer("What happens to unused days of annual leave per year?",
                            [decision("p1", POLICY, lead), decision("p2", POLICY, table)], settings=short)
    assert "|" not in answer and answer.startswith("You may carry over")
    # With room for its rows, the table stays whole under its header.
    roomy = compose_answer("What happens to unused days of annual leave per year?",
                           [decision("p1", POLICY, lead), decision("p2", POLICY, table)])
    assert "| Country | Annual leave per year |\n|---|---|\n| Germany | 30 days |" in roomy


def test_a_situation_told_before_the_question_does_not_weaken_its_answer() -> None:
    # A long message tells its situation, then asks: the answer addresses the question, and the situation's
    # words (Lisbon, cats, relocation) count only where the text holds them, as in the gate's coverage.
    message = ("My partner and I moved to Lisbon last spring with our two cats and a dog, and I started in the "
               "finance team in March after a long relocation.\n\nHow many days of annual leave do I get?")
    answer = "Employees get 25 days of annual leave per calendar year."
    assert answer_coverage(message, answer) >= WEAK_COVERAGE
    # What the question itself asks still counts: a text about something else stays weak.
    assert answer_coverage(message, "The canteen opens at noon.") < WEAK_COVERAGE


def test_an_answer_quotes_page_by_page_in_the_order_it_first_cites_them() -> None:
    # The extractor ranked a second window of the policy below the how-to's: the answer still reads the
    # policy's two quotes together, then the how-to's, never policy, how-to, policy.
    policy, howto = "https://docs.example/policy", "https://docs.example/how-to"
    answer = compose_answer("How many days do I have to submit an expense report?", [
        decision("p1", policy, "Expense reports must be submitted within 30 days of the trip."),
        decision("p2", howto, "Submit one expense report per trip."),
        decision("p3", policy, "An expense report submitted after 90 days is not reimbursed."),
    ])
    cited = [line.rsplit("[", 1)[1].rstrip("]") for line in answer.split("\n\n")]
    assert cited == [policy, policy, howto], answer
