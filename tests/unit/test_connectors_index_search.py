"""`LocalIndex.search` returns the top k by score, ties broken by URL, equal to an exhaustive reference."""

from __future__ import annotations

import json

import pytest

from evident.connectors.index.embedded import LocalIndex
from evident.connectors.index.visible_ranking import TIE_MARGIN
from evident.conversation.asking import search_terms


def reference(index: LocalIndex, query: str, k: int) -> list[tuple[str, float]]:
    # Every match (the limit exceeds the corpus), then the contract's order: score, then URL.
    everything = index.mirror.top(search_terms(query), 10_000) if search_terms(query) else []
    return sorted(everything, key=lambda hit: (-hit[1], hit[0]))[:k]


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> LocalIndex:
    folder = tmp_path_factory.mktemp("ties")
    corpus = folder / "c.jsonl"
    records = []
    # Identical pages score identically: more of them than the tie margin, in shuffled URL order.
    for i in sorted(range(TIE_MARGIN + 20), key=lambda i: (i * 37) % 101):
        records.append(
            {"url": f"https://d/same/{i:03d}", "title": "Deploy guide", "text": "Deploy with flowctl deploy."}
        )
    for i in range(5):  # a small tie group
        records.append(
            {"url": f"https://d/pair/{4 - i}", "title": "Rollback", "text": "Rollback with flowctl rollback now."}
        )
    for i in range(30):
        records.append({"url": f"https://d/other/{i}", "title": f"Page {i}",
                        "text": " ".join(["deploy"] * (i % 4 + 1) + ["rollback"] * (i % 3) + [f"word{i}"] * 5)})
    corpus.write_text("\n".join(json.dumps(r) for r in records) + "\n", encoding="utf-8")
    idx = LocalIndex(folder / "i.sqlite3")
    idx.add_corpus(corpus)
    return idx


@pytest.mark.parametrize(
    "query", ["deploy", "rollback", "flowctl", "deploy rollback", "word3 deploy", "nothing-here", "page 7"]
)
@pytest.mark.parametrize("k", [1, 3, 8, 20, 200])
def test_search_equals_the_reference_including_ties(index: LocalIndex, query: str, k: int) -> None:
    found = [(doc.url, score) for doc, score in index.search(query, k)]
    assert found == reference(index, query, k)


def test_ties_are_broken_by_url(index: LocalIndex) -> None:
    urls = [doc.url for doc, _ in index.search("rollback now", 3)]
    assert urls == ["https://d/pair/0", "https://d/pair/1", "https://d/pair/2"]
