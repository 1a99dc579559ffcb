"""The embedded index's vectors with the real local model (all-MiniLM-L6-v2): what `embed` writes, what a
refresh invalidates, what a model change resets, and what a hybrid search ranks and shows a caller.

No fake vectors: every cosine here comes from the model, so the rankings asserted are the ones a user gets.
"""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from evident.connectors.index.embedded import LocalIndex
from evident.connectors.index.vectors import steps, vectors_key
from evident.connectors.visibility import AclPolicy, principal_tokens
from evident.context import EvidentContext
from evident.embeddings import resolve_embeddings
from evident.embeddings.meaning import SEMANTIC_SCORE, SEMANTIC_WINDOWS, QueryMeaning
from evident.embeddings.scorer import SemanticScorer
from evident.embeddings.windows import WINDOWS_FORMAT, passage_windows, window_text
from evident.models import Principal, SourceDocument

# The real resolution of the settings (conftest.py sets words only for unmarked tests).
pytestmark = pytest.mark.embeddings

QUESTION = "How long does an old API key keep working after I rotate it?"

# file name -> (url, title, text). "team" shares more of the question's words than "keys" (BM25 ranks it
# first), while "keys" is the page that answers it: the meaning must lift it.
PAGES: dict[str, tuple[str, str, str]] = {
    "keys.md": (
        "https://w/keys",
        "Credentials",
        "After a key rotation, the previous secret is still accepted for 24 hours, then it is refused.",
    ),
    "team.md": (
        "https://w/team",
        "Team notes",
        "The API working group meets after lunch on Fridays. Old minutes are kept in the wiki.",
    ),
    "expenses.md": (
        "https://w/expenses",
        "Expense reports",
        "Submit an expense report within thirty days of the end of a trip.",
    ),
    # Long enough for several windows, so that per-window rows and spans are exercised.
    "laptop.md": (
        "https://w/laptop",
        "Devices",
        " ".join(
            f"Rule {n}: a lost or stolen device must be reported to the security desk within one hour, "
            "and the desk then locks the account."
            for n in range(1, 9)
        ),
    ),
}


@pytest.fixture(scope="module")
def scorer() -> SemanticScorer:
    found = resolve_embeddings(EvidentContext(embeddings="local")).scorer
    assert found is not None, "the local model is installed in the test environment"
    return found


def _write(folder: Path, name: str, url: str, title: str, text: str, acl: str | None = None) -> None:
    front = f"url: {url}\ntitle: {title}\n" + (f"acl: {acl}\n" if acl is not None else "")
    (folder / name).write_text(f"---\n{front}---\n{text}\n", encoding="utf-8")


def _corpus(tmp_path: Path, pages: dict[str, tuple[str, str, str]] = PAGES) -> Path:
    folder = tmp_path / "corpus"
    folder.mkdir()
    for name, (url, title, text) in pages.items():
        _write(folder, name, url, title, text)
    return folder


def _embedded(tmp_path: Path, scorer: SemanticScorer) -> tuple[Path, Path, LocalIndex]:
    """The corpus folder, the index path and the open index of PAGES, every page embedded."""
    folder = _corpus(tmp_path)
    path = tmp_path / "i.sqlite3"
    index = LocalIndex(path)
    index.refresh([folder])
    index.embed(scorer)
    return folder, path, index


def _vector_rows(index_path: Path, url: str | None = None) -> int:
    """Rows of `passage_vectors` (of one document's url, or of all), read by a connection of its own."""
    with closing(sqlite3.connect(index_path)) as conn:
        if url is None:
            return int(conn.execute("SELECT COUNT(*) FROM passage_vectors").fetchone()[0])
        return int(
            conn.execute(
                "SELECT COUNT(*) FROM passage_vectors WHERE document_id = (SELECT id FROM documents WHERE url = ?)",
                (url,),
            ).fetchone()[0]
        )


def _document_id(index_path: Path, url: str) -> int:
    with closing(sqlite3.connect(index_path)) as conn:
        return int(conn.execute("SELECT id FROM documents WHERE url = ?", (url,)).fetchone()[0])


def test_embedding_gives_every_document_its_windows(tmp_path: Path, scorer: SemanticScorer) -> None:
    folder = _corpus(tmp_path)
    path = tmp_path / "i.sqlite3"
    with LocalIndex(path) as index:
        index.refresh([folder])
        assert index.unembedded(scorer.model_id) == 4 and not index.ready(scorer.model_id)
        stats = index.embed(scorer)
        windows = sum(len(passage_windows(text)) for _, _, text in PAGES.values())
        assert (stats.documents, stats.windows, stats.reset) == (4, windows, False)
        assert stats.model_id == scorer.model_id
        assert index.unembedded(scorer.model_id) == 0 and index.ready(scorer.model_id)
        # Nothing left to do: a second run embeds nothing.
        assert (index.embed(scorer).documents, index.embed(scorer).windows) == (0, 0)
    assert windows > 4  # the long page is several windows
    assert _vector_rows(path) == windows
    assert _vector_rows(path, "https://w/laptop") == len(passage_windows(PAGES["laptop.md"][2])) > 1


def test_a_changed_page_loses_its_vectors_and_only_it_is_embedded_again(tmp_path: Path, scorer: SemanticScorer) -> None:
    folder, path, opened = _embedded(tmp_path, scorer)
    with opened as index:
        # A different length, so the refresh sees the change by size even within one mtime tick.
        _write(
            folder,
            "expenses.md",
            "https://w/expenses",
            "Expense reports",
            "Submit an expense report within sixty days of the end of a trip, with every receipt.",
        )
        stats = index.refresh([folder])
        assert (stats.updated, stats.unchanged) == (1, 3)
        assert index.unembedded(scorer.model_id) == 1 and not index.ready(scorer.model_id)
        assert _vector_rows(path, "https://w/expenses") == 0
        again = index.embed(scorer)
        assert (again.documents, again.windows, again.reset) == (1, 1, False)
        assert index.ready(scorer.model_id)
        # The hybrid search reads the new text's window, not the old one.
        meaning = QueryMeaning(scorer, scorer.embed_query("expense report within sixty days"))
        [(doc, _)] = [
            (d, s) for d, s in index.search("sixty days receipt", 4, meaning=meaning) if d.url == "https://w/expenses"
        ]
        end = len(doc.content.rstrip())
        assert doc.metadata[SEMANTIC_WINDOWS] == [[0, end, doc.metadata[SEMANTIC_SCORE]]]
        [fresh] = scorer.similarities(meaning.vector, [window_text(doc.title, doc.content, 0, end)])
        assert doc.metadata[SEMANTIC_SCORE] == pytest.approx(float(fresh), abs=1e-4)


def test_a_deleted_page_takes_its_vectors_with_it(tmp_path: Path, scorer: SemanticScorer) -> None:
    folder, path, opened = _embedded(tmp_path, scorer)
    with opened as index:
        laptop = _document_id(path, "https://w/laptop")
        before = _vector_rows(path)
        (folder / "laptop.md").unlink()
        assert index.refresh([folder]).removed == 1
        # Nothing to embed: the other pages kept their vectors, and the index is still ready.
        assert index.unembedded(scorer.model_id) == 0 and index.ready(scorer.model_id)
        assert index.embed(scorer).documents == 0
        meaning = QueryMeaning(scorer, scorer.embed_query("I lost my laptop, whom do I tell?"))
        assert "https://w/laptop" not in {d.url for d, _ in index.search("lost laptop device", 8, meaning=meaning)}
    with closing(sqlite3.connect(path)) as conn:
        assert conn.execute("SELECT COUNT(*) FROM passage_vectors WHERE document_id = ?", (laptop,)).fetchone() == (0,)
    assert _vector_rows(path) == before - len(passage_windows(PAGES["laptop.md"][2]))


def test_another_model_resets_the_vectors_and_embeds_every_page(tmp_path: Path, scorer: SemanticScorer) -> None:
    folder = _corpus(tmp_path)
    path = tmp_path / "i.sqlite3"
    other = SemanticScorer(scorer.embeddings, model_id="other")
    with LocalIndex(path) as index:
        index.refresh([folder])
        first = index.embed(scorer)
        assert index.unembedded(other.model_id) == 4 and not index.ready(other.model_id)
        switched = index.embed(other)
        assert switched.reset and switched.model_id == "other"
        assert (switched.documents, switched.windows) == (4, first.windows)
        assert index.ready(other.model_id)
        # One model at a time: the first model's vectors are gone, so its queries rank by words alone.
        assert index.unembedded(scorer.model_id) == 4 and not index.ready(scorer.model_id)
        meaning = QueryMeaning(scorer, scorer.embed_query(QUESTION))
        hits = index.search(QUESTION, 4, meaning=meaning)
        assert hits and not any(SEMANTIC_WINDOWS in d.metadata for d, _ in hits)
        assert [d.url for d, _ in hits] == [d.url for d, _ in index.search(QUESTION, 4)]
    assert _vector_rows(path) == first.windows



def test_windows_cut_another_way_are_embedded_again(tmp_path: Path, scorer: SemanticScorer) -> None:
    # Vectors belong to a model and to the way windows are cut: after an upgrade that cuts them
    # otherwise (here, vectors recorded with another windows format) the old spans are not searched.
    _, path, opened = _embedded(tmp_path, scorer)
    with opened as index:
        assert index.ready(scorer.model_id)
    older = f"{scorer.model_id} windows-0:30w"
    assert older != vectors_key(scorer.model_id)
    with closing(sqlite3.connect(path)) as conn, conn:
        conn.execute("UPDATE evident_meta SET value = ? WHERE key = 'vectors_model'", (older,))
    with LocalIndex(path) as index:
        assert index.unembedded(scorer.model_id) == 4 and not index.ready(scorer.model_id)
        again = index.embed(scorer)
        assert again.reset and again.documents == 4 and index.ready(scorer.model_id)
    with closing(sqlite3.connect(path)) as conn:
        [(stored,)] = conn.execute("SELECT value FROM evident_meta WHERE key = 'vectors_model'").fetchall()
    assert stored == f"{scorer.model_id} {WINDOWS_FORMAT}"


def _check_windows_metadata(doc: SourceDocument) -> None:
    """A hit's windows are the document's own spans, each with a cosine, the best of them its score."""
    windows = doc.metadata[SEMANTIC_WINDOWS]
    assert [(s, e) for s, e, _ in windows] == passage_windows(doc.content)
    for start, end, cosine in windows:
        assert 0 <= start < end <= len(doc.content) and doc.content[start:end].strip()
        assert -1.0 <= cosine <= 1.0
    assert doc.metadata[SEMANTIC_SCORE] == pytest.approx(max(c for _, _, c in windows), abs=1e-4)


def test_the_hybrid_search_finds_the_page_that_says_it_in_other_words(tmp_path: Path, scorer: SemanticScorer) -> None:
    folder = _corpus(tmp_path)
    with LocalIndex(tmp_path / "i.sqlite3") as index:
        index.refresh([folder])
        index.embed(scorer)
        words = index.search(QUESTION, 4)
        meaning = QueryMeaning(scorer, scorer.embed_query(QUESTION))
        hybrid = index.search(QUESTION, 4, meaning=meaning)
    # By words the team's notes come first (API, working, after, old); by meaning the credentials page.
    assert [d.url for d, _ in words][:2] == ["https://w/team", "https://w/keys"]
    assert hybrid[0][0].url == "https://w/keys"
    # Pages the words did not find at all are candidates by meaning, with a BM25 score of 0.
    assert {d.url for d, _ in hybrid} == {"https://w/keys", "https://w/team", "https://w/expenses", "https://w/laptop"}
    assert all(score == 0.0 for d, score in hybrid if d.url in {"https://w/expenses", "https://w/laptop"})
    # The score returned stays BM25's, as without meaning.
    assert dict((d.url, s) for d, s in hybrid)["https://w/keys"] == dict((d.url, s) for d, s in words)["https://w/keys"]
    for doc, _ in hybrid:
        _check_windows_metadata(doc)
    keys = hybrid[0][0]
    assert keys.metadata[SEMANTIC_SCORE] > hybrid[1][0].metadata[SEMANTIC_SCORE]
    # Words alone carry no meaning metadata: nothing for the extractor to read.
    assert not any(SEMANTIC_WINDOWS in d.metadata or SEMANTIC_SCORE in d.metadata for d, _ in words)


# The same pages with permissions: some hidden from bob, one of them the best match both by words and
# by meaning, so a leak would show at the top.
BOB = Principal(user="bob", groups=["staff"])
ACL_PAGES: list[tuple[str, str, str, str, str | None]] = [
    ("keys.md", "https://w/keys", "Credentials", PAGES["keys.md"][2], None),
    ("team.md", "https://w/team", "Team notes", PAGES["team.md"][2], "public"),
    ("expenses.md", "https://w/expenses", "Expense reports", PAGES["expenses.md"][2], "group:staff"),
    ("laptop.md", "https://w/laptop", "Devices", PAGES["laptop.md"][2], "user:bob"),
    (
        "board.md",
        "https://w/board",
        "Board API keys",
        "After an old API key rotation the board's previous secret keeps working for 48 hours: keep working keys "
        "in the board vault.",
        "group:board",
    ),
    (
        "alice.md",
        "https://w/alice",
        "Alice's key rotation",
        "How long an old API key keeps working after I rotate it: alice's notes on credentials.",
        "user:alice",
    ),
]
QUERIES = [
    QUESTION,
    "lost laptop",
    "expense report deadline",
    "board vault secret",
    "what is it about",  # stop words: one weak term, meaning does the rest
    "rotation",
]


def _acl_index(tmp_path: Path, name: str, scorer: SemanticScorer, *, only_bobs: bool) -> LocalIndex:
    folder = tmp_path / name
    folder.mkdir()
    for file, url, title, text, acl in ACL_PAGES:
        if only_bobs and acl in {"group:board", "user:alice"}:
            continue
        _write(folder, file, url, title, text, acl)
    index = LocalIndex(tmp_path / f"{name}.sqlite3")
    index.refresh([folder])
    index.embed(scorer)
    return index


def _hits(
    index: LocalIndex, query: str, meaning: QueryMeaning, visible: list[str]
) -> list[tuple[str, float, tuple[Any, Any]]]:
    """(url, BM25 score, (semantic score, windows)) of each hit of a caller's hybrid search."""
    return [
        (d.url, s, (d.metadata[SEMANTIC_SCORE], d.metadata[SEMANTIC_WINDOWS]))
        for d, s in index.search(query, 8, visible=visible, meaning=meaning)
    ]


def test_a_callers_hybrid_search_is_that_of_an_index_of_what_it_may_see(tmp_path: Path, scorer: SemanticScorer) -> None:
    visible = principal_tokens(BOB, AclPolicy(source="local"))
    with (
        _acl_index(tmp_path, "all", scorer, only_bobs=False) as everything,
        _acl_index(tmp_path, "bobs", scorer, only_bobs=True) as bobs,
    ):
        assert everything.count() == 6 and bobs.count() == 4
        for query in QUERIES:
            meaning = QueryMeaning(scorer, scorer.embed_query(query))
            seen = _hits(everything, query, meaning, visible)
            # Same urls, same order, same BM25 scores and the same cosines to the last bit: hidden pages
            # neither take a slot nor shift a statistic or a normalisation of the fusion.
            assert seen == _hits(bobs, query, meaning, visible), query
            # Unfiltered, the small index is scored by Tantivy itself, in float32, where a filtered search
            # is rescored exactly (`visible_ranking.ExactRanker`): the same ranking, BM25 to float32's precision.
            alone = [(d.url, s, d.metadata[SEMANTIC_WINDOWS]) for d, s in bobs.search(query, 8, meaning=meaning)]
            assert [(url, windows) for url, _, (_, windows) in seen] == [(url, w) for url, _, w in alone], query
            assert [s for _, s, _ in seen] == pytest.approx([s for _, s, _ in alone], rel=1e-6), query
            assert not {url for url, _, _ in seen} & {"https://w/board", "https://w/alice"}
            assert len(seen) == 4  # every visible page is a candidate by meaning
        # The pages are there for those who may see them: the filter is bob's, not a blanket one.
        board = principal_tokens(Principal(user="carol", groups=["board"]), AclPolicy(source="local"))
        meaning = QueryMeaning(scorer, scorer.embed_query(QUESTION))
        assert "https://w/board" in [url for url, _, _ in _hits(everything, QUESTION, meaning, board)]


def test_embedding_moves_in_steps_of_windows(tmp_path: Path, scorer: SemanticScorer) -> None:
    assert [[d[0] for d in step] for step in steps(
        [(1, [(0, 1)], ["a"]), (2, [(0, 1)] * 3, ["b"] * 3), (3, [(0, 1)], ["c"]), (4, [(0, 1)], ["d"])], 2)
    ] == [[1], [2], [3, 4]]
    folder = _corpus(tmp_path)
    seen: list[tuple[int, int]] = []
    with LocalIndex(tmp_path / "i.sqlite3") as index:
        index.refresh([folder])
        stats = index.embed(scorer, progress=lambda done, total: seen.append((done, total)), step_windows=2)
        assert index.ready(scorer.model_id)
    # Four pages, more than four windows: progress (and a commit) every two windows or one page.
    assert stats.windows > 4 and len(seen) >= 3
    assert seen == sorted(seen) and seen[-1] == (4, 4) and all(total == 4 for _, total in seen)
