"""Offline lexical extractor: verbatim windows, right sentence first, boilerplate ignored, [] when unrelated."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evident.alignment.models import SourceDocument
from evident.alignment.sentences import split_sentences
from evident.offline.answerability import AnswerGate
from evident.offline.extractor import extract_passages
from evident.offline.scoring import Scorer, window_score
from evident.offline.units import analyse

NAV = "Acme Help Center › {section}\nEdit | History | Watch\n\nLast edited by Sam Ortiz on 12 May 2025\n\n"
FOOTER = (
    "\n\n---\n\nNeed more help? Contact the Acme support team through the support portal.\n"
    "Was this page helpful? Yes No\n© 2025 Acme Corp. All rights reserved.\n"
)

BILLING = (
    NAV.format(section="Billing")
    + """# Billing and refunds

Acme bills every workspace monthly or annually, e.g. on the first day of each billing period. Invoices are \
emailed to the billing contact and can be downloaded from Settings › Billing.

## Refunds

Annual plans can be refunded within 30 days of purchase. Monthly plans are not refunded, but you can cancel \
at any time and keep access until the end of the period. Refund requests are submitted by a workspace owner \
through the support portal.

Refunds are not available for:
- Add-ons bought through a reseller (i.e. not via Acme directly).
- Usage overages that were already invoiced.
- Domains registered through Acme.

## Payment methods

| Method | Plans | Notes |
|--------|-------|-------|
| Credit card | All plans | Charged automatically |
| Bank transfer | Annual plans only | Invoice due within 14 days |
| PayPal | Monthly plans | Not available in Japan |
"""
    + FOOTER
)

LIMITS = (
    NAV.format(section="Platform › Limits")
    + """# Workspace limits

Each workspace has limits that protect the platform from runaway jobs. The limits below apply per workspace, \
not per user.

## Storage

The Starter plan includes 5 GB of storage. The Business plan includes 1 TB of storage, and storage beyond that \
is billed at 0.02 USD per GB per month. Files larger than 2 GB cannot be uploaded through the browser; use the \
CLI (v2.4.1 or later) instead.

## API rate limits

The REST API accepts at most 600 requests per minute per workspace. Requests above the limit receive HTTP 429 \
with a Retry-After header. Batch endpoints count as one request per call, regardless of how many items they \
contain.

```bash
acme api get /v2/usage --workspace ws_123
```
"""
    + FOOTER
)

SECURITY = (
    "Home\nProducts\nSecurity\nSecurity overview\n"
    "Acme encrypts customer data at rest with AES-256 and in transit with TLS 1.2 or later.\r\n"
    "Encryption keys are rotated every 90 days by the platform team, and customers on the Enterprise plan can "
    "bring their own keys.\r\n"
    "Single sign-on (SSO) with SAML 2.0 is available on the Business and Enterprise plans. SCIM provisioning is "
    "available on the Enterprise plan only.\r\n"
    "Penetration tests are run twice a year by an external firm; the summary report is available under NDA.\r\n"
    + FOOTER.replace("\n", "\r\n")
)

TEAM = (
    NAV.format(section="Company")
    + """# Team offsites

The design team meets in Lisbon every spring for a two-day offsite. Travel is booked through the travel desk, \
and the agenda is shared in the #design-offsite channel a week before.

Lunch is provided on both days; dinner on the first evening is a team dinner.
"""
    + FOOTER
)


def corpus() -> list[SourceDocument]:
    return [
        SourceDocument(url="https://help.acme.example/billing", content=BILLING),
        SourceDocument(url="https://help.acme.example/limits", content=LIMITS),
        SourceDocument(url="https://trust.acme.example/security", content=SECURITY),
        SourceDocument(url="https://wiki.acme.example/offsites", content=TEAM),
    ]


def check_verbatim(passages, docs) -> None:
    by_url = {d.url: d for d in docs}
    for p in passages:
        doc = by_url[p.url]
        assert p.content in doc.content
        # The window starts and ends on sentence boundaries of its document.
        spans = split_sentences(doc.content)
        start = doc.content.index(p.content)
        assert any(s == start for s, _ in spans)
        assert any(e == start + len(p.content) for _, e in spans)


def test_refund_window_sentence_comes_first() -> None:
    docs = corpus()
    passages = extract_passages("How many days do I have to get a refund on an annual plan?", docs)
    assert passages
    check_verbatim(passages, docs)
    assert passages[0].url == "https://help.acme.example/billing"
    assert "Annual plans can be refunded within 30 days of purchase." in passages[0].content


def test_stemming_matches_inflections() -> None:
    docs = corpus()
    # "submit"/"submitted" and "request"/"requests" only meet through stemming.
    passages = extract_passages("Who can submit a refund request?", docs)
    assert passages
    assert "Refund requests are submitted by a workspace owner" in passages[0].content


def test_rate_limit_question() -> None:
    docs = corpus()
    passages = extract_passages("What is the API rate limit per minute?", docs)
    assert passages[0].url == "https://help.acme.example/limits"
    assert "at most 600 requests per minute per workspace" in passages[0].content
    check_verbatim(passages, docs)


def test_crlf_html_extracted_document() -> None:
    docs = corpus()
    passages = extract_passages("How often are encryption keys rotated?", docs)
    assert passages[0].url == "https://trust.acme.example/security"
    assert passages[0].content.startswith("Encryption keys are rotated every 90 days")
    check_verbatim(passages, docs)


def test_label_window_includes_the_list() -> None:
    docs = corpus()
    passages = extract_passages("What is not available for a refund?", docs)
    first = passages[0].content
    assert first.startswith("Refunds are not available for:")
    assert "- Add-ons bought through a reseller" in first
    assert "- Usage overages that were already invoiced." in first


def test_boilerplate_and_navigation_are_ignored() -> None:
    docs = corpus()
    for query in (
        "How do I contact the support team?",
        "Who edited the billing help center page?",
        "Was the workspace limits page helpful?",
    ):
        for p in extract_passages(query, docs):
            assert "Need more help?" not in p.content
            assert "Last edited by" not in p.content
            assert "Was this page helpful?" not in p.content
            assert "›" not in p.content.split("\n")[0] or "Settings › Billing" in p.content


def test_unrelated_query_returns_nothing() -> None:
    docs = corpus()
    assert extract_passages("What is the maternity leave policy for employees in Brazil?", docs) == []
    assert extract_passages("Which quantum chromodynamics textbook do physicists recommend?", docs) == []
    assert extract_passages("", docs) == []
    assert extract_passages("what is it?", docs) == []
    assert extract_passages("refund", []) == []


def test_limits_ids_urls_and_no_overlap() -> None:
    docs = corpus()
    passages = extract_passages(
        "storage limits plans refunds encryption", docs, max_passages=4, max_per_document=2
    )
    assert 1 <= len(passages) <= 4
    assert [p.passage_id for p in passages] == [f"p{i}" for i in range(1, len(passages) + 1)]
    per_doc: dict[str, list[tuple[int, int]]] = {}
    for p in passages:
        doc = next(d for d in docs if d.url == p.url)
        start = doc.content.index(p.content)
        per_doc.setdefault(p.url, []).append((start, start + len(p.content)))
    for spans in per_doc.values():
        assert len(spans) <= 2
        spans.sort()
        assert all(a[1] <= b[0] for a, b in itertools.pairwise(spans))


def test_deterministic() -> None:
    docs = corpus()
    query = "How much storage does the Business plan include?"
    first = extract_passages(query, docs)
    assert first and "The Business plan includes 1 TB of storage" in first[0].content
    for _ in range(3):
        assert extract_passages(query, corpus()) == first


def test_rank_breaks_ties_between_identical_documents() -> None:
    text = "The office wifi password rotates every Monday.\n\nAsk IT for the new one."
    docs = [
        SourceDocument(url="https://a.example/1", content=text),
        SourceDocument(url="https://a.example/2", content=text),
    ]
    passages = extract_passages("When does the wifi password rotate?", docs)
    assert [p.url for p in passages] == ["https://a.example/1", "https://a.example/2"]
    assert passages[0].content == passages[1].content == "The office wifi password rotates every Monday."


def test_the_gate_is_configurable() -> None:
    docs = corpus()
    query = "Does the Lisbon offsite include lunch and a spa afternoon with massages?"
    assert extract_passages(query, docs, gate=AnswerGate(0.6, gate=0.95, words_gate=0.95)) == []
    assert extract_passages(query, docs, gate=AnswerGate(0.6, gate=0.2, words_gate=0.2))


def test_alignment_keeps_every_passage() -> None:
    from evident.alignment import align

    docs = corpus()
    for query in (
        "How many days do I have to get a refund on an annual plan?",
        "What is not available for a refund?",
        "Can I pay by bank transfer on a monthly plan?",
        "How often are encryption keys rotated?",
        "What is the API rate limit per minute?",
    ):
        passages = extract_passages(query, docs)
        decisions = align(passages, docs)
        assert passages and [d.action for d in decisions] == ["kept"] * len(passages)
        assert [d.url for d in decisions] == [p.url for p in passages]


_LINE = st.sampled_from(
    [
        "# Refunds",
        "Refunds take 30 days. See Dr. Lee for v2.4.1 exceptions.",
        "- refund item",
        "| refund | 30 days |",
        "|---|---|",
        "```",
        "Refunds are not available for:",
        "Home › Refunds",
        "",
    ]
)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.one_of(_LINE, st.text(max_size=30)), max_size=20), st.sampled_from(["\n", "\r\n"]))
def test_property_passages_are_exact_substrings(lines: list[str], sep: str) -> None:
    text = sep.join(lines)
    docs = [
        SourceDocument(url="https://a.example/x", content=text),
        SourceDocument(url="https://a.example/y", content=BILLING),
    ]
    passages = extract_passages("How long do refunds take?", docs, max_per_document=2)
    assert len(passages) <= 6
    for p in passages:
        doc = next(d for d in docs if d.url == p.url)
        assert p.content and p.content in doc.content and p.content == p.content.strip()
    assert sum(p.url.endswith("/x") for p in passages) <= 2


def test_superseded_page_does_not_outrank_the_current_rule() -> None:
    current = SourceDocument(
        url="https://policies.example/travel", title="Travel policy",
        content="# Travel policy\n\nExpense reports must be submitted within 30 days of the trip's end date.\n",
    )
    old = SourceDocument(
        url="https://policies.example/archive/travel", title="Travel policy (2024)",
        metadata={"status": "archived"},
        content="# Travel policy\n\nExpense reports had to be submitted within 45 days of the trip's end date.\n",
    )
    query = "How many days do I have to submit expense reports after the trip's end date?"
    for docs in ([old, current], [current, old]):
        passages = extract_passages(query, docs)
        assert passages[0].url == current.url, passages
    titled = old.model_copy(update={"metadata": {}, "title": "ARCHIVED - Travel policy (2024)"})
    assert extract_passages(query, [titled, current])[0].url == current.url


def test_the_opening_paragraph_sits_under_the_page_title() -> None:
    # Before the first heading the page title is the heading: the opening says what the page is
    # about, in words the question ("What is the loan simulator?") need not share.
    doc = SourceDocument(
        url="KB-9", title="Loan Simulator",
        content=("Use this tool to pick a repayment plan that meets your goals.\n\n"
                 "Sign in first. The simulator runs in your browser and needs no download."),
    )
    passages = extract_passages("What is the loan simulator?", [doc])
    assert passages[0].content == "Use this tool to pick a repayment plan that meets your goals."
    # A heading in the text takes over from the title for what follows it.
    headed = doc.model_copy(update={"content": "## Downloads\n\n" + doc.content})
    assert extract_passages("What is the loan simulator?", [headed])[0].content.startswith("The simulator")


def test_the_best_window_takes_the_rest_of_its_paragraph() -> None:
    doc = SourceDocument(url="KB-3", title="Servicer notes", content=(
        "Student loan deferment lets you pause payments. You must apply through your servicer. "
        "Interest may still accrue.\n\nDeferment requests are reviewed monthly. A decision letter follows by mail."))
    passages = extract_passages("How does student loan deferment work?", [doc])
    # The sentences after the best one share no word with the question, yet continue its paragraph;
    # the next paragraph is a new thought.
    assert passages[0].content == ("Student loan deferment lets you pause payments. You must apply through "
                                   "your servicer. Interest may still accrue.")
    assert all("decision letter" not in p.content for p in passages)


def test_a_faq_question_does_not_make_its_answer_too_long_to_win() -> None:
    # The length penalty is for run-on text, not for the question that introduces an answer: the FAQ
    # entry that asks what the user asks comes first, although question and answer are long together.
    faq = (
        "Family coverage\n\n"
        "How much will my service member pay for dependent coverage?\n"
        "Nothing. We provide dependent coverage at no cost until the child is 18 years old, or sometimes "
        "longer if the child meets one of the requirements listed below. Coverage for a child who is a "
        "full-time student continues until the child turns 23 years old.\n"
    )
    other = (
        "Service members pay premiums for spouse coverage through their pay. Dependent coverage for a "
        "spouse costs more when the spouse is older.\n"
    )
    docs = [
        SourceDocument(url="https://insurance.example/family", content=faq),
        SourceDocument(url="https://insurance.example/premiums", content=other),
    ]
    passages = extract_passages("How much will my service member pay for dependent coverage?", docs)
    assert passages[0].url == "https://insurance.example/family"
    assert "Nothing. We provide dependent coverage at no cost" in passages[0].content


def test_text_another_retrieved_page_holds_is_quoted_from_it_too() -> None:
    # Rule 32: a near-duplicate page (a "variant 2" copy, a sibling page repeating a policy) says the
    # same sentence amid other text; it is quoted from there too, after the ranked passages, even
    # when the passage limit leaves no room for that page's own window.
    answer = "Each page of the online application times out after 25 minutes without activity."
    first = SourceDocument(url="https://a.example/apply", content=f"Apply online\n\n{answer} Save often.")
    copy = SourceDocument(
        url="https://a.example/estimator",
        content=f"How the estimator works\n\nThe estimator uses your earnings record.\n\n{answer}\n\nYes.",
    )
    other = SourceDocument(url="https://a.example/other", content="Yes. Save often.")
    passages = extract_passages(
        "How long before a page of the online application times out?", [first, copy, other], max_passages=1
    )
    assert [(p.passage_id, p.url) for p in passages] == [("p1", first.url), ("p2", copy.url)]
    assert passages[0].content == f"{answer} Save often."
    assert passages[1].content == answer  # the sentence, verbatim text of the copy page
    # "Save often." is shorter than COPY_MIN_WORDS words, and so is "Yes.": `other` is not cited.


def test_a_short_passage_is_not_cited_on_every_page_that_holds_it() -> None:
    # Rule 32's COPY_MIN_WORDS holds for a whole passage too: a two-word line recurs on unrelated pages.
    faq = SourceDocument(url="https://a.example/faq", content="Refunds available.\n\nShipping takes a week.")
    other = SourceDocument(url="https://a.example/other", content="Gift cards. Refunds available. Parking is free.")
    passages = extract_passages("Are refunds available?", [faq, other], max_passages=1)
    assert [p.content for p in passages] == ["Refunds available."]
    assert [p.url for p in passages] == [faq.url]


def test_a_sites_footer_is_chrome_but_a_paragraph_its_topic_pages_share_is_text() -> None:
    # The footer stands at the end of every page of the site: quoted, it would answer "Does the company
    # offer a car?" on every page it shares "company" with. The definition stands inside the pages of
    # one topic, between their own sentences: it is what they all say, and is quoted.
    footer = "Tessellate Inc. Internal use only. Do not share this page outside the company."
    shared = "Medicare is the health insurance program of the company for people aged 65 or older."
    pages = [
        SourceDocument(url=f"https://a.example/{topic}", content=(
            f"# {topic.title()}\n\nThe {topic} team owns the {topic} service. It answers pages within one hour."
            f" New members shadow a rotation first.\n\n{shared}\n\nAsk the {topic} team lead about the"
            f" rota. Swaps go through Beacon. Holidays count double.\n\n{footer}\n"))
        for topic in ("platform", "edge", "billing")
    ]
    for query in ("Does the company offer a car for sharing?", "Is this page internal only?"):
        assert all(footer not in p.content for p in extract_passages(query, pages))
    assert any(shared in p.content for p in extract_passages("What health insurance program covers people aged 65?",
                                                            pages))
    # Two pages saying it are a page and its near-duplicate copy, not a template.
    assert any(footer in p.content for p in extract_passages("Is this page internal only?", pages[:2]))


LAPSE_FAQ = (
    "Insurance requirements\n\nHow do I avoid an insurance lapse?\n"
    "Remember this simple rule: no insurance, no plates! keep the address for your vehicle registration "
    "and driver license current with the DMV have liability coverage in effect for the entire time the "
    "vehicle is registered turn in the plates before you cancel the coverage keep the proof of the plate "
    "surrender and the receipt call the insurance company if you do not receive a renewal notice before "
    "the policy ends and never drive a vehicle whose coverage ended even for a short trip to the store "
    "keep a copy of your insurance card in the vehicle at all times show it to a police officer who asks "
    "for it and bring it to the DMV office when you register the vehicle or renew the registration online\n"
)
LAPSE_DEFINITION = (
    "An insurance lapse means that there is no liability insurance coverage for a vehicle registered in "
    "New York State. Each day of an insurance lapse can be fined.\n\n"
    "Your insurance company tells the DMV when your coverage ends. Plates are issued by the DMV.\n"
)


def test_a_heading_that_asks_the_question_lends_its_score_to_a_long_answer() -> None:
    # Rule 34: the FAQ answer that HTML extraction made one run-on list is long by its nature; the
    # heading above it asks what the user asks, and that part of its score is not cut for length.
    docs = [
        SourceDocument(url="https://dmv.example/lapse", content=LAPSE_DEFINITION),
        SourceDocument(url="https://dmv.example/faq", content=LAPSE_FAQ),
    ]
    passages = extract_passages("How is it possible to avoid a lapse in insurance?", docs)
    assert passages[0].url == "https://dmv.example/faq"
    # The FAQ question is the page's opening heading: it is quoted with its answer (rule 45).
    assert passages[0].content.startswith(
        "How do I avoid an insurance lapse?\nRemember this simple rule: no insurance, no plates!"
    )


def test_a_heading_matching_less_than_its_text_does_not_escape_the_length_penalty() -> None:
    # A heading that names the topic the long text already names ("Upgrading to Flow 5" above text
    # about Flow 5) adds nothing the text does not say: the text's length counts for all of it.
    doc = SourceDocument(url="KB-1", content="## Flow upgrade\n\n" + " ".join(["Flow upgrade steps."] * 30))
    scorer = Scorer("How do I upgrade Flow?", [analyse(doc.content)], [doc])
    text = frozenset({"flow", "upgrad", "step"})
    full, own = 10.0, 6.0
    penalised = full * scorer.factor(0, 90)
    assert window_score(scorer, 0, full, own, text, frozenset({"flow"}), 90) == penalised
    asking = window_score(scorer, 0, full, own, frozenset({"step"}), frozenset({"flow", "upgrad"}), 90)
    assert asking == pytest.approx(own * scorer.factor(0, 90) + (full - own) * scorer.factor(0, 0))


SESSIONS = """# Sessions

## Signing out

A session lasts twelve hours unless you sign out first. Closing the browser does not sign you out.

```
acme logout --all
```

The default idle timeout is 30 minutes, and admins can raise it to 4 hours. When the idle timeout passes, \
the session ends and you must sign in again.

Admins see every session in the audit log.
"""


def test_a_short_paragraph_is_quoted_whole_from_any_of_its_sentences() -> None:
    """The sentence that matches the question's words ("session ends", "sign in again") comes with the one
    before it in its two-sentence paragraph, which holds the figure; a longer paragraph is not taken whole."""
    docs = [SourceDocument(url="https://help.acme.example/sessions", title="Sessions", content=SESSIONS)]
    passages = extract_passages("How long until an idle session ends and I must sign in again?", docs)
    check_verbatim(passages, docs)
    assert any(p.content.startswith("The default idle timeout is 30 minutes") and p.content.endswith("sign in again.")
               for p in passages), [p.content for p in passages]


def test_a_question_asking_for_a_quantity_is_answered_by_the_sentence_that_gives_one() -> None:
    # The first paragraph shares most of the question's words and gives no number; the entry below it says
    # "The default is 14 days.", which shares only "days" with the question: the number is what was asked.
    content = ("# Build cache\n\nThe cleanup job removes old backups of the build cache when it runs every night, "
               "and it keeps the backups of the build cache that a pipeline still uses.\n\n"
               "## cache.backupDays\n\n"
               "The cleanup job removes a backup after this many days. The default is 14 days.\n")
    page = SourceDocument(url="https://docs.example/cache", title="Build cache", content=content)
    question = "How many days does the cleanup job keep a backup of the build cache?"
    quoted = [p.content for p in extract_passages(question, [page])]
    assert any("The default is 14 days." in q for q in quoted)


def test_a_question_about_what_happens_unless_one_chooses_asks_for_the_default() -> None:
    # "if I have not configured one" asks for the default, which the page calls by that word; without it the
    # sentence that names the default shares only "editor" with the question and is left out.
    content = ("# Editor\n\nThe editor opens for every commit message you write, and it opens again for an "
               "interactive rebase of your commits.\n\nAn editor can be any program that waits until you close "
               "the file.\n\n## Choosing one\n\nThe editor is the program set in core.editor. The default is vi.\n")
    page = SourceDocument(url="https://docs.example/editor", title="Editor", content=content)
    question = "Which editor opens for my commit message if I have not configured one?"
    assert any("The default is vi." in p.content for p in extract_passages(question, [page]))
