"""Offline extractor: how far a window reaches and which windows are kept (docs/evaluation.md, "How the
offline engine decides": choosing windows)."""

from __future__ import annotations

from evident.alignment.models import SourceDocument
from evident.offline.composer import compose_answer
from evident.offline.extractor import extract_passages, join_openings
from evident.offline.terms import CONTINUATIONS
from evident.offline.units import analyse
from evident.offline.windows import (
    candidate_windows,
    is_term,
    names_code,
    opening_heading,
    table_header,
    window_at,
)
from tests.support.offline import cited_sentences, decision

DEFERMENT = SourceDocument(url="KB-5", title="Deferment", content=(
    "Student loan deferment lets you pause payments. You must apply through your servicer. "
    "A decision takes about a month. However, interest may still accrue during the pause. "
    "The office is closed on Sundays.\n\nDeferment requests are reviewed monthly."))

COMPLAINTS = SourceDocument(url="KB-6", title="Contact us", content=(
    "Opening hours\n\nOur phone lines open at 8:00 on weekdays. Letters are answered in a week.\n\n"
    "Feedback\n\nWe read every complaint about our service. You can submit a complaint online at any "
    "time of day, or send it by mail. We answer within ten days."))
COMPLAINT_QUERY = "How do I submit a complaint about the service online?"


def test_a_window_reads_on_into_a_sentence_that_takes_it_up() -> None:
    # Rule 40: past its three units the window still quotes "However, ...", which qualifies what it
    # says; the sentence after that, a new thought, stays out, and so does the next paragraph.
    passages = extract_passages("How does student loan deferment work?", [DEFERMENT])
    assert passages[0].content == (
        "Student loan deferment lets you pause payments. You must apply through your servicer. "
        "A decision takes about a month. However, interest may still accrue during the pause."
    )


def test_without_a_continuation_word_the_window_stops_at_its_length() -> None:
    # The same page, its fourth sentence no longer opening with "However": only that word read it on.
    assert "however" in CONTINUATIONS
    plain = DEFERMENT.model_copy(update={"content": DEFERMENT.content.replace("However, interest", "Interest")})
    passages = extract_passages("How does student loan deferment work?", [plain])
    assert passages[0].content.endswith("A decision takes about a month.")


def test_what_a_window_reads_on_into_does_not_score() -> None:
    # The sentence read on to is quoted, not scored: the window's score is that of its own units.
    scorer, units, windows = candidate_windows("How does student loan deferment work?", [DEFERMENT])
    best = windows[0]
    assert (best.first, best.last, best.end) == (0, 2, 3)
    alone = window_at(scorer, units[0], 0, best.first, best.last, 0)
    assert alone is not None and alone.score == best.score


def test_a_chosen_opening_joins_the_passage_it_introduces() -> None:
    # Rule 41: the paragraph's opening, chosen as a lower-ranked window, is quoted in front of the
    # better window right after it, at that window's rank, in the page's order.
    passages = extract_passages(COMPLAINT_QUERY, [COMPLAINTS])
    assert [p.content for p in passages] == [
        "We read every complaint about our service. You can submit a complaint online at any time of day, "
        "or send it by mail. We answer within ten days."
    ]


def test_without_joining_the_opening_comes_last() -> None:
    # The two windows the passage above joins, as ranked: the opening scores below the text after it.
    _, units, windows = candidate_windows(COMPLAINT_QUERY, [COMPLAINTS])
    text = COMPLAINTS.content
    assert [text[units[0][w.lead].start : units[0][w.end].end] for w in windows[:2]] == [
        "You can submit a complaint online at any time of day, or send it by mail. We answer within ten days.",
        "We read every complaint about our service.",
    ]


def test_only_an_opening_in_the_same_paragraph_right_before_is_joined() -> None:
    units = [analyse(COMPLAINTS.content).units]
    # units: 0 heading, 1-2 first paragraph, 3 heading, 4-6 second paragraph
    assert join_openings([(0, 5, 6), (0, 4, 4)], units) == [(0, 4, 6)]
    # Text after the better window stays a passage of its own.
    assert join_openings([(0, 4, 4), (0, 5, 6)], units) == [(0, 4, 4), (0, 5, 6)]
    # Not across a heading or a paragraph break, nor over a gap, nor across documents.
    assert join_openings([(0, 4, 6), (0, 1, 2)], units) == [(0, 4, 6), (0, 1, 2)]
    assert join_openings([(0, 4, 6), (0, 3, 3)], units) == [(0, 4, 6), (0, 3, 3)]
    assert join_openings([(0, 6, 6), (0, 4, 4)], units) == [(0, 6, 6), (0, 4, 4)]
    assert join_openings([(0, 5, 6), (1, 4, 4)], units + units) == [(0, 5, 6), (1, 4, 4)]


EXIT = SourceDocument(url="https://studentaid.example/exit-counseling", title="Exit Counseling", content=(
    "Exit Counseling\n\n"
    "What is Exit Counseling?\n"
    "Exit counseling prepares you to repay your federal student loan. It explains your repayment options.\n\n"
    "When to complete exit counseling\n"
    "Complete exit counseling each time you leave school or drop below half-time enrollment."))
# units: 0 page title line, 1 opening heading, 2-3 its text, 4 section heading, 5 its text


def test_a_window_under_the_pages_opening_heading_quotes_it() -> None:
    # Rule 45: the heading right under the page's title line says what the page answers; quoted with
    # the text under it, the composer can show it right before that text.
    passages = extract_passages("Why do I need exit counseling?", [EXIT])
    assert passages[0].content.startswith(
        "What is Exit Counseling?\nExit counseling prepares you to repay your federal student loan."
    )


def test_only_the_opening_heading_right_above_the_text_is_taken() -> None:
    units = analyse(EXIT.content).units
    assert opening_heading(units, 2, set(), EXIT.content) == 1
    # Not the second sentence under it, nor text under a deeper section heading, nor a heading
    # another window already quotes.
    assert opening_heading(units, 3, set(), EXIT.content) == 3
    assert opening_heading(units, 5, set(), EXIT.content) == 5
    assert opening_heading(units, 2, {1}, EXIT.content) == 2
    # Text right under the page's first line: that line is the page's title, which the citation names.
    text = "Exit Counseling\nExit counseling prepares you to repay your loan."
    assert opening_heading(analyse(text).units, 1, set(), text) == 1
    # A heading with text above it on the page opens a section, not the page.
    text = "Exit Counseling\nIt is required.\n\nWhat is it?\nIt prepares you to repay."
    assert opening_heading(analyse(text).units, 3, set(), text) == 3


def test_a_title_line_run_together_with_breadcrumbs_still_counts_as_the_title() -> None:
    # Rule 56: a page's first line glued to the text after it is too long for a heading, but it is
    # still the page's title line: the heading under it opens the page's text and is quoted with it.
    text = (
        "Direct PLUS Loan Application for Graduate StudentsWilliam D. Ford Federal Direct Loan Program"
        "Federal Direct PLUS Loan Request for Supplemental Information\n\n"
        "What is a Direct PLUS Loan Application?\n"
        "This is a request for supplemental information about your loan. Some schools have a different process."
    )
    glued = analyse(text).units
    assert not glued[0].heading and glued[1].heading
    assert opening_heading(glued, 2, set(), text) == 1
    # A first line that ends like a sentence is the page's text: the heading under it opens a section.
    text = ("Employees may work remotely on two days a week, agreed with their manager in advance.\n\n"
            "How do I get a laptop for remote work?\n"
            "Laptops for remote work are provided by the IT service desk within five days.")
    assert opening_heading(analyse(text).units, 2, set(), text) == 2


def test_the_opening_heading_does_not_change_the_windows_score() -> None:
    scorer, units, windows = candidate_windows("Why do I need exit counseling?", [EXIT])
    best = windows[0]
    assert (best.lead, best.first) == (1, 2)
    alone = window_at(scorer, units[0], 0, best.first, best.last, best.first, best.end)
    assert alone is not None and alone.score == best.score and alone.lead == best.first


def test_the_answer_shows_the_opening_heading_right_before_its_sentence() -> None:
    query = "Why do I need exit counseling?"
    passages = extract_passages(query, [EXIT])
    answer = compose_answer(query, [decision(p.passage_id, p.url, p.content) for p in passages])
    sentences = [s for s, _ in cited_sentences(answer)]
    assert sentences[:2] == [
        "What is Exit Counseling?", "Exit counseling prepares you to repay your federal student loan.",
    ]


GC = SourceDocument(url="https://git.example/git-gc.html", title="git-gc(1)", content=(
    "# git-gc(1)\n\n## CONFIGURATION\n\n### gc.rerereResolved\n\n"
    "Records of conflicted merge you resolved earlier are kept for this many days when git rerere gc is run. "
    "The default is 60 days.\n\n### gc.rerereUnresolved\n\n"
    "Records of conflicted merge you have not resolved are kept for this many days when git rerere gc is run. "
    "The default is 15 days.\n\n## Payment\n\nRerere keeps its records for free."))
GC_QUERY = "For how many days are resolved conflict records kept?"


def test_a_definition_is_quoted_under_its_term() -> None:
    # "The default is 60 days." says whose default only under its term: the window starting at the
    # term's description quotes the term (a heading of one word), a section title ("Payment") is not.
    from evident.alignment import align

    assert _quoted(GC_QUERY, [GC])[0].startswith("### gc.rerereResolved\n\nRecords of conflicted merge you resolved")
    assert "Rerere keeps its records for free." in _quoted("Are rerere records free?", [GC])
    # Aligned (the quote starts at the term's first word), the answer shows the term with its text.
    passages = extract_passages(GC_QUERY, [GC])
    answer = compose_answer(GC_QUERY, align(passages, [GC]))
    assert cited_sentences(answer)[0][0].startswith("gc.rerereResolved Records of conflicted merge you resolved")


def test_a_term_names_one_thing_per_comma() -> None:
    text = "### gc.pruneExpire\n\n### -u, --include-untracked\n\n## 9. Payment\n\n## Submitting expenses\n\nText."
    units = analyse(text).units
    assert [is_term(u, text) for u in units[:4]] == [True, True, False, False]


RENEWAL_QUERY = "How do I renew my driving licence, and what is the renewal fee?"


def _quoted(query: str, docs: list[SourceDocument]) -> list[str]:
    _, units, windows = candidate_windows(query, docs)
    return [docs[w.doc].content[units[w.doc][w.lead].start : units[w.doc][w.end].end] for w in windows]


def test_each_pages_best_window_takes_the_rest_of_its_paragraph() -> None:
    # Rule 48: like the answer's lead (rule 24), the best window of every other page reads its
    # paragraph on, although "Queues are long on Mondays." shares no word with the question.
    lead = SourceDocument(url="KB-1", title="Renewals", content=(
        "Renew your driving licence online before it expires. The renewal fee is paid by card."))
    counter = SourceDocument(url="KB-2", title="Counter", content=(
        "At a counter the renewal fee for a driving licence is paid in cash. Queues are long on Mondays."))
    assert _quoted(RENEWAL_QUERY, [lead, counter])[1] == counter.content


def test_a_window_opening_a_section_takes_the_rest_of_its_paragraph() -> None:
    # Rule 49: the first sentence under a heading starts a thought; the window there is the page's
    # second, yet reads on into "Prices change every April." A window deeper in the section does not.
    doc = SourceDocument(url="KB-7", title="Motorists", content=(
        "Renew your driving licence online before it expires. Renewal takes ten minutes.\n\n"
        "## Payment\n\nThe renewal fee is paid by card. Prices change every April.\n\n"
        "## Other\n\nOffices close at five."))
    assert _quoted(RENEWAL_QUERY, [doc])[1] == "The renewal fee is paid by card. Prices change every April."
    text = doc.content.replace("## Payment\n\n", "## Payment\n\nPay at the desk.\n")
    deeper = doc.model_copy(update={"content": text})
    assert _quoted(RENEWAL_QUERY, [deeper])[1] == "The renewal fee is paid by card."


def test_a_name_the_page_holds_is_a_shared_word() -> None:
    # Rule 52: on a page naming Tessellate, "Passwords must be at least 14 characters long." shares
    # two words with the question, the name and "password", and is no coincidence of one word.
    doc = SourceDocument(url="KB-11", title="Tessellate account security", content=(
        "Tessellate sets a minimum length for every password.\n\nRotate keys yearly.\n\n"
        "Passwords must be at least 14 characters long.\n\nSessions end after an hour."))
    rule = "Passwords must be at least 14 characters long."
    named = extract_passages("What is the minimum length for a password at Tessellate?", [doc],
                             secondary_score_ratio=0.1)
    assert [p.content for p in named] == ["Tessellate sets a minimum length for every password.", rule]
    # Without the name, the sentence shares one word with the question and stays out.
    unnamed = extract_passages("What is the minimum length for a password?", [doc], secondary_score_ratio=0.1)
    assert rule not in [p.content for p in unnamed]


PROCUREMENT = SourceDocument(url="KB-12", title="Procurement", content=(
    "Approval thresholds\n\nThe approvals you need depend on the total value of the purchase.\n\n"
    "Total value | How to buy | Approvals\n"
    "Under 1,000 USD | Corporate card or expense report | Your manager\n"
    "1,000 to 25,000 USD | Purchase request; Finance issues a purchase order | Your manager and Finance\n"
    "25,000 to 100,000 USD | Purchase request with three competing quotes | Your director and the CFO\n"
    "Over 100,000 USD | Purchase request and a business case | As above, plus the CEO\n\n"
    "Emergency purchases are approved afterwards."))


def test_a_table_row_is_quoted_under_its_header() -> None:
    # An HTML table read as text has no |---| line: its first row is its header. A row read without it
    # is a line of values; the window quotes from the header when few rows lie between them.
    query = "Who approves a 40,000 USD purchase with competing quotes?"
    [table] = [p for p in extract_passages(query, [PROCUREMENT]) if "|" in p.content]
    assert table.content.startswith("Total value | How to buy | Approvals\n")
    answer = compose_answer(query, [decision("p1", "KB-12", table.content)])
    assert answer.startswith("| Total value | How to buy | Approvals |\n|---|---|---|\n")
    assert "| 25,000 to 100,000 USD | Purchase request with three competing quotes | Your director and the CFO |" \
        in answer.splitlines()
    # More rows between them than a window holds: the row is quoted alone.
    units = analyse(PROCUREMENT.content).units
    last = max(u.idx for u in units if u.kind == "row")
    assert table_header(units, last, set(), 3) == next(u.idx for u in units if u.kind == "row")
    assert table_header(units, last, set(), 2) == last
    # Another table's header above a rule is not this table's.
    split = analyse("| Key | Value |\n|---|---|\n| a | 1 |\n\n---\n\n| b | 2 |").units
    assert table_header(split, len(split) - 1, set(), 3) == len(split) - 1


def test_a_term_that_kept_its_markup_is_shown_and_kept_with_its_description() -> None:
    # The quote kept the term's "###" (it starts with no word to trim to): the term is the same line as
    # one that lost it, and stays with its description when a longer answer is cut to the cap.
    stash = decision("p1", "https://kb.test/1", "### --no-include-untracked\n\n"
                     "When used with the push and save commands, all untracked files are also stashed.")
    others = [decision(f"p{n}", f"https://kb.test/{n}", f"Untracked files number {n} are listed by the status command.")
              for n in range(2, 9)]
    answer = compose_answer("How do I stash untracked files?", [stash, *others])
    sentences = [s for s, _ in cited_sentences(answer)]
    assert sentences[0] == "--no-include-untracked When used with the push and save commands, all untracked " \
                           "files are also stashed."
    # A section title in heading markup is still never a sentence of the answer.
    titled = decision("p1", "https://kb.test/1", "### Eligibility\n\nUntracked files are stashed by the push command.")
    assert "Eligibility" not in compose_answer("How do I stash untracked files?", [titled])


def test_a_definition_entry_is_quoted_whole_under_its_term() -> None:
    # A reference entry "name (type)" whose default comes fourth: a window of three sentences cut it off,
    # and the answer took the neighbouring entry's "The default is 30 seconds." for it.
    doc = SourceDocument(url="KB-8", title="Snapshots", content=(
        "### Snapshots\n\n#### snapshot_interval (integer)\n\n"
        "Longest time between two automatic snapshots. A value without units is read as seconds. "
        "Values from 30 seconds to one day are accepted. The default is ten minutes (10min). "
        "A longer interval makes a restore slower.\n\n"
        "#### snapshot_warning (integer)\n\n"
        "Logs a warning when snapshots follow each other faster than this. The default is 30 seconds (30s).\n"))
    first = _quoted("How long is the time between automatic snapshots by default?", [doc])[0]
    assert first.startswith("#### snapshot_interval (integer)") and "The default is ten minutes (10min)." in first
    assert "30s" not in first
    # A one-word section title ("## Payment") is not a name in code: its section is not quoted whole.
    assert not names_code("## Payment") and names_code("#### snapshot_interval (integer)")
