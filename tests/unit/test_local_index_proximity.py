"""Proximity in the embedded index's ranking: consecutive query words found together rank a page higher."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import tantivy

from evident.connectors.index import ranking
from evident.connectors.index.embedded import LocalIndex
from evident.connectors.index.ranking import PHRASE_SLOP
from tests.support.index import build, urls

# Both pages hold the same words the same number of times in texts of the same length, so BM25 over
# single words ties them and the url order ("a-…" first) would decide; only proximity tells them apart.
SCATTERED = "Retirement plans change often. Read the page about survivor benefits first."
TOGETHER = "Read the page about retirement benefits first. Survivor plans change often."


def test_words_together_outrank_the_same_words_apart(tmp_path: Path) -> None:
    with build(tmp_path, [
        {"url": "a-scattered", "title": "Page one", "text": SCATTERED},
        {"url": "b-together", "title": "Page two", "text": TOGETHER},
    ]) as index:
        assert urls(index, "retirement benefits") == ["b-together", "a-scattered"]
        # Each page's single-word score is the same: only the phrase clause differs.
        scores = dict((doc.url, score) for doc, score in index.search("retirement benefits", 8))
        assert scores["b-together"] > scores["a-scattered"]


# (query, page "a-…", page "b-…"): the same words in both, together (in the query's order, at most
# PHRASE_SLOP words apart) only in "b-…", which must rank first although the url order favours "a-…".
CASES = [
    # A small word between still counts as together.
    ("How do I apply retirement?", ("Page one", "Apply for today. Other rules cover retirement."),
     ("Page two", "Apply for retirement. Other rules cover today.")),
    # Order matters: "benefits retirement" is not the phrase "retirement benefits".
    ("retirement benefits", ("Page one", "Survivor benefits retirement rules."),
     ("Page two", "Survivor rules retirement benefits.")),
    # A phrase in the title counts like one in the text.
    ("dental insurance", ("Dental rules and insurance", "Coverage for veterans."),
     ("Dental insurance and rules", "Coverage for veterans.")),
]


@pytest.mark.parametrize(("query", "apart", "together"), CASES)
def test_words_together_rank_first(
    tmp_path: Path, query: str, apart: tuple[str, str], together: tuple[str, str]
) -> None:
    assert PHRASE_SLOP >= 1
    records = [{"url": "a-apart", "title": apart[0], "text": apart[1]},
               {"url": "b-together", "title": together[0], "text": together[1]}]
    with build(tmp_path, records) as index:
        assert urls(index, query) == ["b-together", "a-apart"]


def test_repeated_and_single_words_search_as_before(tmp_path: Path) -> None:
    with build(tmp_path, [
        {"url": "a-other", "title": "Page one", "text": "Nothing here."},
        {"url": "b-vpn", "title": "Page two", "text": "The VPN client is installed by the setup script."},
    ]) as index:
        assert urls(index, "VPN") == ["b-vpn"]
        assert urls(index, "vpn vpn VPN vpn") == ["b-vpn"]


def test_a_mirror_without_positions_is_rebuilt(tmp_path: Path) -> None:
    # An index written before the phrase clauses (format 4) has no word positions, which phrase
    # queries need: opening it with this version rebuilds the mirror, and then proximity counts.
    def frequencies_only() -> tantivy.Schema:
        builder = tantivy.SchemaBuilder()
        builder.add_text_field("url", stored=True, tokenizer_name="raw", index_option="basic")
        builder.add_text_field("text", tokenizer_name="en_stem", index_option="freq")
        return builder.build()

    records = [{"url": "a-scattered", "title": "Page one", "text": SCATTERED},
               {"url": "b-together", "title": "Page two", "text": TOGETHER}]
    with build(tmp_path, records) as built:
        generation, documents = built.generation, built.count()
    # What that version left beside the file: its mirror, and its marker.
    directory = tmp_path / "i.sqlite3.tantivy"
    shutil.rmtree(directory)
    directory.mkdir()
    writer = tantivy.Index(frequencies_only(), path=str(directory)).writer()
    for record in records:
        writer.add_document(tantivy.Document(url=record["url"], text=f"{record['title']} {record['text']}"))
    writer.commit()
    writer.wait_merging_threads()
    marker = directory / "evident-sync.json"
    marker.write_text(json.dumps({"format": 4, "generation": generation, "documents": documents, "files": {}}),
                      encoding="utf-8")
    with LocalIndex(tmp_path / "i.sqlite3") as index:
        assert json.loads(marker.read_text(encoding="utf-8"))["format"] == ranking.MIRROR_FORMAT
        assert index.mirror_generation is not None  # served by the rebuilt mirror, not FTS5
        assert urls(index, "retirement benefits") == ["b-together", "a-scattered"]
