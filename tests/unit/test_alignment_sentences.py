"""Sentence units, the one sentence splitter: exact offsets on noisy real-world page text."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from evident.alignment.sentences import is_noise, split_sentences, split_units, strip_marker, unit_kind

PAGE = """Tessellate Docs › Billing › Refunds & credits
Edit | History | Watch

Last edited by Priya Raman on 3 March 2025

# Refunds and service credits

Tessellate Cloud refunds annual subscriptions within 30 days of the start of the term, e.g. when a team \
signs the wrong plan. Monthly subscriptions are not refundable (see Section 4.2 for the exceptions, i.e. \
outages covered by the SLA). Credits are issued by Tessellate Inc. and not by resellers, resellers, etc. \
in any region. Questions go to Dr. Okafor, the billing lead; she handles approx. 40 cases per month vs. \
12 last year. Ticket No. 4411 tracks the v2.4.1 regression that showed 3.5 GB of storage instead of 35 GB.
Read the full policy at https://docs.tessellate.example/billing/refunds.v2.html. It replaces the 2023 version!
Is a refund taxable? That depends on your country.

Refunds are not available for:
- Add-ons bought through a reseller (i.e. not via Tessellate directly).
- Usage overages that were already invoiced.
  The overage line on the invoice stays, even after a downgrade.
1. Open **Settings › Billing**.
2) Select the subscription and click “Request refund”.

| Plan | Refund window | Credit cap |
|------|---------------|-----------:|
| Annual | 30 days | 100% |
| Monthly | none | 10% |

```bash
tess billing refund --subscription sub_123 --reason "wrong plan"
# prints the refund id
```

This paragraph is hard-wrapped the way plain-text wiki exports are, so a sentence
continues on the next line even though the line is long enough to look finished,
and it only ends here. The next sentence follows.

Das Rückerstattungsfenster beträgt 30 Tage. Danach gibt es keine Erstattung.
返金は30日以内に申請してください。期限を過ぎると返金されません。
Он сказал: «Возврат невозможен». Потом ушёл.

Was this page helpful? Yes No
© 2025 Tessellate Inc. All rights reserved.
"""


def units(text: str) -> list[str]:
    return [text[s:e] for s, e in split_sentences(text)]


def test_offsets_are_exact_and_stripped() -> None:
    for text in (PAGE, PAGE.replace("\n", "\r\n")):
        spans = split_sentences(text)
        assert spans
        for s, e in spans:
            assert 0 <= s < e <= len(text)
            assert text[s:e] == text[s:e].strip()


def test_prose_splits_at_sentence_ends_only() -> None:
    got = units(PAGE)
    assert (
        "Tessellate Cloud refunds annual subscriptions within 30 days of the start of the term, e.g. when a team "
        "signs the wrong plan." in got
    )
    assert (
        "Monthly subscriptions are not refundable "
        "(see Section 4.2 for the exceptions, i.e. outages covered by the SLA)."
        in got
    )
    assert "Credits are issued by Tessellate Inc. and not by resellers, resellers, etc. in any region." in got
    assert (
        "Questions go to Dr. Okafor, the billing lead; she handles approx. 40 cases per month vs. 12 last year." in got
    )
    assert (
        "Ticket No. 4411 tracks the v2.4.1 regression that showed 3.5 GB of storage instead of 35 GB." in got
    )
    assert "Read the full policy at https://docs.tessellate.example/billing/refunds.v2.html." in got
    assert "It replaces the 2023 version!" in got
    assert "Is a refund taxable?" in got
    assert "That depends on your country." in got


def test_no_unit_ends_inside_an_abbreviation_or_number() -> None:
    for text in (PAGE, PAGE.replace("\n", "\r\n")):
        for unit in units(text):
            assert not unit.endswith(("e.g.", "i.e.", "Dr.", "vs.", "No.", "approx.", "Inc.", "v2.", "3."))
            assert not unit.startswith(("4.1", "5 GB", "g. ", "e. "))


def test_markdown_structure_is_one_unit_per_line() -> None:
    got = units(PAGE)
    assert "# Refunds and service credits" in got
    assert "Refunds are not available for:" in got
    assert "- Add-ons bought through a reseller (i.e. not via Tessellate directly)." in got
    assert "1. Open **Settings › Billing**." in got
    assert "2) Select the subscription and click “Request refund”." in got
    assert "| Annual | 30 days | 100% |" in got
    assert "|------|---------------|-----------:|" in got
    assert 'tess billing refund --subscription sub_123 --reason "wrong plan"' in got
    # A hash inside a code fence is code, not a heading.
    kinds = {PAGE[s:e]: k for s, e, k in split_units(PAGE)}
    assert kinds["# prints the refund id"] == "code"
    assert kinds["# Refunds and service credits"] == "heading"
    assert kinds["| Annual | 30 days | 100% |"] == "row"


def test_wrapped_list_items_and_wrapped_prose_stay_whole() -> None:
    got = units(PAGE)
    assert (
        "- Usage overages that were already invoiced.\n  The overage line on the invoice stays, even after a downgrade."
        in got
    )
    assert (
        "This paragraph is hard-wrapped the way plain-text wiki exports are, so a sentence\n"
        "continues on the next line even though the line is long enough to look finished,\n"
        "and it only ends here." in got
    )
    assert "The next sentence follows." in got


def test_an_items_sentences_are_read_inside_it_on_request() -> None:
    text = "- Usage overages are final. The overage line stays, e.g. after a downgrade.\n- One more item."
    assert [text[s:e] for s, e in split_sentences(text)] == [
        "- Usage overages are final. The overage line stays, e.g. after a downgrade.", "- One more item."]
    assert [text[s:e] for s, e in split_sentences(text, inside_items=True)] == [
        "- Usage overages are final.", "The overage line stays, e.g. after a downgrade.", "- One more item."]


def test_crlf_gives_the_same_units() -> None:
    lf = units(PAGE)
    crlf = [u.replace("\r\n", "\n") for u in units(PAGE.replace("\n", "\r\n"))]
    assert crlf == lf


def test_non_latin_sentences() -> None:
    got = units(PAGE)
    assert "Das Rückerstattungsfenster beträgt 30 Tage." in got
    assert "返金は30日以内に申請してください。" in got
    assert "期限を過ぎると返金されません。" in got
    assert "Он сказал: «Возврат невозможен»." in got
    assert not is_noise("返金は30日以内に申請してください。")


def test_html_extracted_short_lines_are_separate_units() -> None:
    text = (
        "Home\nProducts\nPricing\nSecurity overview\n"
        "Tessellate encrypts customer data at rest with AES-256 and in transit with TLS 1.2 or later, "
        "and keys are rotated every 90 days by the platform team.\n"
        "Contact\n"
    )
    got = units(text)
    assert got[:4] == ["Home", "Products", "Pricing", "Security overview"]
    assert got[4].startswith("Tessellate encrypts") and got[4].endswith("platform team.")
    assert got[5] == "Contact"


def test_table_without_outer_pipes() -> None:
    text = "Limits:\n\nPlan | Seats\n--- | ---\nPro | 50\nEnterprise | unlimited\n\nAfter the table."
    kinds = [(text[s:e], k) for s, e, k in split_units(text)]
    assert ("Pro | 50", "row") in kinds
    assert ("Enterprise | unlimited", "row") in kinds
    assert ("After the table.", "prose") in kinds


def test_noise() -> None:
    noisy = [
        "Tessellate Docs › Billing › Refunds & credits",
        "Edit | History | Watch",
        "Home > Docs > API",
        "Last edited by Priya Raman on 3 March 2025",
        "Was this page helpful?",
        "Yes No",
        "|------|---------------|-----------:|",
        "| --- | :---: |",
        "```bash",
        "---",
        "Menu",
        "© 2025 Tessellate Inc. All rights reserved.",
        "Skip to main content",
        "",
        "   ",
        "»",
    ]
    for unit in noisy:
        assert is_noise(unit), unit
    clean = [
        "Refunds are not available for:",
        "- CSV",
        "| Annual | 30 days | 100% |",
        "Use Settings › Billing to request a refund within 30 days.",
        "Free | 5 GB",
        "The privacy policy applies to all customer data we process.",
        "Last year we processed 40 refunds.",
        "# Refunds and service credits",
    ]
    for unit in clean:
        assert not is_noise(unit), unit


def test_strip_marker_and_kind() -> None:
    assert strip_marker("- Usage overages.") == "Usage overages."
    assert strip_marker("12. Click Save.") == "Click Save."
    assert strip_marker("## Refunds ##") == "Refunds"
    assert strip_marker("| Annual | 30 days |") == "Annual | 30 days"
    assert strip_marker("Plain sentence.") == "Plain sentence."
    assert unit_kind("* item") == "item"
    assert unit_kind("**Bold** start of prose.") == "prose"


def test_empty_and_whitespace() -> None:
    assert split_sentences("") == []
    assert split_sentences(" \r\n\t\n ") == []
    assert split_sentences("One") == [(0, 3)]


_LINES = st.sampled_from(
    [
        "# Heading",
        "- item one. Still item.",
        "1. first step",
        "| a | b |",
        "|---|---|",
        "```",
        "~~~",
        "e.g. this",
        "Dr. Who vs. Mr. X etc. Fine.",
        "v2.4.1 is 3.5 GB",
        "https://x.example/a.b?c=d.",
        "   indented continuation",
        "返金。可能！",
        "«Quote.» Next",
        "",
        " ",
        "\t",
    ]
)
_CHARS = st.characters(
    blacklist_categories=("Cs",),
    whitelist_categories=("L", "N", "P", "S", "Z", "Cc"),
)


def _check(text: str) -> None:
    whole = split_sentences(text)
    inside = split_sentences(text, inside_items=True)
    for spans in (whole, inside):
        prev_end = 0
        for s, e in spans:
            assert prev_end <= s < e <= len(text)
            piece = text[s:e]
            assert piece and piece == piece.strip()
            prev_end = e
    # Reading inside items only cuts units further: every unit is covered by its own sentences.
    assert {s for s, _ in whole} <= {s for s, _ in inside} and {e for _, e in whole} <= {e for _, e in inside}


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=_CHARS, max_size=300))
def test_property_any_text(text: str) -> None:
    _check(text)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.one_of(_LINES, st.text(alphabet=_CHARS, max_size=40)), max_size=25),
    st.sampled_from(["\n", "\r\n", "\r", "\n\n", "\u2028"]),
)
def test_property_markdownish_text(lines: list[str], sep: str) -> None:
    _check(sep.join(lines))


def test_read_more_link_labels_are_noise_but_sentences_are_text() -> None:
    # A link label ("Learn more", "Read more about fees") is page chrome; a sentence that starts the
    # same way tells the reader what the page covers, and is often what an answer needs.
    assert is_noise("Learn more")
    assert is_noise("Read more about fees")
    assert is_noise("Learn more.")
    assert not is_noise("Learn more in the sections below to see whether you may qualify.")
    assert not is_noise("Read more about the refund rules before you file a claim.")
