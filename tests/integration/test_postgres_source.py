"""`type = "postgres"` on a real PostgreSQL 15 (tests/support/postgres.py): indexing, searching, exact spans,
refresh semantics, two writers at once, and the faults a database has (down, wrong password, a cancelled
statement), none of which may show the connection string's password."""

from __future__ import annotations

import hashlib
import itertools
import json
import logging
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from langchain_core.tracers.run_collector import RunCollectorCallbackHandler
from psycopg import sql

from evident.agent.recheck import recheck_answer
from evident.connectors.config import Defaults, PostgresSettings, build_sources, parse_settings, postgres_dsn
from evident.connectors.index.loaders import DEFAULT_LIMITS, CorpusError
from evident.connectors.postgres.connections import Connections
from evident.connectors.postgres.refresh import RefreshStats, embed_missing, refresh
from evident.connectors.postgres.retriever import PostgresRetriever
from evident.connectors.source import SourceFailure
from evident.context import EvidentContext
from evident.embeddings import resolve_embeddings
from evident.embeddings.meaning import SEMANTIC_WINDOWS
from evident.embeddings.windows import document_windows
from evident.graph import graph
from tests.support.postgres import PASSWORD, PostgresServer

EXPENSES = "How many days do I have to submit an expense report after a trip?"
_schemas = itertools.count()


def _schema() -> str:
    return f"t{os.getpid()}_{next(_schemas)}"


def _source(server: PostgresServer, paths: list[Path], schema: str, **extra: Any) -> dict[str, Any]:
    return {"name": "pg", "type": "postgres", "dsn": server.dsn(), "paths": [str(p) for p in paths],
            "schema": schema, **extra}


def _refresh(raw: dict[str, Any]) -> RefreshStats:
    settings = parse_settings(raw, 1)
    assert isinstance(settings, PostgresSettings)
    connections = Connections(postgres_dsn(settings), connect_timeout_s=10, statement_timeout_ms=None)
    return refresh(connections, raw["schema"], "english", [Path(p) for p in raw["paths"]], limits=DEFAULT_LIMITS)


def _write(path: Path, records: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def _ask(raw: dict[str, Any], question: str, **kwargs: Any) -> dict[str, Any]:
    ctx = EvidentContext(sources=[raw], k=4, top_n=4, embeddings="none")
    return graph.invoke({"query": question, **kwargs}, context=ctx)  # type: ignore[return-value]


def test_answers_with_exact_spans_as_the_embedded_index_does(postgres: PostgresServer, examples: Path) -> None:
    raw = _source(postgres, [examples], _schema())
    assert _refresh(raw).added > 30
    out = _ask(raw, EXPENSES)
    assert out["status"] == "answered" and out["citations"]
    docs = {d["url"]: d["content"] for d in out["documents"]}
    for citation in out["citations"]:
        text = docs[citation["url"]]
        assert citation["quote"] == " … ".join(text[s:e] for s, e in citation["spans"])
    embedded = graph.invoke({"query": EXPENSES},
                            context=EvidentContext(corpus=[str(examples)], k=4, top_n=4, embeddings="none"))
    # The answer's lead, at the same characters of the same page (the rankings differ further down).
    assert (out["citations"][0]["url"], out["citations"][0]["spans"]) == (embedded["citations"][0]["url"],
                                                                    embedded["citations"][0]["spans"])
    # The stored text is the file's text, character for character.
    local = {d["url"]: d["content"] for d in embedded["documents"]}
    for url in set(docs) & set(local):
        assert docs[url] == local[url]


def test_title_and_headings_outrank_the_body(postgres: PostgresServer, tmp_path: Path) -> None:
    raw = _source(postgres, [_write(tmp_path / "c.jsonl", [
        {"url": "KB-body", "title": "Notes", "text": "Misc. The word pelican appears once in this body text."},
        {"url": "KB-heading", "title": "Birds", "text": "# Pelican care\n\nFeed them twice a day."},
        {"url": "KB-title", "title": "Pelican", "text": "Large water birds with a pouch."},
    ])], _schema())
    _refresh(raw)
    (source,), _ = build_sources([raw], Defaults())
    ranked = [d.metadata["url"] for d in source.retriever.invoke("pelican")]
    assert ranked == ["KB-title", "KB-heading", "KB-body"]


def test_cached_counts_last_until_a_refresh_changes_a_document(postgres: PostgresServer, tmp_path: Path) -> None:
    pages = [{"url": f"KB-{i}", "title": f"Page {i}", "text": f"pelican notes {i}"} for i in range(4)]
    pages.append({"url": "KB-heron", "title": "Heron", "text": "heron notes"})
    raw = _source(postgres, [_write(tmp_path / "c.jsonl", pages)], _schema())
    _refresh(raw)
    (source,), _ = build_sources([raw], Defaults())
    retriever = source.retriever
    assert isinstance(retriever, PostgresRetriever)

    def scores() -> dict[str, float]:
        return {d.url: s for d, s in retriever.search_visible("heron pelican", ["public", "unstated"], None)}

    before = scores()
    assert _refresh(raw).unchanged == 5  # nothing changed: the same generation, the same counts
    assert scores() == before
    # Herons on every page: the word's IDF falls, which the next search sees through the same retriever.
    _write(tmp_path / "c.jsonl", [{**p, "text": p["text"] + " heron"} for p in pages])
    assert _refresh(raw).updated == 5
    after = scores()
    (fresh,), _ = build_sources([raw], Defaults())
    assert isinstance(fresh.retriever, PostgresRetriever)
    assert after == {d.url: s for d, s in fresh.retriever.search_visible("heron pelican", ["public", "unstated"],
                                                                         None)}  # fmt: skip
    assert after["KB-heron"] < before["KB-heron"]


def test_a_pool_that_does_not_bind_ranks_every_match(postgres: PostgresServer, tmp_path: Path) -> None:
    pages = [{"url": f"KB-{i}", "title": f"Page {i}", "text": " ".join(["expense"] * (i % 3 + 1) +
                                                                        ["report"] * (i % 5) + ["travel"] * (i % 2))}
             for i in range(30)]  # fmt: skip
    raw = _source(postgres, [_write(tmp_path / "c.jsonl", pages)], _schema(), k=30)
    _refresh(raw)
    question, visible = "expense report travel", ["public", "unstated"]

    def top(pool: int) -> list[tuple[str, float]]:
        (source,), _ = build_sources([{**raw, "candidate_pool": pool}], Defaults())
        assert isinstance(source.retriever, PostgresRetriever)
        return [(d.url, s) for d, s in source.retriever.search_visible(question, visible, None)]

    exact = top(0)
    assert len(exact) == 30
    assert top(30 + 24 + 15) == exact  # every word's documents fit: the pool is every match
    # Bound to the rarest word's (travel: 15 pages), the candidates are those pages, ranked by every word:
    # the exact ranking's order and scores, without the pages that lack the word.
    assert top(20) == [(url, score) for url, score in exact if int(url.split("-")[1]) % 2 == 1]


def test_a_word_past_the_pool_is_ranked_in_a_sample_of_its_pages(postgres: PostgresServer, tmp_path: Path) -> None:
    pages = [{"url": f"KB-{i}", "title": f"Page {i}", "text": " ".join(["travel"] * (i % 4 + 1) + ["notes"] * (i % 7))}
             for i in range(60)]  # fmt: skip
    raw = _source(postgres, [_write(tmp_path / "c.jsonl", pages)], _schema())
    _refresh(raw)
    visible = ["public", "unstated"]

    def top(pool: int, k: int) -> list[tuple[str, float]]:
        (source,), _ = build_sources([{**raw, "candidate_pool": pool, "k": k}], Defaults())
        assert isinstance(source.retriever, PostgresRetriever)
        return [(d.url, s) for d, s in source.retriever.search_visible("travel", visible, None)]

    def key(url: str) -> int:  # schema.SAMPLE_KEY
        return int(hashlib.md5(url.encode()).hexdigest()[:8], 16)

    exact = top(0, 60)
    assert len(exact) == 60
    # Every page holds the one word, 60 > 20: the pages whose url key is in the range's first third are
    # ranked, in the exact ranking's order and with its scores.
    in_sample = [(url, score) for url, score in exact if key(url) < int(20 / 60 * 2**32)]
    assert 8 < len(in_sample) < 60
    assert top(20, 8) == in_sample[:8]
    # A sample holding fewer pages than the search asks for is widened until it holds them.
    few = top(1, 8)
    assert len(few) == 8
    assert few == [(url, score) for url, score in exact if (url, score) in few]
    # Tables of an earlier version, without the sample's index, get it at their next refresh.
    with postgres.connect() as conn:
        conn.execute(sql.SQL("DROP INDEX {}").format(sql.Identifier(raw["schema"], "documents_sample")))
    _refresh(raw)
    with postgres.connect() as conn:
        assert conn.execute("SELECT to_regclass(%s)", (f"{raw['schema']}.documents_sample",)).fetchone() != (None,)
    assert top(20, 8) == in_sample[:8]


def test_the_rarest_words_held_together_stand_for_a_word_past_the_pool(postgres: PostgresServer,
                                                                      tmp_path: Path) -> None:
    # Every page says "travel", every second "passport", every third "visa": asked about all three with a pool of
    # 10, the rarest word alone (visa, 20 pages) is past the pool, and the pages holding the two rarest words
    # together (visa and passport, 10 pages) are ranked, in the exact ranking's order and with its scores.
    pages = [{"url": f"KB-{i}", "title": f"Page {i}",
              "text": " ".join(["travel"] * (i % 5 + 1) + ["passport"] * (i % 2 == 0) * (i % 4 + 1)
                               + ["visa"] * (i % 3 == 0) * (i % 7 + 1) + ["notes"] * (i % 11))}
             for i in range(60)]  # fmt: skip
    raw = _source(postgres, [_write(tmp_path / "c.jsonl", pages)], _schema())
    _refresh(raw)
    question, visible = "visa passport travel", ["public", "unstated"]

    def top(pool: int, k: int) -> list[tuple[str, float]]:
        (source,), _ = build_sources([{**raw, "candidate_pool": pool, "k": k}], Defaults())
        assert isinstance(source.retriever, PostgresRetriever)
        return [(d.url, s) for d, s in source.retriever.search_visible(question, visible, None)]

    exact = top(0, 60)
    assert len(exact) == 60
    both = [(url, score) for url, score in exact if int(url.split("-")[1]) % 6 == 0]
    assert len(both) == 10
    assert top(10, 8) == both[:8]
    # Past the pool even together (pool 5: 10 pages hold all three), a sample of the rarest word's pages is.
    sampled = top(5, 8)
    assert len(sampled) == 8
    assert sampled == [(url, score) for url, score in exact if (url, score) in sampled]


def test_refresh_upserts_deletes_and_leaves_the_source_as_it_was_on_error(
    postgres: PostgresServer, tmp_path: Path
) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "a.md").write_text("---\nurl: KB-a\ntitle: A\n---\nAlpha text about invoices.\n", encoding="utf-8")
    (corpus / "b.md").write_text("---\nurl: KB-b\ntitle: B\n---\nBeta text about invoices.\n", encoding="utf-8")
    raw = _source(postgres, [corpus], _schema())
    assert _refresh(raw).model_dump() == {"added": 2, "updated": 0, "unchanged": 0, "removed": 0, "skipped": 0,
                                          "documents": 2}
    assert _refresh(raw).unchanged == 2
    (corpus / "a.md").write_text("---\nurl: KB-a\ntitle: A\n---\nAlpha text, changed, invoices.\n", encoding="utf-8")
    (corpus / "b.md").unlink()
    (corpus / "c.md").write_text("---\nurl: KB-c\ntitle: C\n---\nGamma text about invoices.\n", encoding="utf-8")
    stats = _refresh(raw)
    assert (stats.added, stats.updated, stats.removed, stats.unchanged) == (1, 1, 1, 0)
    with pytest.raises(CorpusError, match="no such file"):
        _refresh({**raw, "paths": [str(corpus), str(tmp_path / "gone")]})
    (corpus / "d.md").write_text("---\nurl: KB-a\ntitle: D\n---\nClaims a's url.\n", encoding="utf-8")
    with pytest.raises(CorpusError, match="also claimed"):
        _refresh(raw)
    with postgres.connect() as conn:
        rows = conn.execute(f'SELECT url, content FROM "{raw["schema"]}".documents ORDER BY url').fetchall()
    assert rows == [("KB-a", "Alpha text, changed, invoices.\n"), ("KB-c", "Gamma text about invoices.\n")]


def test_two_writers_at_once_leave_one_whole_corpus(postgres: PostgresServer, tmp_path: Path) -> None:
    schema = _schema()
    corpora = [_write(tmp_path / f"{name}.jsonl", [{"url": f"KB-{name}-{i}", "title": f"{name} {i}",
                                                   "text": f"Text {i} of corpus {name}."} for i in range(300)])
               for name in ("left", "right")]  # fmt: skip
    errors: list[BaseException] = []

    def write(path: Path) -> None:
        try:
            _refresh(_source(postgres, [path], schema))
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(path,)) for path in corpora]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert errors == []
    with postgres.connect() as conn:
        urls = {row[0] for row in conn.execute(f'SELECT url FROM "{schema}".documents')}
    assert urls in ({f"KB-left-{i}" for i in range(300)}, {f"KB-right-{i}" for i in range(300)})


def test_permissions_are_in_the_query(postgres: PostgresServer, tmp_path: Path) -> None:
    # Ten hidden pages that match better than the visible one: the caller's top 1 is still theirs.
    hidden = [{"url": f"KB-hidden-{i}", "title": "Salary bands", "text": "salary salary salary bands",
               "metadata": {"acl": "group:hr"}} for i in range(10)]
    visible = {"url": "KB-visible", "title": "Travel", "text": "Salary advances for travel are possible."}
    raw = _source(postgres, [_write(tmp_path / "c.jsonl", [*hidden, visible])], _schema(), k=1)
    _refresh(raw)
    out = _ask(raw, "salary bands", principal={"user": "bob", "groups": ["staff"]})
    assert [d["url"] for d in out["documents"]] == ["KB-visible"]
    assert [(r["documents"], r["denied"]) for r in out["source_runs"]] == [(1, 0)]
    hr = _ask(raw, "salary bands", principal={"user": "ann", "groups": ["hr"]})
    assert hr["documents"][0]["url"].startswith("KB-hidden-")


def _no_password(*texts: str) -> None:
    for text in texts:
        assert PASSWORD not in text
        assert "S3cr" not in text  # nor the password URL-encoded (pg%3AS3cr%40t...) nor any part of it


def _observe(raw: dict[str, Any], caplog: pytest.LogCaptureFixture) -> tuple[dict[str, Any], str]:
    handler = RunCollectorCallbackHandler()
    ctx = EvidentContext(sources=[raw], k=4, top_n=4, embeddings="none")
    with caplog.at_level(logging.DEBUG):
        out = graph.invoke({"query": EXPENSES}, {"callbacks": [handler]}, context=ctx)
    trace = json.dumps([run.model_dump() for run in handler.traced_runs], default=str)
    _no_password(json.dumps(out["source_errors"]), caplog.text, trace)
    return out, trace  # type: ignore[return-value]


def test_a_database_that_is_down_degrades_the_answer(
    postgres: PostgresServer, examples: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    other = _write(tmp_path / "c.jsonl", [{"url": "KB-x", "title": "Expense reports",
                                           "text": "Submit an expense report within thirty days of a trip."}])
    raw = _source(postgres, [examples], _schema())
    _refresh(raw)
    local = {"name": "files", "type": "local", "paths": [str(other)], "index_path": str(tmp_path / "i.sqlite3")}
    postgres.pause()
    try:
        ctx = EvidentContext(sources=[raw, local], k=4, top_n=4, embeddings="none")
        handler = RunCollectorCallbackHandler()
        with caplog.at_level(logging.DEBUG):
            out = graph.invoke({"query": EXPENSES}, {"callbacks": [handler]}, context=ctx)
    finally:
        postgres.resume()
    assert out["status"] == "degraded"
    (error,) = out["source_errors"]
    assert error["source"] == "pg"
    assert error["message"] == (f"cannot connect to PostgreSQL at 127.0.0.1:{postgres.port}, database 'postgres', "
                             "user 'evident' (server down, unreachable or refusing connections)")
    assert [d["url"] for d in out["documents"]] == ["KB-x"]
    _no_password(error["message"], caplog.text, json.dumps([r.model_dump() for r in handler.traced_runs], default=str))
    # Up again: the next query reconnects.
    assert _ask(raw, EXPENSES)["status"] == "answered"


def test_a_restarted_server_is_reached_again(postgres: PostgresServer, examples: Path) -> None:
    raw = _source(postgres, [examples], _schema())
    _refresh(raw)
    assert _ask(raw, EXPENSES)["status"] == "answered"  # the source now holds an idle connection
    postgres.pause()
    postgres.resume()
    out = _ask(raw, EXPENSES)
    assert (out["status"], out["source_errors"]) == ("answered", [])


def test_wrong_credentials_are_one_clear_error(
    postgres: PostgresServer, examples: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    schema = _schema()
    _refresh(_source(postgres, [examples], schema))
    monkeypatch.setenv("PG_DSN_WRONG", postgres.dsn(password=PASSWORD + "-wrong"))
    raw = {**_source(postgres, [examples], schema), "dsn": None, "dsn_env": "PG_DSN_WRONG"}
    out, _ = _observe(raw, caplog)
    assert out["status"] == "degraded"
    assert [(e["source"], e["kind"], e["message"]) for e in out["source_errors"]] == [
        ("pg", "error", f"PostgreSQL at 127.0.0.1:{postgres.port}, database 'postgres', user 'evident': "
                        "authentication failed; check the credentials in PG_DSN_WRONG")]
    with pytest.raises(SourceFailure, match="authentication failed") as failed:
        _refresh(raw)
    _no_password(str(failed.value))


def test_a_statement_the_database_cancels_degrades_the_answer(
    postgres: PostgresServer, examples: Path, caplog: pytest.LogCaptureFixture
) -> None:
    raw = _source(postgres, [examples], _schema(), statement_timeout_ms=200)
    _refresh(raw)
    # A writer holding the table: the search waits for its lock until the database cancels it.
    with postgres.connect() as blocker:
        blocker.autocommit = False
        blocker.execute(f'LOCK TABLE "{raw["schema"]}".documents IN ACCESS EXCLUSIVE MODE')
        out, _ = _observe(raw, caplog)
        blocker.rollback()
    assert out["status"] == "degraded"
    assert [(e["kind"], e["message"]) for e in out["source_errors"]] == [
        ("timeout", f"PostgreSQL at 127.0.0.1:{postgres.port}, database 'postgres', user 'evident': "
                    "the database cancelled the search at its statement timeout (200 ms)")]
    assert _ask(raw, EXPENSES)["status"] == "answered"


def test_a_source_never_indexed_says_to_run_index(postgres: PostgresServer, examples: Path) -> None:
    out = _ask(_source(postgres, [examples], _schema()), EXPENSES)
    assert out["status"] == "degraded"
    assert out["source_errors"][0]["kind"] == "config"
    assert out["source_errors"][0]["message"].endswith("not indexed yet; run `evident index --config <evident.toml>`")


def test_the_cli_indexes_and_asks(postgres: PostgresServer, examples: Path, tmp_path: Path) -> None:
    config = tmp_path / "evident.toml"
    config.write_text(f'[[sources]]\nname = "pg"\ntype = "postgres"\ndsn_env = "PG_DSN"\n'
                      f'paths = ["{examples}"]\nschema = "{_schema()}"\n', encoding="utf-8")
    env = {**os.environ, "PG_DSN": postgres.dsn(), "EVIDENT_EMBEDDINGS": "none"}

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "evident.cli", *args], capture_output=True, text=True,
                              timeout=120, env=env, stdin=subprocess.DEVNULL, check=False)  # fmt: skip

    indexed = cli("index", "--config", str(config), "--json")
    assert indexed.returncode == 0, indexed.stderr
    (row,) = json.loads(indexed.stdout)["sources"]
    assert row["status"] == "ok" and row["added"] == row["documents"] > 30
    asked = cli("ask", EXPENSES, "--config", str(config), "--json")
    assert asked.returncode == 0, asked.stderr
    answer = json.loads(asked.stdout)
    assert answer["status"] == "answered" and answer["citations"][0]["span_base"] == "document"
    env["PG_DSN"] = postgres.dsn(password="nope-wrong")
    refused = cli("index", "--config", str(config))
    assert refused.returncode == 1
    assert refused.stderr.count("authentication failed") == 1, refused.stderr
    _no_password(refused.stdout, refused.stderr)
    env["PG_DSN"] = "host=127.0.0.1 port='5432"
    broken = cli("ask", EXPENSES, "--config", str(config), "--json")
    assert "not a valid PostgreSQL connection string" in broken.stdout + broken.stderr
    assert "Traceback" not in broken.stderr


@pytest.mark.embeddings
def test_vectors_are_stored_beside_the_text_and_rank_with_the_words(postgres: PostgresServer, examples: Path) -> None:
    raw = _source(postgres, [examples / "policies"], _schema())
    _refresh(raw)
    settings = parse_settings(raw, 1)
    assert isinstance(settings, PostgresSettings)
    scorer = resolve_embeddings(EvidentContext()).scorer
    assert scorer is not None, "the local model is part of `make test`'s install"
    stats = embed_missing(Connections(postgres_dsn(settings), connect_timeout_s=10, statement_timeout_ms=None),
                          raw["schema"], scorer)  # fmt: skip
    assert stats.documents == 9 and stats.windows > 9
    with postgres.connect() as conn:
        stored = conn.execute(f'SELECT count(*) FROM "{raw["schema"]}".vectors').fetchone()
    assert stored == (stats.windows,)
    question = "Can I work from home on Fridays?"
    out = graph.invoke({"query": question}, context=EvidentContext(sources=[raw], k=4, top_n=4))
    assert out["source_errors"] == []
    for doc in out["documents"]:
        windows = doc["metadata"][SEMANTIC_WINDOWS]
        spans, texts = document_windows(doc["title"], doc["content"])
        assert [(s, e) for s, e, _ in windows] == spans
        fresh = scorer.similarities(question, texts)
        assert [round(c, 4) for _, _, c in windows] == [round(float(c), 4) for c in fresh]
    assert out["documents"][0]["url"].endswith("remote-work")


def test_an_answer_rechecked_after_its_row_is_updated(postgres: PostgresServer, tmp_path: Path) -> None:
    quote = "Employees receive 30 days of paid vacation per calendar year."
    leave = {"url": "KB-leave", "title": "Leave policy", "text": f"{quote} Unused days expire in March."}
    travel = {"url": "KB-travel", "title": "Travel", "text": "Economy class is required for short flights."}
    path = tmp_path / "c.jsonl"
    raw = _source(postgres, [_write(path, [leave, travel])], _schema())
    _refresh(raw)
    ctx = EvidentContext(sources=[raw], k=4, top_n=4, embeddings="none")
    answer = _ask(raw, "How many days of paid vacation do employees receive?")
    cited = [c for c in answer["citations"] if c["url"] == "KB-leave"]
    assert cited and all(c["content_hash"] == hashlib.blake2b(leave["text"].encode(), digest_size=16).hexdigest()
                         for c in cited)

    def outcomes(**who: Any) -> set[str]:
        return {c.outcome for c in recheck_answer(answer, context=ctx, principal=who or None).checks
                if c.url == "KB-leave"}

    assert outcomes() == {"unchanged"}
    _refresh(raw | {"paths": [str(_write(path, [{**leave, "text": "Read this first. " + leave["text"]}, travel]))]})
    assert outcomes() == {"moved"}
    _refresh(raw | {"paths": [str(_write(path, [{**leave, "text": leave["text"].replace("30", "25")}, travel]))]})
    assert outcomes() == {"changed"}
    restricted = {**leave, "text": leave["text"].replace("30", "25"), "metadata": {"acl": "group:hr"}}
    _refresh(raw | {"paths": [str(_write(path, [restricted, travel]))]})
    assert outcomes(user="bob", groups=["staff"]) == {"gone"}  # the row is hidden from bob now
    assert outcomes(user="ann", groups=["hr"]) == {"changed"}
    _refresh(raw | {"paths": [str(_write(path, [travel]))]})
    assert outcomes(user="ann", groups=["hr"]) == {"gone"}
