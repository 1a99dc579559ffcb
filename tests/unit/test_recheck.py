"""Re-verification of one citation against its document as it reads now (evident/citations/recheck.py), and
what a citation pins of the text it quotes (evident/connectors/revisions.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from langchain_core.retrievers import BaseRetriever

from evident.agent.recheck import CheckCache, recheck_citations
from evident.alignment import SourceDocument
from evident.citations.recheck import recheck
from evident.connectors.chunks import CHUNK_OF, CHUNK_START
from evident.connectors.index.retriever import LocalCorpusRetriever
from evident.connectors.remote.mediawiki import title_in_url
from evident.connectors.revisions import pinned, read_now
from evident.connectors.source import Source
from evident.models import Citation, Principal
from evident.web.recheck import cited_answers

URL = "https://wiki/leave"
TEXT = "Leave policy.\nEmployees receive 30 days of paid vacation per year. Sick leave needs a note after three days."
QUOTE = "Employees receive 30 days of paid vacation per year."


def _doc(text: str, revision: str = "revid=2") -> SourceDocument:
    return SourceDocument(url=URL, content=text, metadata={"revision": revision})


def _citation(text: str = TEXT, quote: str = QUOTE) -> Citation:
    start = text.index(quote)
    return pinned(Citation(sentence=quote, url=URL, spans=[(start, start + len(quote))], quote=quote),
                  _doc(text, "revid=1"))


def test_a_citation_pins_the_hash_and_revision_of_the_text_its_spans_index() -> None:
    citation = _citation()
    assert citation.content_hash == _doc(TEXT).content_hash and citation.revision == "revid=1"
    # A chunk cited at its document's offsets: the document's text was not retrieved, so no hash names it.
    chunk = SourceDocument(url=f"{URL}#chunk-1", content=QUOTE, metadata={CHUNK_OF: URL, CHUNK_START: 14})
    at_document = pinned(Citation(sentence="s", url=URL, span_base="document"), chunk)
    assert at_document.content_hash == "" and at_document.revision == ""
    at_chunk = pinned(Citation(sentence="s", url=URL, span_base="chunk"), chunk)
    assert at_chunk.content_hash == chunk.content_hash


def test_the_same_text_is_unchanged() -> None:
    check = recheck(0, _citation(), _doc(TEXT))
    assert check.outcome == "unchanged" and check.spans_now == check.spans and check.revision_now == "revid=2"


def test_an_edit_elsewhere_after_the_quote_leaves_it_unchanged_at_its_spans() -> None:
    check = recheck(0, _citation(), _doc(TEXT + " Parking is free."))
    assert check.outcome == "unchanged" and check.content_hash_now != check.content_hash


def test_text_added_above_moves_the_quote() -> None:
    now = "New intro paragraph.\n" + TEXT
    check = recheck(3, _citation(), _doc(now))
    assert check.outcome == "moved" and check.citation == 3
    [(start, end)] = check.spans_now
    assert now[start:end] == QUOTE and start == TEXT.index(QUOTE) + len("New intro paragraph.\n")


def test_a_quote_in_segments_moves_segment_by_segment() -> None:
    first, second = "Leave policy.", "Sick leave needs a note after three days."
    spans = [(0, len(first)), (TEXT.index(second), TEXT.index(second) + len(second))]
    citation = pinned(Citation(sentence="s", url=URL, spans=spans, quote=f"{first} … {second}"), _doc(TEXT))
    now = "Header.\n" + TEXT
    check = recheck(0, citation, _doc(now))
    assert check.outcome == "moved" and [now[s:e] for s, e in check.spans_now] == [first, second]


def test_a_reworded_quote_is_changed_with_its_nearest_passage() -> None:
    now = TEXT.replace("30 days", "25 days")
    check = recheck(0, _citation(), _doc(now))
    assert check.outcome == "changed" and check.spans_now == []
    assert check.nearest == QUOTE.replace("30", "25")
    assert [now[s:e] for s, e in check.nearest_spans] == [check.nearest]
    assert [(s.passage, s.source) for s in check.substitutions] == [("30", "25")]
    assert 0 < check.overlap < 1


def test_a_quote_whose_words_are_all_gone_is_changed_with_nothing_near() -> None:
    check = recheck(0, _citation(), _doc("This page was replaced by the travel handbook."))
    assert check.outcome == "changed" and check.nearest == "" and check.overlap == 0.0


def test_an_unreadable_document_is_gone_and_says_nothing_of_the_text_now() -> None:
    check = recheck(0, _citation(), None)
    assert check.outcome == "gone"
    assert (check.content_hash_now, check.revision_now, check.nearest, check.spans_now) == ("", "", "", [])


def test_mediawiki_titles_come_from_both_address_forms() -> None:
    assert title_in_url("http://h/w/index.php/Deploy_process") == "Deploy process"
    assert title_in_url("http://h/w/index.php?title=Team/On_call") == "Team/On call"
    assert title_in_url("http://h/wiki/Caf%C3%A9_menu") == "Café menu"
    assert title_in_url("http://h/other/page") == ""


def test_the_index_gives_a_document_by_id_only_to_a_caller_who_may_see_it(tmp_path: Path) -> None:
    corpus = tmp_path / "pages.jsonl"
    corpus.write_text("\n".join(json.dumps(line) for line in [
        {"url": "KB-1", "title": "Leave", "text": TEXT, "metadata": {"acl": "group:hr", "revision": "v7"}},
        {"url": "KB-2", "title": "Travel", "text": "Economy class for short flights."},
    ]) + "\n", encoding="utf-8")
    retriever = LocalCorpusRetriever.from_corpus(corpus, index_path=tmp_path / "index.sqlite3")
    try:
        hr = Principal(user="ann", groups=["hr"])
        found = retriever.fetch_visible("KB-1", principal=hr)
        # A revision the line states is the document's own; a line without one has none (its file's stat
        # would tell how much the file's other lines weigh, hidden ones included): its content hash pins it.
        assert found is not None and found.content == TEXT and found.metadata["revision"] == "v7"
        assert retriever.fetch_visible("KB-1", principal=Principal(user="bob")) is None
        assert retriever.fetch_visible("KB-1") is None
        assert retriever.fetch_visible("KB-9", principal=hr) is None
        public = retriever.fetch_visible("KB-2")
        assert public is not None and "revision" not in public.metadata
        source = Source(name="local", retriever=retriever)
        assert read_now([source], "KB-1", hr) is not None and read_now([source], "KB-1", None) is None
    finally:
        retriever.close()


def test_a_source_that_cannot_read_by_id_leaves_the_citation_unchecked_not_gone() -> None:
    class SearchOnly(BaseRetriever):
        def _get_relevant_documents(self, query: str, *, run_manager: Any) -> list[Any]:
            return []

    [check] = recheck_citations([_citation()], [Source(name="kb", retriever=SearchOnly())], None)
    assert check.outcome == "unchecked" and "read a document by its id" in check.reason


def test_a_quote_met_again_against_the_same_text_is_answered_from_the_cache() -> None:
    cache = CheckCache(size=2)
    citation, now = _citation(), _doc(TEXT.replace("30 days", "25 days"), "revid=3")
    first = cache.check(0, citation, now, n=5, threshold=0.7)
    again = cache.check(4, citation.model_copy(update={"sentence": "other"}), now, n=5, threshold=0.7)
    assert (cache.misses, cache.hits) == (1, 1)
    assert again.model_dump(exclude={"citation", "sentence"}) == first.model_dump(exclude={"citation", "sentence"})
    assert (again.citation, again.sentence, again.outcome) == (4, "other", "changed")
    # Another text is another entry; the oldest goes when the cache is full.
    cache.check(0, citation, _doc(TEXT), n=5, threshold=0.7)
    cache.check(0, citation, _doc("Header.\n" + TEXT), n=5, threshold=0.7)
    cache.check(0, citation, now, n=5, threshold=0.7)
    assert (cache.misses, cache.hits) == (4, 1)


def test_a_quote_of_a_chunk_still_in_its_document_is_unchanged_whatever_its_offsets() -> None:
    chunk = SourceDocument(url=f"{URL}#chunk-1", content=QUOTE, metadata={CHUNK_OF: URL})
    citation = pinned(Citation(sentence=QUOTE, url=URL, spans=[(0, len(QUOTE))], quote=QUOTE, span_base="chunk"),
                      chunk)
    check = recheck(0, citation, _doc(TEXT))
    assert check.outcome == "unchanged" and check.spans_now == [(TEXT.index(QUOTE), TEXT.index(QUOTE) + len(QUOTE))]
    assert recheck(0, citation, _doc(TEXT.replace("30", "25"))).outcome == "changed"


def test_a_thread_without_answers_or_with_odd_messages_has_nothing_to_recheck() -> None:
    messages = ["text", {"type": "human", "content": "q"}, {"type": "ai", "additional_kwargs": "x"},
                {"type": "ai", "id": "m1", "additional_kwargs": {"standalone_query": "q1", "citations": []}}]
    assert cited_answers({"messages": messages}) == [{"message_id": "m1", "query": "q1", "citations": []}]
    assert cited_answers({}) == [] and cited_answers({"messages": "x"}) == []
