"""A `corrected` passage downstream: verified, and everything after alignment reads its quote (the source).

The passage said "45 USD" where the page says "40 USD". The answer, the generation prompt and the
citations must carry 40; a model sentence that repeats 45 must not survive `verify`.
"""

from __future__ import annotations

from evident.alignment import IndexCache, SourceDocument, align
from evident.citations.answer import check_answer, parse_answer, render_answer, resolve_citation
from evident.citations.support import GeneratedSentenceSupport
from evident.graph.tracing import describe, summarize
from evident.llm.batching import approx_counter, split_document
from evident.offline.composer import compose_answer
from evident.prompts.render import render_document, render_passages

URL = "https://help.example/fees"
PAGE = ("# Fees\n\nThe refund processing fee is 40 USD for every annual plan that is cancelled early. "
        "Monthly plans are never charged a fee.\n")
PASSAGE = "The refund processing fee is 45 USD for every annual plan that is cancelled early."


def corrected():  # type: ignore[no-untyped-def]
    [d] = align([{"passage_id": "p1", "url": URL, "content": PASSAGE}], [{"url": URL, "content": PAGE}],
                cache=IndexCache())
    assert d.action == "corrected" and d.verified
    assert [(s.passage, s.source) for s in d.substitutions] == [("45", "40")]
    assert "40 USD" in d.quote and "45" not in d.quote
    return d


def test_the_offline_answer_is_written_from_the_quote() -> None:
    answer = compose_answer("What is the refund processing fee?", [corrected()])
    assert "40 USD" in answer and "45" not in answer
    assert f"[{URL}]" in answer


def test_the_generation_prompt_shows_the_source_text() -> None:
    prompt = render_passages([corrected()], [SourceDocument(url=URL, content=PAGE)])
    assert "40 USD" in prompt and "45 USD" not in prompt


def test_verify_removes_a_sentence_with_the_passages_number() -> None:
    d = corrected()
    draft = (f"The refund processing fee is 45 USD for early cancellation of an annual plan. [{URL}]\n"
             f"The refund processing fee is 40 USD for every annual plan that is cancelled early. [{URL}]")
    lines, removed = check_answer(parse_answer(draft), [d], n=5, threshold=0.7,
                                  measure=GeneratedSentenceSupport())
    assert removed == ["The refund processing fee is 45 USD for early cancellation of an annual plan."]
    assert "45" not in render_answer(lines) and "40 USD" in render_answer(lines)
    # The extractive measure (offline answers) judges against the quote too.
    lines, removed = check_answer(parse_answer(draft), [d], n=5, threshold=0.7)
    assert "45" not in render_answer(lines)


def test_citations_point_into_the_source() -> None:
    d = corrected()
    sentence = "The refund processing fee is 40 USD for every annual plan that is cancelled early."
    citation = resolve_citation(sentence, URL, [d], [SourceDocument(url=URL, content=PAGE)], n=5, threshold=0.7)
    assert citation.passage_ids == ["p1"]
    assert citation.quote == sentence and [PAGE[s:e] for s, e in citation.spans] == [sentence]
    assert citation.heading_path == ["Fees"]  # the page's heading, context outside the quote


def test_prompts_show_the_heading_path_outside_the_text() -> None:
    d = corrected().model_copy(update={"heading_path": ["Billing", "Fees"]})
    prompt = render_passages([d], [SourceDocument(url=URL, content=PAGE, title="Billing")])
    assert "headingPath: Billing › Fees\ndocumentContent:\n" + d.quote in prompt
    long = SourceDocument(url=URL, title="Billing", content="# Fees\n\n" + "Plans cost money here. " * 40
                          + "\n\n## Refunds\n\n" + "Refunds take a week. " * 40)
    parts = split_document(long, 120, approx_counter(4.0))
    assert len(parts) > 2 and parts[-1].metadata["heading_path"] == ["Billing", "Fees", "Refunds"]
    shown = render_document(parts[-1])
    assert "section: Billing › Fees › Refunds\ncontent:\n" + parts[-1].content in shown
    assert "section:" not in render_document(long)


def test_traces_count_corrected_passages() -> None:
    summary = summarize("align", {"alignment": [corrected()], "verified": [corrected()]})
    assert summary["corrected"] == 1 and summary["verified"] == 1
    assert summary["decisions"][0]["substitutions"] == 1
    assert "1 corrected" in describe("align", summary)
