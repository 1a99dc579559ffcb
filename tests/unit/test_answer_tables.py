"""Table rows in an answer: a Markdown table cited on the line after it, checked and resolved row by row.

The rows a table shows together (its header and the one row asked about) need not stand together in
the source, so verify judges each row against the passages and a citation resolves to each row's span.
"""

from __future__ import annotations

from pathlib import Path

from evident.alignment import SourceDocument, align
from evident.citations.answer import check_answer, is_table, parse_answer, render_answer, resolve_citation
from evident.context import EvidentContext
from evident.graph import graph

URL = "https://docs.example/errors"
TABLE = ("| Code | Meaning | What happens |\n|---|---|---|\n"
         "| E-2101 | Source unreachable | Retried every minute |\n"
         "| E-2202 | Authentication to sink failed | The pipeline stops after 20 failures |\n"
         "| E-5001 | Internal error | Retried, then the pipeline stops |\n")
PAGE = f"# Error codes\n\nEvery error Flow reports has a code.\n\n{TABLE}\nContact support for other codes.\n"
SHOWN = ("| Code | Meaning | What happens |\n|---|---|---|\n"
         "| E-2202 | Authentication to sink failed | The pipeline stops after 20 failures |")
ANSWER = f"{SHOWN}\n\n[{URL}]\n\nContact support for other codes. [{URL}]"


def verified():  # type: ignore[no-untyped-def]
    decisions = align([{"passage_id": "p1", "url": URL, "content": TABLE.strip()},
                       {"passage_id": "p2", "url": URL, "content": "Contact support for other codes."}],
                      [{"url": URL, "content": PAGE}])
    assert all(d.verified for d in decisions)
    return decisions


def test_a_table_is_one_unit_cited_on_the_line_after_it() -> None:
    lines = parse_answer(ANSWER, [URL])
    [table] = lines[0].sentences
    assert is_table(table.text) and table.text == SHOWN and table.urls == [URL]
    assert [u.text for u in lines[-1].sentences] == ["Contact support for other codes."]
    assert render_answer(lines) == ANSWER
    # Pipes in a sentence are text, and a table with nothing after it is uncited.
    assert parse_answer("Use a | b. [" + URL + "]", [URL])[0].sentences[0].text == "Use a | b."
    assert parse_answer(SHOWN, [URL])[0].sentences[0].urls == []


def test_verify_keeps_a_table_whose_rows_are_each_in_a_passage() -> None:
    lines, removed = check_answer(parse_answer(ANSWER, [URL]), verified(), n=5, threshold=0.5)
    assert removed == [] and render_answer(lines) == ANSWER


def test_verify_removes_a_table_with_a_row_no_passage_holds() -> None:
    invented = SHOWN + "\n| E-9999 | Disk on fire | The building is evacuated |"
    lines, removed = check_answer(parse_answer(f"{invented}\n\n[{URL}]", [URL]), verified(), n=5, threshold=0.5)
    assert removed == [invented] and not any(line.sentences for line in lines)


def test_a_table_citation_resolves_to_each_row() -> None:
    citation = resolve_citation(SHOWN, URL, verified(), [SourceDocument(url=URL, content=PAGE)], n=5, threshold=0.5)
    texts = [PAGE[a:b] for a, b in citation.spans]
    assert texts == ["Code | Meaning | What happens",
                     "E-2202 | Authentication to sink failed | The pipeline stops after 20 failures"]
    assert citation.quote == " … ".join(texts)


def test_the_offline_graph_answers_a_row_as_a_table(examples: Path) -> None:
    out = graph.invoke({"query": "Our pipeline stopped with error TF-2202. How do we fix it?"},
                       context=EvidentContext(corpus=[str(examples)]))
    answer = out["answer"]
    row = "| TF-2202 | Authentication to sink failed | No | The pipeline stops after 20 consecutive failures |"
    header = "| Code | Message | Retryable | What happens |"
    assert row in answer.splitlines() and "- TF-2202" not in answer
    # Under its table's header (quoted with the row, the row above it left out as not asked about).
    lines = answer.splitlines()
    assert lines[lines.index(row) - 2 : lines.index(row)] == [header, "|---|---|---|---|"]
    [table] = [c for c in out["citations"] if is_table(c["sentence"])][:1]
    page = {d["url"]: d["content"] for d in out["documents"]}[table["url"]]
    assert [page[a:b] for a, b in table["spans"]] == [header.strip("| "), row.strip("| ")]
