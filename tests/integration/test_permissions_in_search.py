"""Hidden documents change nothing a caller can observe: the graph's whole output for a caller is the
same over a corpus with documents they may not see as over the same corpus without them."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.messages import BaseMessage
from pydantic import BaseModel

from evident.connectors.config import PostgresSettings, parse_settings, postgres_dsn
from evident.connectors.index.loaders import DEFAULT_LIMITS
from evident.connectors.postgres.connections import Connections
from evident.connectors.postgres.refresh import refresh
from evident.connectors.postgres.search import CANDIDATE_POOL
from evident.context import EvidentContext
from evident.graph import graph
from tests.support.postgres import PostgresServer

BOB = {"user": "bob", "groups": ["staff"]}
VISIBLE = [
    {"url": "https://w/expenses", "title": "Expense reports",
     "text": "Submit an expense report within thirty days. PELICAN is the expense system."},
    {"url": "https://w/travel", "title": "Travel bookings",
     "text": "Book travel through the portal and mind the expense limits that apply."},
    {"url": "https://w/leave", "title": "Annual leave", "metadata": {"acl": "group:staff"},
     "text": "Staff get twenty five days of annual leave, approved by their manager."},
]
QUESTIONS = ["ZEBRAFINCH expense", "PELICAN expense", "How many days of annual leave?",
             "Who approves expense reports?", "expnse limits", "zebrafnch board"]
WORDS = ["expense", "report", "leave", "days", "manager", "zebrafinch", "board", "travel", "limits",
         "annual", "secret", "budget", "approves", "pelican", "portal", "salary"]
NOT_BOB = st.sampled_from(["group:board", "user:carol", "group:x, user:dan", [], {"users": ["eve"]},
                           "role:x", 42, ["group:hr", "user:alice"], {"groups": ["STAFF-board"]}])


def _hidden(index: int, words: list[str], acl: Any) -> dict[str, Any]:
    return {"url": f"https://w/hidden-{index}", "title": " ".join(words[:2]), "text": " ".join(words[2:]),
            "metadata": {"acl": acl}}


# Of random words and random lengths, a few words to a few hundred: the average field length, the term
# and document counts all differ from the visible documents', and none may show in bob's output.
HIDDEN_DOCS = st.lists(
    st.tuples(st.lists(st.sampled_from(WORDS), min_size=3, max_size=300), NOT_BOB), min_size=1, max_size=4
).map(lambda docs: [_hidden(i, words, acl) for i, (words, acl) in enumerate(docs)])


def _observed(value: Any) -> Any:
    """The output as plain data, without what differs run to run (timings, message ids)."""
    if isinstance(value, BaseMessage):
        value = {"type": value.type, "content": value.content, "kwargs": value.additional_kwargs}
    elif isinstance(value, BaseModel):
        value = value.model_dump()
    if isinstance(value, dict):
        return {k: _observed(v) for k, v in value.items() if k not in {"timings_ms", "latency_ms", "id"}}
    if isinstance(value, (list, tuple)):
        return [_observed(v) for v in value]
    return value


def _assert_same(seen: Any, alone: Any, where: str = "output") -> None:
    """Equal to the last bit, scores included; `where` names the first difference."""
    if isinstance(seen, dict) and isinstance(alone, dict):
        assert seen.keys() == alone.keys(), where
        for key in seen:
            _assert_same(seen[key], alone[key], f"{where}.{key}")
    elif isinstance(seen, list) and isinstance(alone, list):
        assert len(seen) == len(alone), (where, seen, alone)
        for i, (a, b) in enumerate(zip(seen, alone, strict=True)):
            _assert_same(a, b, f"{where}[{i}]")
    else:
        assert seen == alone, (where, seen, alone)


def _ask(folder: Path, records: list[dict[str, Any]], question: str, k: int, pool: int | None = None) -> Any:
    """Bob's whole output over `records`; with `pool`, through a `local` source of that `candidate_pool`."""
    folder.mkdir(parents=True, exist_ok=True)
    corpus = folder / "pages.jsonl"
    corpus.write_text("\n".join(json.dumps(r) for r in records) + "\n", encoding="utf-8")
    index = str(folder / "index.sqlite3")
    ctx = (EvidentContext(corpus=[str(corpus)], index_path=index, k=k, top_n=k) if pool is None else
           EvidentContext(sources=[{"name": "local", "type": "local", "paths": [str(corpus)], "index_path": index,
                                    "candidate_pool": pool}], k=k, top_n=k))  # fmt: skip
    return _observed(graph.invoke({"query": question, "principal": BOB}, context=ctx))


_schemas = itertools.count()


def _ask_postgres(server: PostgresServer, folder: Path, records: list[dict[str, Any]], question: str, k: int,
                  **extra: Any) -> Any:  # fmt: skip
    """`_ask` with the documents in a PostgreSQL source (a schema of its own) instead of the embedded index;
    `extra`: more settings of the source."""
    folder.mkdir(parents=True, exist_ok=True)
    corpus = folder / "pages.jsonl"
    corpus.write_text("\n".join(json.dumps(r) for r in records) + "\n", encoding="utf-8")
    raw = {"name": "pg", "type": "postgres", "dsn": server.dsn(), "paths": [str(corpus)],
           "schema": f"perm_{next(_schemas)}", **extra}
    settings = parse_settings(raw, 1)
    assert isinstance(settings, PostgresSettings)
    refresh(Connections(postgres_dsn(settings), connect_timeout_s=10, statement_timeout_ms=None),
            settings.db_schema, "english", [corpus], limits=DEFAULT_LIMITS)  # fmt: skip
    ctx = EvidentContext(sources=[raw], k=k, top_n=k)
    return _observed(graph.invoke({"query": question, "principal": BOB}, context=ctx))


# A candidate pool of 1 (so k) binds on most questions: the candidates are chosen from bob's statistics
# alone (the embedded index: the highest upper bounds; PostgreSQL: the documents of his rarest words), so
# the hidden pages move nothing there either.
@pytest.mark.parametrize("pool", [None, 1])
@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
@given(hidden=HIDDEN_DOCS, question=st.sampled_from(QUESTIONS), k=st.sampled_from([1, 2, 8]))
def test_hidden_documents_change_nothing_bob_can_observe(
    tmp_path_factory: Any, hidden: list[dict[str, Any]], question: str, k: int, pool: int | None
) -> None:
    base = tmp_path_factory.mktemp("corpus")
    seen = _ask(base / "with", VISIBLE + hidden, question, k, pool)
    alone = _ask(base / "without", VISIBLE, question, k, pool)
    _assert_same(seen, alone)


@pytest.mark.parametrize("pool", [CANDIDATE_POOL, 1])
@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
@given(hidden=HIDDEN_DOCS, question=st.sampled_from(QUESTIONS), k=st.sampled_from([1, 2, 8]))
def test_hidden_documents_change_nothing_bob_can_observe_in_postgres(
    tmp_path_factory: Any, postgres: PostgresServer, hidden: list[dict[str, Any]], question: str, k: int, pool: int
) -> None:
    base = tmp_path_factory.mktemp("corpus")
    seen = _ask_postgres(postgres, base / "with", VISIBLE + hidden, question, k, candidate_pool=pool)
    alone = _ask_postgres(postgres, base / "without", VISIBLE, question, k, candidate_pool=pool)
    assert seen["source_errors"] == []
    _assert_same(seen, alone)


def test_the_probe_reads_the_same_for_a_hidden_word_and_a_visible_one(tmp_path: Path) -> None:
    hidden = [_hidden(0, ["Board", "review", "ZEBRAFINCH", *["expense"] * 11], "group:board")]
    for question in ("ZEBRAFINCH expense", "PELICAN expense"):
        out = _ask(tmp_path / question.split()[0], VISIBLE + hidden, question, 1)
        assert [d["url"] for d in out["documents"]] == ["https://w/expenses"], question
        assert [run["documents"] for run in out["source_runs"]] == [1]
