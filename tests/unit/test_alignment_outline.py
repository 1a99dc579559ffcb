"""Heading paths read from a document's text: Markdown levels, plain-text title lines, HTML definitions."""

from __future__ import annotations

from evident.alignment.models import SourceDocument
from evident.alignment.outline import document_path, heading_path, outline, show_path
from evident.connectors.index.html_text import parse_html
from evident.connectors.index.sections import split_sections

MARKDOWN = """\
# Leave policy

Intro text for everyone.

## Parental leave

Parents get 16 weeks.

### Adoption

Adopting parents get the same.

## Sick leave

Tell your manager on the first day.
"""


def test_markdown_levels_nest_and_a_sibling_closes_its_section() -> None:
    assert heading_path(MARKDOWN, MARKDOWN.index("Adopting"), "HR") == ["HR", "Leave policy", "Parental leave",
                                                                            "Adoption"]
    # "Sick leave" is a sibling of "Parental leave": "Adoption" is closed with it.
    assert heading_path(MARKDOWN, MARKDOWN.index("Tell your"), "HR") == ["HR", "Leave policy", "Sick leave"]
    assert heading_path(MARKDOWN, MARKDOWN.index("Intro"), "") == ["Leave policy"]


def test_a_heading_is_not_above_itself_and_the_title_is_not_repeated() -> None:
    for start in (MARKDOWN.index("## Sick"), MARKDOWN.index("Sick leave")):  # a quote starts at the heading's words
        assert heading_path(MARKDOWN, start, "Leave policy") == ["Leave policy"]
    assert heading_path(MARKDOWN, MARKDOWN.index("Parents"), "Company: Leave Policy") == [
        "Company: Leave Policy", "Parental leave"]


def test_plain_text_title_line_and_unmarked_section_lines() -> None:
    text = ("Renewing your licence\n\nYou can renew online.\n\nFees\n\nThe fee is 40 dollars.\n\n"
            "Deadlines\n\nRenew before it expires.")
    assert [h.level for h in outline(text)] == [1, 2, 2]
    assert heading_path(text, text.index("The fee"), "DMV") == ["DMV", "Renewing your licence", "Fees"]
    assert heading_path(text, text.index("Renew before"), "DMV") == ["DMV", "Renewing your licence", "Deadlines"]


def test_a_definition_term_names_its_description_not_its_neighbours() -> None:
    page = parse_html(
        "<html><head><title>Connections</title></head><body><main><h1>Connections</h1>"
        "<h2>Connection Settings</h2><p>These settings control connections.</p><dl>"
        "<dt><code>max_connections</code> (integer)</dt><dd><p>The maximum number.</p>"
        "<p>The default is typically 100 connections.</p></dd>"
        "<dt><code>superuser_reserved_connections</code> (integer)</dt><dd><p>Slots kept for superusers.</p>"
        "<p>The default value is three connections.</p></dd></dl><h2>Security</h2><p>Use TLS.</p></main></body></html>"
    )
    doc = SourceDocument(url="pg", title=page.title, content=page.text)
    three = page.text.index("The default value is three")
    assert document_path(doc, [(three, three + 10)]) == [
        "Connections", "Connection Settings", "superuser_reserved_connections (integer)"]
    hundred = page.text.index("The default is typically")
    assert document_path(doc, [(hundred, hundred + 5)])[-1] == "max_connections (integer)"
    tls = page.text.index("Use TLS")
    assert heading_path(page.text, page.text.index("These settings"), "Connections") == [
        "Connections", "Connection Settings"]  # the page's h1 says what its title says: once
    assert document_path(doc, [(tls, tls + 3)]) == ["Connections", "Security"]
    assert document_path(doc, []) == []
    assert show_path(["A", "B"]) == "A › B"


def test_terms_over_one_description_are_one_step_and_code_is_never_a_heading() -> None:
    page = parse_html(
        "<main><h2>OPTIONS</h2><dl><dt>-f &lt;file&gt;</dt><dt>--file &lt;file&gt;</dt><dd>Use the given file.</dd>"
        "</dl><h2>EXAMPLES</h2><pre># not a heading\n[core]</pre><p>Sets the mode.</p></main>"
    ).text
    assert heading_path(page, page.index("Use the given"), "git") == ["git", "OPTIONS", "-f <file>, --file <file>"]
    assert heading_path(page, page.index("Sets the mode"), "git") == ["git", "EXAMPLES"]


def test_a_section_of_a_large_document_keeps_the_headings_above_its_start() -> None:
    body = "".join(f"## Part {n}\n\n" + f"Part {n} says something useful here. " * 8 + "\n\n" for n in range(6))
    text = "# Manual\n\n" + body + "### Deep\n\nThe deep fact is here.\n\nAfter it, more text of the deep part follows."
    doc = SourceDocument(url="m", title="Manual", content=text)
    sections = split_sections(doc, 400)
    last = sections[-1]
    assert len(sections) > 2 and last.metadata["section_outline"]
    offset = last.content.index("After it")
    assert document_path(last, [(offset, offset + 1)]) == document_path(doc, [(text.index("After it"), 0)])
    assert document_path(last, [(offset, offset + 1)]) == ["Manual", "Part 5", "Deep"]
