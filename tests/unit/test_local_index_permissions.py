"""Permissions inside the embedded index's search: the top k are the caller's top k, and its statistics
count only what the caller may see."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
import tantivy
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from evident.connectors.acl import Acl, filter_documents, parse_acl
from evident.connectors.index.embedded import LocalIndex
from evident.connectors.index.fts_query import fts_search
from evident.connectors.index.ranking import PHRASE_SLOP, TantivyMirror
from evident.connectors.index.retriever import LocalCorpusRetriever
from evident.connectors.index.store import connect
from evident.connectors.index.visible_ranking import ExactRanker, explained_stats, phrase_count
from evident.connectors.visibility import AclPolicy, document_tokens, principal_tokens
from evident.models import Principal, SourceDocument

BOB = Principal(user="bob", groups=["staff"])

PAGES = [
    {"url": "https://w/expenses", "title": "Expense reports",
     "text": "Submit an expense report within thirty days. PELICAN is the expense system."},
    {"url": "https://w/travel", "title": "Travel bookings",
     "text": "Book travel through the portal and mind the expense limits that apply."},
]
HIDDEN = [
    {"url": "https://w/secret", "title": "Board review",
     "text": "ZEBRAFINCH expense expense expense: the board confidential expense programme for members only.",
     "metadata": {"acl": "group:board"}},
]


def _write(folder: Path, records: list[dict[str, Any]]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "pages.jsonl"  # a JSONL corpus is given as a file, not found in a folder
    path.write_text("\n".join(json.dumps(r) for r in records) + "\n", encoding="utf-8")
    return path


def _retriever(tmp_path: Path, name: str, records: list[dict[str, Any]], k: int) -> LocalCorpusRetriever:
    return LocalCorpusRetriever.from_corpus(_write(tmp_path / name, records), tmp_path / f"{name}.sqlite3", k=k)


def _hits(retriever: LocalCorpusRetriever, query: str, who: Principal | None) -> list[tuple[str, float]]:
    return [(d.metadata["url"], d.metadata["score"]) for d in retriever.invoke(query, principal=who)]


def _same(seen: list[tuple[str, float]], alone: list[tuple[str, float]]) -> None:
    """The same documents in the same order with the same scores, to the last bit: bob's search is
    rescored with his own statistics (`visible_ranking.ExactRanker`) over either corpus."""
    assert seen == alone


def test_a_hidden_page_never_takes_the_callers_single_slot(tmp_path: Path) -> None:
    with_hidden = _retriever(tmp_path, "with", PAGES + HIDDEN, k=1)
    without = _retriever(tmp_path, "without", PAGES, k=1)
    for query in ("ZEBRAFINCH expense", "PELICAN expense"):
        seen = _hits(with_hidden, query, BOB)
        _same(seen, _hits(without, query, BOB))
        assert [url for url, _ in seen] == ["https://w/expenses"]
    # The board member does get the page: the filter is the caller's, not a blanket exclusion.
    assert _hits(with_hidden, "ZEBRAFINCH expense", Principal(user="carol", groups=["board"]))[0][0] == (
        "https://w/secret")


def test_a_word_only_a_hidden_page_holds_is_not_a_spelling_repair(tmp_path: Path) -> None:
    with_hidden = _retriever(tmp_path, "with", PAGES + HIDDEN, k=3)
    without = _retriever(tmp_path, "without", PAGES, k=3)
    # "zebrafnch" is one letter from the hidden page's word: repairing it to that word would give the
    # visible pages "expense" hits a different weight, and so tell bob the word exists.
    for query in ("zebrafnch expense", "zebrafinch", "pelcan expense"):
        _same(_hits(with_hidden, query, BOB), _hits(without, query, BOB))
    assert _hits(with_hidden, "zebrafnch", Principal(user="c", groups=["board"]))[0][0] == "https://w/secret"


def test_hidden_words_change_no_visible_score(tmp_path: Path) -> None:
    # The hidden page holds "expense" four times: counted in N and n, it would lower every visible
    # "expense" score (and its phrase clauses' IDF).
    with_hidden = _retriever(tmp_path, "with", PAGES + HIDDEN, k=5)
    without = _retriever(tmp_path, "without", PAGES, k=5)
    for query in ("expense report", "expense limits travel", "expense system", "confidential expense"):
        _same(_hits(with_hidden, query, BOB), _hits(without, query, BOB))


def test_the_sources_policy_decides_documents_without_an_acl(tmp_path: Path) -> None:
    retriever = _retriever(tmp_path, "c", PAGES + HIDDEN, k=5)
    denied = AclPolicy(default="deny", source="local")
    assert retriever.invoke("expense", principal=BOB, policy=denied) == []
    staff = AclPolicy(default="deny", fallback_acl="group:staff", source="local")
    assert {d.metadata["url"] for d in retriever.invoke("expense", principal=BOB, policy=staff)} == {
        p["url"] for p in PAGES}
    # No principal is anonymous: public and unstated documents only.
    assert "https://w/secret" not in {d.metadata["url"] for d in retriever.invoke("ZEBRAFINCH")}


def test_the_fts5_fallback_filters_in_its_where(tmp_path: Path) -> None:
    retriever = _retriever(tmp_path, "c", PAGES + HIDDEN, k=1)
    conn = connect(Path(retriever.index_path), read_only=True)
    try:
        visible = principal_tokens(BOB, AclPolicy(source="local"))
        rows = fts_search(conn, "ZEBRAFINCH expense", 1, columns="url", title_weight=20.0,
                          content_weight=1.0, visible=visible)  # fmt: skip
        assert [row[0] for row in rows] == ["https://w/expenses"]
        assert fts_search(conn, "ZEBRAFINCH", 3, columns="url", title_weight=20.0, content_weight=1.0,
                          visible=visible) == []  # fmt: skip
    finally:
        conn.close()


_NAMES = st.sampled_from(["bob", "Alice", " carol ", "staff", "STAFF", "hr", "board", ""])
_ENTRIES = st.one_of(
    st.sampled_from(["public", "*", "authenticated", "role:x", "user:", " "]),
    _NAMES.map(lambda n: f"user:{n}"), _NAMES.map(lambda n: f"group:{n}"), _NAMES,
)
_ACLS = st.one_of(
    st.none(), st.just(""), st.just("  "), st.integers(), _ENTRIES, st.lists(_ENTRIES, max_size=3),
    _ENTRIES.map(lambda e: f"{e}, group:hr"),
    st.fixed_dictionaries({}, optional={"public": st.booleans(), "authenticated": st.booleans(),
                                        "users": st.lists(_NAMES, max_size=2), "groups": st.lists(_NAMES, max_size=2)}),
)
_PRINCIPALS = st.one_of(st.none(), st.builds(
    Principal, user=_NAMES, groups=st.lists(_NAMES, max_size=2),
    ids=st.dictionaries(st.just("local"), _NAMES, max_size=1)))


@settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))
@given(acl=_ACLS, principal=_PRINCIPALS, default=st.sampled_from(["public", "deny"]),
       fallback=st.one_of(st.none(), st.just(""), _ENTRIES))
def test_visibility_tokens_agree_with_the_acl_filter(acl: Any, principal: Principal | None, default: Any,
                                                      fallback: Any) -> None:
    doc = SourceDocument(url="u", content="x", source="local", metadata={} if acl is None else {"acl": acl})
    kept, _ = filter_documents([doc], principal, default=default, fallback_acl=fallback)
    policy = AclPolicy(default=default, fallback_acl=fallback, source="local")
    matched = set(document_tokens(acl)) & set(principal_tokens(principal, policy))
    assert bool(matched) == bool(kept)


def test_acl_allows_is_the_definition_the_tokens_follow() -> None:
    acl = parse_acl(["group:Staff", "user:alice"])
    assert isinstance(acl, Acl)
    for who in (BOB, Principal(user="ALICE"), Principal(user="eve", groups=["x"]), None):
        tokens = set(principal_tokens(who, AclPolicy()))
        assert acl.allows(who) == bool(tokens & set(document_tokens(["group:Staff", "user:alice"])))


# -- exact rescoring with the caller's own statistics ------------------------------------------------

_WORDS = ("expense report leave days manager zebrafinch board travel limits annual secret budget approves "
          "pelican portal salary policy claim receipt").split()


def _random_pages(rng: random.Random, count: int, acl: str | None, prefix: str) -> list[dict[str, Any]]:
    """`count` pages of random words, from a few to a few hundred of them."""
    return [
        {"url": f"https://w/{prefix}-{i}", "title": " ".join(rng.choices(_WORDS, k=rng.randint(1, 3))),
         "text": " ".join(rng.choices(_WORDS, k=rng.randint(3, 300))),
         **({"metadata": {"acl": acl}} if acl else {})}
        for i in range(count)
    ]  # fmt: skip


def _index(folder: Path, name: str, records: list[dict[str, Any]]) -> LocalIndex:
    index = LocalIndex(folder / f"{name}.sqlite3")
    index.add_corpus(_write(folder / name, records))
    return index


def _searched(index: LocalIndex, query: str, k: int, visible: list[str] | None) -> list[tuple[str, float]]:
    return [(doc.url, score) for doc, score in index.search(query, k, visible=visible)]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_exact_top_k_is_bm25_over_the_visible_documents_alone(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    visible = _random_pages(rng, 40, None, "v") + _random_pages(rng, 10, "group:staff", "s")
    hidden = _random_pages(rng, 30, "group:board", "h")
    bob = principal_tokens(BOB, AclPolicy(source="local"))
    with _index(tmp_path, "mixed", visible + hidden) as mixed, _index(tmp_path, "alone", visible) as alone:
        for k in (1, 3, 8):
            # One word, no phrase clause: Tantivy's own BM25 over an index of only bob's pages (same
            # analyzer, same fieldnorm quantisation) is the oracle, to float32 precision, ranks exact.
            for word in _WORDS:
                exact = _searched(mixed, word, k, bob)
                oracle = _searched(alone, word, k, None)
                assert [url for url, _ in exact] == [url for url, _ in oracle], (word, k)
                assert [s for _, s in exact] == pytest.approx([s for _, s in oracle], rel=1e-5), (word, k)
            # Phrases: Tantivy's own phrase count of a page varies with its segment's other pages (it is
            # counted from the page itself here), so the oracle is bob's search of the visible pages alone.
            for query in ("expense report", "annual leave days", "travel limits policy", "secret salary board"):
                assert _searched(mixed, query, k, bob) == _searched(alone, query, k, bob), (query, k)


def _pooled(folder: Path, name: str, records: list[dict[str, Any]], pool: int) -> LocalIndex:
    _index(folder, name, records).close()
    return LocalIndex(folder / f"{name}.sqlite3", candidate_pool=pool)


@pytest.mark.parametrize("seed", [0, 1])
def test_a_bounded_pool_is_the_pool_of_the_visible_documents_alone(tmp_path: Path, seed: int) -> None:
    # Near-duplicates (the pages that make a pool bind) and random pages, bob's and hidden ones.
    rng = random.Random(seed)
    twins = [{"url": f"https://w/twin-{i}", "title": "Expense report",
              "text": "submit the expense report within thirty days " + " ".join(rng.choices(_WORDS, k=i))}
             for i in range(12)]  # fmt: skip
    visible = twins + _random_pages(rng, 30, None, "v") + _random_pages(rng, 8, "group:staff", "s")
    hidden_twins = [{**t, "url": t["url"] + "-h", "metadata": {"acl": "group:board"}} for t in twins]
    hidden = _random_pages(rng, 30, "group:board", "h") + hidden_twins
    bob = principal_tokens(BOB, AclPolicy(source="local"))
    queries = ("expense report", "submit the expense report days", "annual leave days", "travel limits policy")
    for pool in (1, 3, 10):
        with _pooled(tmp_path, f"mixed-{pool}", visible + hidden, pool) as mixed, \
             _pooled(tmp_path, f"alone-{pool}", visible, pool) as alone:  # fmt: skip
            for k in (1, 3, 8):
                for query in queries:
                    assert _searched(mixed, query, k, bob) == _searched(alone, query, k, bob), (pool, query, k)
    # A pool larger than what can reach the k-th score binds nothing: the exact ranking, as with no bound.
    with _pooled(tmp_path, "unbounded", visible + hidden, 0) as exact, \
         _pooled(tmp_path, "large", visible + hidden, len(visible)) as large:  # fmt: skip
        for query in queries:
            assert _searched(large, query, 8, bob) == _searched(exact, query, 8, bob), query
    # A pool smaller than k is k: each page it returns carries its exact score.
    with _pooled(tmp_path, "one", visible + hidden, 1) as one, _pooled(tmp_path, "all", visible + hidden, 0) as every:
        for query in queries:
            bounded = _searched(one, query, 8, bob)
            scores = dict(_searched(every, query, 200, bob))
            assert len(bounded) == 8
            assert all(scores[url] == score for url, score in bounded), query


def test_phrase_counts_are_tantivys_on_a_page_indexed_alone(tmp_path: Path) -> None:
    rng = random.Random(5)
    mirror = TantivyMirror(tmp_path / "m", title_weight=2.0)
    pairs = [("travel", "limit"), ("expens", "report"), ("annual", "leav"), ("board", "secret")]
    compared = 0
    for i, page in enumerate(_random_pages(rng, 30, None, "p")):
        page["text"] += " " + "x" * 70 + " travel x limits"  # an unindexed long word keeps its position
        single = TantivyMirror(tmp_path / f"one-{i}", title_weight=2.0)
        single.rebuild([(page["url"], page["title"], page["text"], ["public"])], generation=1, documents=1)
        searcher = single.searcher()
        positions = mirror.positions(page["title"], page["text"], {token for pair in pairs for token in pair})
        for first, second in pairs:
            query = tantivy.Query.phrase_query(single.schema, "text", [first, second], slop=PHRASE_SLOP)
            hits = searcher.search(query, 1).hits
            explained = explained_stats(query.explain(searcher, hits[0][1]).to_json()) if hits else {}
            tantivy_count = explained.get("freq", 0.0)
            assert phrase_count(positions[first], positions[second], PHRASE_SLOP) == tantivy_count
            compared += bool(hits)
        single.close()
    assert compared > 20


def test_stored_lengths_are_tantivys(tmp_path: Path) -> None:
    pages = _random_pages(random.Random(3), 25, None, "p")
    pages[0]["text"] += " " + "y" * 80  # too long to index: not counted
    with _index(tmp_path, "c", pages) as index:
        total, documents = index.visible_lengths(["public", "unstated"])
        searcher = index.mirror.searcher()
        query = tantivy.Query.term_query(index.mirror.schema, "text", "expens")
        explained = explained_stats(query.explain(searcher, searcher.search(query, 1).hits[0][1]).to_json())
    assert documents == 25
    assert explained["avgdl"] == pytest.approx(total / documents, rel=1e-6)


def test_only_a_signed_in_caller_or_a_filter_that_hides_takes_the_exact_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    taken: list[int] = []
    exact_top = ExactRanker.top

    def spy(self: ExactRanker, *args: Any) -> list[tuple[str, float]]:
        taken.append(1)
        return exact_top(self, *args)

    monkeypatch.setattr(ExactRanker, "top", spy)
    anonymous = principal_tokens(None, AclPolicy(source="local"))
    with _index(tmp_path, "open", PAGES) as open_index, _index(tmp_path, "hiding", PAGES + HIDDEN) as hiding:
        # Nothing hidden, nobody signed in (the development set's case): Tantivy's own scores, the same as
        # an unfiltered search's.
        assert _searched(open_index, "expense report", 5, anonymous) == _searched(open_index, "expense report", 5, None)
        assert taken == []
        _searched(hiding, "expense report", 5, anonymous)
        assert len(taken) == 1
        _searched(open_index, "expense report", 5, principal_tokens(BOB, AclPolicy(source="local")))
        assert len(taken) == 2


@pytest.mark.parametrize("changed", [
    '{"value": 2.0, "description": "term frequency"}',  # the fields renamed: nothing read
    '{"value": 2.0, "description": "freq, occurrences of term within document"}',  # freq alone, no dl/avgdl/N
])  # fmt: skip
def test_an_explanation_it_cannot_read_is_not_damage(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, changed: str
) -> None:
    bob = principal_tokens(BOB, AclPolicy(source="local"))
    with _index(tmp_path, "c", PAGES + HIDDEN) as index:
        generation = index.mirror_generation
        exact = _searched(index, "expense report", 5, bob)

        class Changed:  # a Tantivy whose explanations say the same in another format
            def __init__(self, explanation: Any) -> None:
                self._explanation = explanation

            def to_json(self) -> str:
                return changed

        real_explain = tantivy.Query.explain
        monkeypatch.setattr(tantivy.Query, "explain", lambda q, s, a: Changed(real_explain(q, s, a)), raising=True)
        rebuilt: list[int] = []
        monkeypatch.setattr(TantivyMirror, "rebuild", lambda *a, **kw: rebuilt.append(1))
        for _ in range(3):
            fallback = _searched(index, "expense report", 5, bob)
            # Answered, from the caller's documents, in the exact ranking's order (the scores are Tantivy's).
            assert [url for url, _ in fallback] == [url for url, _ in exact]
        assert rebuilt == []
        assert index.mirror_generation == generation  # still searched by Tantivy, not left to FTS5
    assert "damaged" not in caplog.text and "FTS5" not in caplog.text
    warnings = [r.getMessage() for r in caplog.records if "cannot rescore" in r.getMessage()]
    assert len(warnings) == 1  # once, not on every search
    assert "ranking them by Tantivy's own scores" in warnings[0] and "tantivy 0." in warnings[0]
