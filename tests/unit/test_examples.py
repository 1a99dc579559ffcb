"""The bundled example corpus and question set are consistent with each other and with the loader.

The questions' gold evidence must be findable, verbatim, in the text the loader produces for the gold
documents; otherwise every evaluation on the examples would silently measure nothing.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import pytest

from evident.connectors.index.loaders import load_corpus

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
CORPUS = EXAMPLES / "corpus"
QUESTIONS = EXAMPLES / "questions.jsonl"

CATEGORIES = {"informational", "analytical", "application"}
SOURCE_TYPES = {"wiki", "docs", "policy"}
URL_PREFIXES = {
    "wiki": "https://wiki.tessellate.example/",
    "docs": "https://docs.tessellate.example/",
    "policy": "https://policies.tessellate.example/",
}
_WS = re.compile(r"\s+")


def _collapse(text: str) -> str:
    return _WS.sub(" ", text).strip()


@pytest.fixture(scope="module")
def documents():
    skipped: list[tuple[Path, str]] = []
    docs = list(load_corpus(CORPUS, on_skip=lambda path, reason: skipped.append((path, reason))))
    assert not skipped, f"loader skipped example files: {skipped}"
    return docs


@pytest.fixture(scope="module")
def questions() -> list[dict]:
    rows = []
    with QUESTIONS.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if line.strip():
                row = json.loads(line)
                assert isinstance(row, dict), f"line {number} is not a JSON object"
                rows.append(row)
    return rows


def test_corpus_size_and_formats(documents):
    assert len(documents) >= 30
    files = [p for p in CORPUS.rglob("*") if p.is_file()]
    suffixes = Counter(p.suffix for p in files)
    assert len(files) == len(documents), "every example file must load as exactly one document"
    assert suffixes[".html"] >= 5
    assert suffixes[".txt"] >= 2
    assert suffixes[".md"] > suffixes[".html"] + suffixes[".txt"]


def test_long_documents(documents):
    long_docs = [d.url for d in documents if len(d.content.split()) > 2000]
    assert len(long_docs) >= 6, long_docs


def test_urls_unique_and_metadata(documents):
    urls = [d.url for d in documents]
    assert len(urls) == len(set(urls))
    for doc in documents:
        assert doc.source_type in SOURCE_TYPES, (doc.url, doc.source_type)
        assert doc.url.startswith(URL_PREFIXES[doc.source_type]), doc.url
        assert doc.title.strip(), doc.url
        assert doc.content.strip(), doc.url
        # Front matter must have been parsed, not left in the body.
        assert not doc.content.startswith("---"), doc.url
        assert "source_type:" not in doc.content[:300], doc.url


def test_question_fields(questions):
    ids = [q.get("id") for q in questions]
    assert len(ids) == len(set(ids)), "question ids must be unique"
    for q in questions:
        assert set(q) >= {"id", "query", "category", "answerable", "gold_urls", "gold_evidence"}, q
        assert isinstance(q["id"], str) and q["id"]
        assert isinstance(q["query"], str) and q["query"].strip()
        assert q["category"] in CATEGORIES, q
        assert isinstance(q["answerable"], bool), q
        assert isinstance(q["gold_urls"], list) and all(isinstance(u, str) for u in q["gold_urls"]), q
        assert isinstance(q["gold_evidence"], list) and all(isinstance(e, str) for e in q["gold_evidence"]), q
        if q["answerable"]:
            assert q["gold_urls"] and q["gold_evidence"], q["id"]
        else:
            assert q["gold_urls"] == [] and q["gold_evidence"] == [], q["id"]


def test_question_counts(questions):
    assert len(questions) >= 40
    unanswerable = [q for q in questions if not q["answerable"]]
    assert len(unanswerable) >= 8
    assert len(questions) - len(unanswerable) >= 30
    assert {q["category"] for q in questions} == CATEGORIES


def test_gold_urls_exist(documents, questions):
    urls = {d.url for d in documents}
    for q in questions:
        for url in q["gold_urls"]:
            assert url in urls, f"{q['id']}: gold url {url} is not in the corpus"


def test_gold_evidence_is_verbatim(documents, questions):
    texts = {d.url: _collapse(d.content) for d in documents}
    for q in questions:
        gold_texts = [texts[url] for url in q["gold_urls"] if url in texts]
        for sentence in q["gold_evidence"]:
            needle = _collapse(sentence)
            assert needle, q["id"]
            assert any(needle in text for text in gold_texts), (
                f"{q['id']}: evidence not found verbatim in its gold documents: {sentence!r}"
            )


def test_every_gold_url_has_evidence(documents, questions):
    """Each gold document contributes at least one evidence sentence (no decorative gold URLs)."""
    texts = {d.url: _collapse(d.content) for d in documents}
    for q in questions:
        for url in q["gold_urls"]:
            assert any(_collapse(e) in texts[url] for e in q["gold_evidence"]), f"{q['id']}: {url} has no evidence"
