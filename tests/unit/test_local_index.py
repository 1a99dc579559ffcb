"""The SQLite FTS5 index, its incremental refresh, hostile queries and the LangChain retriever."""

from __future__ import annotations

import json
import os
import random
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from langchain_core.documents import Document

from evident.alignment.models import SourceDocument
from evident.connectors.base import to_langchain_document, to_source_document
from evident.connectors.index.corpus import IndexStats
from evident.connectors.index.embedded import IndexFileError, LocalIndex, default_index_path
from evident.connectors.index.fts_query import fts_match_expression
from evident.connectors.index.loaders import CorpusError, CorpusLimits
from evident.connectors.index.retriever import LocalCorpusRetriever
from evident.conversation.asking import MAX_TERMS

DOCS = {
    "vacation.md": "---\nurl: https://wiki/vacation\n---\n# Vacation policy\n\n"
    "Employees receive 25 vacation days per year. "
    "Unused vacation days carry over until March.\n",
    "expenses.md": "---\nurl: https://wiki/expenses\n---\n# Expenses\n\nSubmit expense reports within 30 days. "
    "Receipts are required for every expense above 20 euros.\n",
    "laptops.txt": "Laptop setup\n\nNew laptops are enrolled in device management on the first day. "
    "Running the setup script installs the VPN client.\n",
}


def write(path: Path, text: str, *, bump: int = 0) -> None:
    """Write a file and move its mtime forward, so coarse filesystem clocks still see a change."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    if bump:
        stat = path.stat()
        os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + bump * 1_000_000_000))


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    root = tmp_path / "corpus"
    for name, text in DOCS.items():
        write(root / name, text)
    return root


@pytest.fixture
def index(tmp_path: Path) -> Iterator[LocalIndex]:
    with LocalIndex(tmp_path / "index.sqlite3") as opened:
        yield opened


def urls(results: list[tuple[SourceDocument, float]]) -> list[str]:
    return [doc.url for doc, _ in results]


# -- ranking -----------------------------------------------------------------------------------------


def test_bm25_ranks_the_document_about_the_term_first(index: LocalIndex, corpus: Path) -> None:
    assert index.add_corpus(corpus) == IndexStats(added=3)
    results = index.search("How many vacation days do I get?")
    assert urls(results)[0] == "https://wiki/vacation"
    assert all(score > 0 for _, score in results)
    assert [s for _, s in results] == sorted((s for _, s in results), reverse=True)
    assert urls(index.search("expense receipts"))[0] == "https://wiki/expenses"
    # Porter stemming: "run" finds "Running".
    assert urls(index.search("run laptop setup"))[0] == (corpus / "laptops.txt").resolve().as_uri()


def test_title_match_outranks_body_match(index: LocalIndex, tmp_path: Path) -> None:
    root = tmp_path / "titles"
    filler = " ".join(f"word{i}" for i in range(30))
    write(root / "a.md", f"# Kerberos\n\n{filler} alpha.\n")
    write(root / "b.md", f"# Overview\n\n{filler} kerberos.\n")
    index.add_corpus(root)
    [first, second] = index.search("kerberos")
    assert first[0].title == "Kerberos" and second[0].title == "Overview"
    assert first[1] > second[1]


def test_k_limits_results(index: LocalIndex, corpus: Path) -> None:
    index.add_corpus(corpus)
    assert len(index.search("days", k=1)) == 1
    assert index.search("days", k=0) == []


# -- incremental refresh ------------------------------------------------------------------------------


def test_incremental_reindex_stats(index: LocalIndex, corpus: Path) -> None:
    calls: list[tuple[int, int]] = []
    assert index.add_corpus(corpus, progress=lambda done, total: calls.append((done, total))) == IndexStats(added=3)
    assert calls == [(1, 3), (2, 3), (3, 3)]
    assert index.add_corpus(corpus) == IndexStats(unchanged=3)

    write(corpus / "vacation.md", DOCS["vacation.md"].replace("25", "30"), bump=1)
    assert index.add_corpus(corpus) == IndexStats(updated=1, unchanged=2)
    assert "30 vacation days" in index.get("https://wiki/vacation").content  # type: ignore[union-attr]
    assert urls(index.search("30 vacation"))[0] == "https://wiki/vacation"

    # A touched file with the same content is read again but counts as unchanged.
    write(corpus / "expenses.md", DOCS["expenses.md"], bump=2)
    assert index.add_corpus(corpus) == IndexStats(unchanged=3)

    (corpus / "laptops.txt").unlink()
    assert index.add_corpus(corpus) == IndexStats(unchanged=2, removed=1)
    assert index.search("laptop VPN") == []

    write(corpus / "sub" / "new.md", "# New\n\nA brand new page about parking.\n")
    assert index.add_corpus(corpus) == IndexStats(added=1, unchanged=2)
    assert index.count() == 3


def test_renamed_file_keeps_its_url(index: LocalIndex, corpus: Path) -> None:
    index.add_corpus(corpus)
    (corpus / "vacation.md").rename(corpus / "zz-vacation.md")
    assert index.add_corpus(corpus) == IndexStats(added=1, removed=1, unchanged=2)
    assert index.get("https://wiki/vacation").metadata["path"] == "zz-vacation.md"  # type: ignore[union-attr]


def test_jsonl_origin_is_replaced_when_the_file_changes(index: LocalIndex, tmp_path: Path) -> None:
    path = tmp_path / "corpus.jsonl"
    rows = [{"url": f"https://d/{i}", "title": f"Doc {i}", "text": f"text number {i} about topic{i}"} for i in range(3)]
    path.write_text("\n".join(json.dumps(r) for r in rows))
    assert index.add_corpus(path) == IndexStats(added=3)
    rows = [rows[0], {**rows[1], "text": "rewritten about zebras"}, {"url": "https://d/9", "text": "newcomer"}]
    write(path, "\n".join(json.dumps(r) for r in rows), bump=1)
    assert index.add_corpus(path) == IndexStats(added=1, updated=1, unchanged=1, removed=1)
    assert index.get("https://d/2") is None
    assert urls(index.search("zebras")) == ["https://d/1"]
    assert index.count() == 3


def test_broken_jsonl_raises_and_leaves_index_untouched(index: LocalIndex, tmp_path: Path) -> None:
    path = tmp_path / "corpus.jsonl"
    path.write_text('{"url": "https://a", "text": "kept"}\n')
    index.add_corpus(path)
    write(path, '{"url": "https://b", "text": "new"}\n{broken\n', bump=1)
    with pytest.raises(CorpusError, match=r"corpus.jsonl:2: invalid JSON"):
        index.add_corpus(path)
    assert index.get("https://a") is not None and index.get("https://b") is None


def test_url_claimed_by_two_files_is_an_error_and_the_index_is_kept(index: LocalIndex, tmp_path: Path) -> None:
    root = tmp_path / "dups"
    write(root / "a.md", "---\nurl: https://same\n---\nfrom a")
    write(root / "bin.txt", "")
    skipped: list[tuple[str, str]] = []
    stats = index.add_corpus(root, on_skip=lambda path, reason: skipped.append((path.name, reason)))
    assert stats == IndexStats(added=1, skipped=1) and [name for name, _ in skipped] == ["bin.txt"]
    # A file read before the holder (b < c) and one read after it (0 < a): neither takes the URL.
    for name in ("0.md", "b.md"):
        write(root / name, "---\nurl: https://same\n---\nan impostor")
        with pytest.raises(CorpusError) as caught:
            index.add_corpus(root, on_skip=lambda *_: None)
        assert f"url https://same is also claimed by {(root / 'a.md').resolve()}" in str(caught.value)
        assert str(root / name) in str(caught.value)
        assert index.count() == 1 and index.get("https://same").content == "from a"  # type: ignore[union-attr]
        (root / name).unlink()
    assert index.add_corpus(root, on_skip=lambda *_: None) == IndexStats(unchanged=1, skipped=1)


def test_url_claimed_across_two_corpus_paths_is_an_error(index: LocalIndex, tmp_path: Path) -> None:
    public, restricted = tmp_path / "public", tmp_path / "restricted"
    write(restricted / "page.md", "---\nurl: https://wiki/salaries\nacl: [group:hr]\n---\nthe real page")
    write(public / "page.md", "---\nurl: https://wiki/salaries\n---\nan impostor")
    write(public / "other.md", "---\nurl: https://wiki/other\n---\nsomething else")
    index.refresh([restricted])
    for order in ([public, restricted], [restricted, public]):
        with pytest.raises(CorpusError, match="url https://wiki/salaries is also claimed by"):
            index.refresh(order)
        assert index.count() == 1 and index.get("https://wiki/salaries").content == "the real page"  # type: ignore[union-attr]


def test_a_document_moved_between_files_keeps_its_url(index: LocalIndex, tmp_path: Path) -> None:
    root = tmp_path / "moved"
    write(root / "a.md", "---\nurl: https://wiki/a\n---\nfirst a")
    write(root / "b.md", "---\nurl: https://wiki/b\n---\nthe page")
    index.add_corpus(root)
    # a.md (read first) takes b's URL while b.md gives it up in the same refresh: not two claims.
    write(root / "a.md", "---\nurl: https://wiki/b\n---\nthe page, moved", bump=1)
    write(root / "b.md", "---\nurl: https://wiki/a\n---\nfirst a, moved", bump=1)
    assert index.add_corpus(root) == IndexStats(added=2, removed=2)
    assert index.get("https://wiki/b").content == "the page, moved"  # type: ignore[union-attr]


def test_a_file_may_not_take_a_section_id_of_another(tmp_path: Path) -> None:
    root = tmp_path / "sections"
    write(root / "manual.md", "---\nurl: KB-1\n---\n" + "\n\n".join("word " * 200 for _ in range(10)))
    with LocalIndex(tmp_path / "s.sqlite3", limits=CorpusLimits(section_chars=2000)) as index:
        index.refresh([root])
        sections = index.count()
        write(root / "note.md", "---\nurl: KB-1#section-2\n---\nan impostor")
        with pytest.raises(CorpusError, match=r"note\.md: url KB-1#section-2 is also claimed by .*manual\.md as url "
                                              r"KB-1#section-2 \(a section of KB-1\)"):
            index.refresh([root])
        assert index.count() == sections


def test_one_folder_under_two_corpus_paths_is_not_two_claims(index: LocalIndex, tmp_path: Path) -> None:
    root = tmp_path / "docs"
    write(root / "sub" / "a.md", "---\nurl: https://wiki/a\n---\nthe page")
    skipped: list[str] = []
    stats = index.refresh([root, root / "sub"], on_skip=lambda _, reason: skipped.append(reason))
    assert (stats.added, stats.skipped, index.count()) == (1, 1, 1)
    assert skipped == [f"the same file as {(root / 'sub' / 'a.md').resolve()} (url https://wiki/a)"]


def test_missing_root_raises_corpus_error(index: LocalIndex, tmp_path: Path) -> None:
    with pytest.raises(CorpusError, match="no such file or directory"):
        index.add_corpus(tmp_path / "missing")


# -- hostile queries ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "query",
    [
        '"vacation',
        "vacation AND (days OR",
        "NEAR(vacation days, 2)",
        "vac* days",
        "title:vacation",
        "content: -days ^vacation {x} [y] + ~ ' \\ /",
        "NOT vacation",
        "\x00vacation\x1f",
        "vacation\ud800",
    ],
)
def test_fts_syntax_in_queries_is_plain_text(index: LocalIndex, corpus: Path, query: str) -> None:
    index.add_corpus(corpus)
    assert urls(index.search(query))[0] == "https://wiki/vacation"


@pytest.mark.parametrize("query", ["", "   ", "the of and to is", "?!*()\"':", "😀🎉", "\ud800"])
def test_queries_without_usable_terms_return_nothing(index: LocalIndex, corpus: Path, query: str) -> None:
    index.add_corpus(corpus)
    assert index.search(query) == []


def test_unicode_text_and_diacritics(index: LocalIndex, tmp_path: Path) -> None:
    root = tmp_path / "intl"
    write(root / "fr.md", "# Café\n\nLe crème brûlée est servi à la cantine.")
    write(root / "ja.md", "# 休暇\n\n年次有給休暇 は 20 日 です")
    write(root / "hi.md", "# भाषा\n\nहिन्दी दस्तावेज़")
    index.add_corpus(root)
    assert [d.title for d, _ in index.search("creme brulee")] == ["Café"]
    assert [d.title for d, _ in index.search("CAFÉ")] == ["Café"]
    assert [d.title for d, _ in index.search("休暇")] == ["休暇"]
    assert [d.title for d, _ in index.search("हिन्दी")] == ["भाषा"]


def test_huge_query_is_capped_and_fast(index: LocalIndex, corpus: Path) -> None:
    index.add_corpus(corpus)
    rng = random.Random(7)
    words = [f"w{rng.randrange(10**6)}" for _ in range(20_000)]
    query = "vacation " + " ".join(words)
    assert len(query) > 100_000
    expression = fts_match_expression(query)
    assert expression is not None and expression.count(" OR ") == MAX_TERMS - 1
    started = time.perf_counter()
    results = index.search(query)
    assert time.perf_counter() - started < 1.0
    assert urls(results) == ["https://wiki/vacation"]


# -- persistence, files, concurrency ------------------------------------------------------------------


def test_index_persists_across_reopen(tmp_path: Path, corpus: Path) -> None:
    path = tmp_path / "deep" / "dir" / "index.sqlite3"
    with LocalIndex(path) as index:
        index.add_corpus(corpus)
        before = index.search("vacation days")
    with LocalIndex(path) as index:
        assert index.count() == 3
        assert index.search("vacation days") == before
        doc = index.get("https://wiki/vacation")
        stat = (corpus / "vacation.md").stat()
        # The file's stat is the document's revision (evident/connectors/revisions.py).
        assert doc is not None and doc.title == "Vacation policy"
        assert doc.metadata == {"path": "vacation.md", "revision": f"mtime_ns={stat.st_mtime_ns};size={stat.st_size}"}
        assert index.add_corpus(corpus) == IndexStats(unchanged=3)
        assert index.roots() == [str(corpus.resolve())]
    with pytest.raises(IndexFileError, match="closed"):
        index.search("vacation")


def test_read_only_index_searches_but_refuses_writes(tmp_path: Path, corpus: Path) -> None:
    path = tmp_path / "index.sqlite3"
    with LocalIndex(path) as index:
        index.add_corpus(corpus)
    with LocalIndex(path, read_only=True) as reader:
        assert urls(reader.search("expense"))[0] == "https://wiki/expenses"
        with pytest.raises(IndexFileError, match="read-only"):
            reader.add_corpus(corpus)
    with pytest.raises(IndexFileError, match="no such index"):
        LocalIndex(tmp_path / "absent.sqlite3", read_only=True)


def test_concurrent_searches_from_threads(index: LocalIndex, corpus: Path) -> None:
    index.add_corpus(corpus)
    errors: list[BaseException] = []
    results: list[str] = []

    def worker() -> None:
        try:
            for _ in range(50):
                results.append(urls(index.search("vacation"))[0])
        except BaseException as exc:  # noqa: BLE001 - the assertion below reports it
            errors.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == [] and set(results) == {"https://wiki/vacation"} and len(results) == 400


def test_non_sqlite_file_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "notes.sqlite3"
    path.write_text("these are my notes, not a database " * 100)
    with pytest.raises(IndexFileError) as caught:
        LocalIndex(path)
    message = str(caught.value)
    assert message.startswith(f"{path}: ") and "\n" not in message
    assert "not a database" in message


def test_foreign_sqlite_and_newer_schema_are_refused(tmp_path: Path) -> None:
    foreign = tmp_path / "foreign.sqlite3"
    with sqlite3.connect(foreign) as conn:
        conn.execute("CREATE TABLE customers (id INTEGER)")
    conn.close()
    with pytest.raises(IndexFileError, match="not an EvidenT index"):
        LocalIndex(foreign)

    newer = tmp_path / "newer.sqlite3"
    LocalIndex(newer).close()
    conn = sqlite3.connect(newer)
    with conn:
        conn.execute("UPDATE evident_meta SET value = '99' WHERE key = 'schema_version'")
    conn.close()
    with pytest.raises(IndexFileError, match="newer EvidenT"):
        LocalIndex(newer)


def test_default_index_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVIDENT_INDEX_DIR", str(tmp_path / "indexes"))
    a, b = tmp_path / "a", tmp_path / "b"
    path = default_index_path([a, b])
    assert path.parent == tmp_path / "indexes" and path.suffix == ".sqlite3"
    assert default_index_path([str(b), a]) == path
    assert default_index_path([a]) != path
    monkeypatch.delenv("EVIDENT_INDEX_DIR")
    assert default_index_path([a]).parent == Path("~/.cache/evident/indexes").expanduser()


# -- LangChain retriever and conversions --------------------------------------------------------------


def test_retriever_from_corpus_returns_documents_with_metadata(
    tmp_path: Path, corpus: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EVIDENT_INDEX_DIR", str(tmp_path / "indexes"))
    retriever = LocalCorpusRetriever.from_corpus([corpus], k=2)
    try:
        assert retriever.index_path == default_index_path([corpus])
        docs = retriever.invoke("vacation days")
        assert 1 <= len(docs) <= 2 and all(isinstance(d, Document) for d in docs)
        top = docs[0]
        assert top.page_content.startswith("# Vacation policy")
        assert top.metadata["url"] == "https://wiki/vacation"
        assert top.metadata["title"] == "Vacation policy"
        assert top.metadata["source"] == "local" and top.metadata["source_type"] == "local"
        assert top.metadata["path"] == "vacation.md"
        assert top.metadata["score"] > 0
        assert top.metadata["content_hash"] == to_source_document(top).content_hash
        assert retriever.invoke("the of and") == []
    finally:
        retriever.close()


def test_from_corpus_mirrors_the_given_paths(tmp_path: Path, corpus: Path) -> None:
    other = tmp_path / "other"
    write(other / "parking.md", "# Parking\n\nParking permits are issued by facilities.")
    index_path = tmp_path / "shared.sqlite3"
    LocalCorpusRetriever.from_corpus([corpus, other], index_path=index_path).close()
    retriever = LocalCorpusRetriever.from_corpus(other, index_path=index_path, source_name="handbook")
    try:
        [doc] = retriever.invoke("parking permits vacation")
        assert doc.metadata["title"] == "Parking" and doc.metadata["source"] == "handbook"
    finally:
        retriever.close()


def test_retriever_opens_lazily_and_is_thread_safe(tmp_path: Path, corpus: Path) -> None:
    index_path = tmp_path / "lazy.sqlite3"
    with LocalIndex(index_path) as index:
        index.add_corpus(corpus)
    retriever = LocalCorpusRetriever(index_path=index_path, k=1)
    assert retriever.opened is None
    found: list[str] = []
    def ask() -> None:
        found.append(retriever.invoke("expense")[0].metadata["url"])

    threads = [threading.Thread(target=ask) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    retriever.close()
    assert found == ["https://wiki/expenses"] * 6


def test_source_document_round_trip() -> None:
    original = SourceDocument(
        url="https://wiki/x",
        content="Body text.",
        title="X",
        source="wiki",
        source_type="confluence",
        metadata={"path": "x.md", "groups": ["staff"], "nested": {"a": 1}},
    )
    converted = to_langchain_document(original)
    assert converted.page_content == "Body text."
    assert converted.metadata["url"] == "https://wiki/x" and converted.metadata["groups"] == ["staff"]
    assert to_source_document(converted) == original


def test_fields_win_over_colliding_metadata_and_foreign_documents_convert() -> None:
    doc = SourceDocument(url="https://real", content="c", metadata={"url": "https://evil"})
    assert to_langchain_document(doc).metadata["url"] == "https://real"
    # LangChain's own loaders put the location in "source".
    foreign = Document(
        page_content="text", metadata={"source": "https://site/page", "page": 3, "content_hash": "stale"}
    )
    converted = to_source_document(foreign, source="web")
    assert (converted.url, converted.source, converted.metadata) == ("https://site/page", "web", {"page": 3})
    assert converted.content_hash != "stale"
    with pytest.raises(ValueError, match="no 'url'"):
        to_source_document(Document(page_content="x"))
