"""The Tantivy mirror of the embedded index: kept in step with SQLite, rebuilt when it is not."""

from __future__ import annotations

import json
import math
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from evident.connectors.index import embedded
from evident.connectors.index.embedded import LocalIndex
from evident.connectors.index.ranking import TantivyMirror
from evident.connectors.index.visible_ranking import IDF_FLOOR, idf_ratio
from evident.connectors.visibility import ANONYMOUS_TOKENS, AUTHENTICATED
from tests.support.index import build


def write_jsonl(path: Path, records: list[dict[str, str]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")


RECORDS = [
    {"url": "https://w/vacation", "title": "Vacation policy", "text": "Employees receive 25 vacation days per year."},
    {"url": "https://w/expenses", "title": "Expenses", "text": "Submit expense reports within 30 days."},
    {"url": "https://w/laptops", "title": "Laptop setup", "text": "The setup script installs the VPN client."},
]


def mirror_dir(path: Path) -> Path:
    return Path(f"{path}.tantivy")


def urls(index: LocalIndex, query: str, k: int = 8) -> list[str]:
    return [doc.url for doc, _ in index.search(query, k)]


@pytest.fixture
def built(tmp_path: Path) -> Path:
    write_jsonl(tmp_path / "c" / "docs.jsonl", RECORDS)
    target = tmp_path / "i.sqlite3"
    with LocalIndex(target) as index:
        index.add_corpus(tmp_path / "c" / "docs.jsonl")
    return target


def test_search_is_served_by_tantivy(built: Path) -> None:
    assert (mirror_dir(built) / "meta.json").exists()
    with LocalIndex(built, read_only=True) as index:
        assert index.mirror_generation is not None  # in sync: no FTS5 fallback
        assert urls(index, "vacation days")[0] == "https://w/vacation"
        assert all(score > 0 for _, score in index.search("vacation days"))


def test_fts5_is_searched_only_while_the_mirror_cannot_be_trusted(built: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The FTS5 search is the fallback of a directory that is missing, stale or damaged, and nothing else.
    calls: list[str] = []
    searched = embedded.fts_search

    def counted(conn: sqlite3.Connection, text: str, *args: Any, **kwargs: Any) -> list[tuple[Any, ...]]:
        calls.append(text)
        return searched(conn, text, *args, **kwargs)

    monkeypatch.setattr(embedded, "fts_search", counted)
    with LocalIndex(built, read_only=True) as index:
        assert urls(index, "vacation days")[0] == "https://w/vacation"
        signed_in = [*ANONYMOUS_TOKENS, AUTHENTICATED, "user:ann"]
        assert [doc.url for doc, _ in index.search("VPN client", visible=signed_in)] == ["https://w/laptops"]
    assert calls == []
    shutil.rmtree(mirror_dir(built))
    with LocalIndex(built, read_only=True) as index:  # read-only: not rebuilt, so FTS5 answers
        assert index.mirror_generation is None
        assert urls(index, "vacation days")[0] == "https://w/vacation"
    assert calls == ["vacation days"]


def test_persists_across_reopen_without_rebuild(built: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_rebuild(*_: object, **__: object) -> None:
        raise AssertionError("an in-sync mirror must not be rebuilt")

    monkeypatch.setattr(TantivyMirror, "rebuild", no_rebuild)
    with LocalIndex(built) as index:
        assert urls(index, "expense reports") == ["https://w/expenses"]
        assert urls(index, "VPN") == ["https://w/laptops"]


def test_missing_directory_is_rebuilt(built: Path) -> None:
    shutil.rmtree(mirror_dir(built))
    with LocalIndex(built) as index:
        assert index.mirror_generation is not None
        assert urls(index, "VPN client") == ["https://w/laptops"]
    assert (mirror_dir(built) / "meta.json").exists()


def test_stale_directory_is_rebuilt(built: Path, tmp_path: Path) -> None:
    # An index file changed behind the mirror's back (e.g. by the previous EvidenT version, which
    # knows nothing of it): the recorded generation no longer matches.
    with sqlite3.connect(built) as conn:
        conn.execute("DELETE FROM documents WHERE url = 'https://w/laptops'")
        conn.execute("INSERT OR REPLACE INTO evident_meta VALUES ('generation', '99')")
    with LocalIndex(built) as index:
        assert urls(index, "VPN client") == []
        assert index.mirror.marker() == (99, 2)


def test_index_from_before_the_mirror_is_upgraded(built: Path) -> None:
    with sqlite3.connect(built) as conn:
        conn.execute("DELETE FROM evident_meta WHERE key = 'generation'")
    shutil.rmtree(mirror_dir(built))
    with LocalIndex(built) as index:
        assert urls(index, "vacation")[0] == "https://w/vacation"
        assert index.mirror.marker() == (0, 3)


def test_read_only_with_a_stale_mirror_falls_back_to_fts5(built: Path) -> None:
    shutil.rmtree(mirror_dir(built))
    with LocalIndex(built, read_only=True) as index:
        assert index.mirror_generation is None
        assert urls(index, "vacation days")[0] == "https://w/vacation"
    assert not mirror_dir(built).exists()  # read-only means nothing is written


def test_updates_and_deletions_are_reflected(tmp_path: Path) -> None:
    corpus = tmp_path / "c" / "docs.jsonl"
    write_jsonl(corpus, RECORDS)
    other = tmp_path / "other"
    write_jsonl(
        other / "more.jsonl", [{"url": "https://w/onboarding", "title": "Onboarding", "text": "Welcome aboard."}]
    )
    with LocalIndex(tmp_path / "i.sqlite3") as index, LocalIndex(tmp_path / "i.sqlite3") as second:
        index.add_corpus(corpus)
        index.add_corpus(other / "more.jsonl")
        assert urls(second, "welcome") == ["https://w/onboarding"]  # another object sees the commit
        changed = [dict(RECORDS[0], text="Employees receive 30 holiday days."), RECORDS[1]]
        write_jsonl(corpus, changed)
        stats = index.add_corpus(corpus)
        assert (stats.updated, stats.removed) == (1, 1)
        assert urls(index, "holiday") == ["https://w/vacation"]
        assert urls(index, "VPN") == []  # removed from the file
        assert urls(second, "VPN") == [] and urls(second, "holiday") == ["https://w/vacation"]
        assert index.retain_roots([corpus]) == 1
        assert urls(index, "welcome") == [] and urls(second, "welcome") == []
        assert index.mirror.marker() == (index.generation, index.count())


def test_unchanged_refresh_does_not_touch_the_mirror(built: Path, tmp_path: Path) -> None:
    with LocalIndex(built) as index:
        before = index.mirror.marker()
        index.add_corpus(tmp_path / "c" / "docs.jsonl")
        assert index.mirror.marker() == before


def test_title_match_ranks_above_body_match(tmp_path: Path) -> None:
    records = [
        {"url": "https://w/body", "title": "Travel", "text": "Reimbursement rules for trains and flights apply."},
        {"url": "https://w/title", "title": "Reimbursement", "text": "Rules for trains and flights apply here too."},
    ]
    write_jsonl(tmp_path / "c" / "docs.jsonl", records)
    with LocalIndex(tmp_path / "i.sqlite3") as index:
        index.add_corpus(tmp_path / "c" / "docs.jsonl")
        assert urls(index, "reimbursement") == ["https://w/title", "https://w/body"]
        assert urls(index, "reimbursed") == ["https://w/title", "https://w/body"]  # stemmed


def test_ties_beyond_the_margin_are_broken_by_url(tmp_path: Path) -> None:
    records = [{"url": f"https://w/same/{i:03d}", "title": "Deploy", "text": "Deploy it."} for i in range(150, 0, -1)]
    write_jsonl(tmp_path / "c" / "docs.jsonl", records)
    with LocalIndex(tmp_path / "i.sqlite3") as index:
        index.add_corpus(tmp_path / "c" / "docs.jsonl")
        for k in (1, 8, 100, 200):
            found = urls(index, "deploy", k)
            assert found == [f"https://w/same/{i:03d}" for i in range(1, min(k, 150) + 1)]


@pytest.mark.parametrize(
    "query",
    ['title:vacation', 'content:"x', "a AND b OR NOT c", "(((", "vac*", "^2 ~1 +-", "x" * 100_000,
     "休暇 हिन्दी 😀", '"\\" \\\\ [1 TO 2] {a} /re/', "url:https://w/vacation"],
)
def test_hostile_queries_never_raise(built: Path, query: str) -> None:
    with LocalIndex(built) as index:
        assert isinstance(index.search(query), list)
        assert isinstance(index.search(query + " vacation"), list)


# A word most pages hold still counts (`visible_ranking.IDF_FLOOR`). "benefits" is in 5 of the 6 pages,
# "planner" in 2, and the words never stand together, so that no phrase clause (rule 29) separates
# the two planner pages: only the weight of "benefits" does, against the shorter page's better score
# for "planner".
FLOOR_RECORDS = [
    {"url": "a-pension", "title": "Planner", "text": "The planner."},
    {"url": "b-benefits", "title": "Planner", "text": "The planner shows your benefits."},
    *({"url": f"c-{topic}", "title": topic.title(), "text": f"{topic.title()} benefits and how they are paid."}
      for topic in ("retirement", "disability", "survivor", "family")),
]


def test_a_word_in_most_pages_weighs_the_floor_and_a_rare_word_its_own_idf() -> None:
    documents, holding = 273, 174  # "benefits" on doc2dial's pages
    common = (documents - holding + 0.5) / (holding + 0.5)
    assert math.log(common) < 0
    assert idf_ratio(common) * math.log1p(common) == pytest.approx(IDF_FLOOR)
    rare = (documents - 42 + 0.5) / (42 + 0.5)  # "planner"
    assert idf_ratio(rare) * math.log1p(rare) == pytest.approx(math.log(rare))


def test_the_page_holding_the_common_word_too_ranks_first(tmp_path: Path) -> None:
    # "benefits" (5 of the 6 pages) has a negative BM25 idf: only the floor gives it a weight.
    holding = sum("benefits" in r["text"] for r in FLOOR_RECORDS)
    assert math.log((len(FLOOR_RECORDS) - holding + 0.5) / (holding + 0.5)) < 0
    with build(tmp_path, FLOOR_RECORDS) as index:
        assert urls(index, "benefits planner")[:2] == ["b-benefits", "a-pension"]
        # Weighing nothing, "benefits" would leave the ranking to "planner": the shorter page would win.
        assert urls(index, "planner")[:2] == ["a-pension", "b-benefits"]
