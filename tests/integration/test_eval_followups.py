"""`evident eval` on follow-up questions: a `history` per question, asked as a conversation."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from evident.cli import app
from evident.context import EvidentContext
from evident.conversation.rule import condense
from evident.eval.dataset import DatasetError, EvalQuery, load_dataset
from evident.eval.report import EvalResult
from evident.eval.runner import evaluate
from evident.eval.semantic import SemanticRun
from evident.graph import graph
from tests.support.langsmith_server import LangSmithServer

ROOT = Path(__file__).resolve().parents[2]
FOLLOWUPS = ROOT / "examples" / "followups.jsonl"
TRAVEL = "https://policies.tessellate.example/finance/travel-and-expenses"


def _bare(queries: list[EvalQuery]) -> list[EvalQuery]:
    return [q.model_copy(update={"history": []}) for q in queries]


def test_a_follow_up_is_retrieved_and_answered_as_its_standalone_question(tmp_path: Path, examples: Path) -> None:
    queries = load_dataset(FOLLOWUPS, limit=3)
    first = queries[0]
    assert first.query == "And in London?" and [m.role for m in first.history] == ["user", "assistant"]
    ctx = EvidentContext(corpus=[str(examples)])
    run = evaluate(queries, ctx, ["evident", "bm25"], tmp_path, progress=False)
    for q, row in zip(queries, run.rows["evident"], strict=True):
        # Offline, the graph's rewrite step is the rule: the standalone question is the rule's.
        assert row.retrieval.standalone_query == condense(q.query, q.history)[0] != q.query
    london = run.rows["evident"][0]
    assert "hotel" in london.retrieval.standalone_query.lower()
    assert london.record.outcome == "answered" and "300 GBP" in london.record.answer
    assert TRAVEL in {f.url for f in london.record.facts}
    # Every record of results.json names the question it answered.
    result = EvalResult.build("followups", queries, run, ctx, semantic=SemanticRun(on=False, status="off (test)"))
    assert [r["standalone_query"] for r in result.records["evident"]] == \
        [row.retrieval.standalone_query for row in run.rows["evident"]]
    # bm25 answers the same standalone question over the same documents.
    assert run.rows["bm25"][0].retrieval == london.retrieval

    # The graph, asked the conversation directly, gives the answer the harness recorded.
    messages = [*(m.model_dump() for m in first.history), {"role": "user", "content": first.query}]
    state = graph.invoke({"messages": messages}, context=ctx)
    assert state["answer"] == london.record.answer
    assert state["evidence"] == london.record.evidence != ""  # the record keeps how well it is backed
    assert run.rows["bm25"][0].record.evidence == ""  # a baseline has no such field

    # Without its history the same question is another question: different retrieval, not reused.
    bare = evaluate(_bare(queries), ctx, ["evident"], tmp_path, progress=False)
    assert bare.computed["retrieval"] == 3
    assert bare.rows["evident"][0].retrieval.standalone_query == ""
    assert bare.rows["evident"][0].record.answer != london.record.answer


def test_follow_ups_resume_from_the_cache(tmp_path: Path, examples: Path) -> None:
    queries = load_dataset(FOLLOWUPS, limit=2)
    ctx = EvidentContext(corpus=[str(examples)])
    first = evaluate(queries, ctx, ["evident"], tmp_path, progress=False)
    assert first.computed == {"retrieval": 2, "evident": 2}
    again = evaluate(queries, ctx, ["evident"], tmp_path, progress=False)
    assert again.computed == {"retrieval": 0, "evident": 0}
    assert [r.record.answer for r in again.rows["evident"]] == [r.record.answer for r in first.rows["evident"]]


def test_cli_reads_history_and_rejects_a_bad_one(tmp_path: Path, examples: Path) -> None:
    runner = CliRunner(env={"LANGSMITH_API_KEY": "", "LANGCHAIN_API_KEY": ""})  # no LangSmith experiment
    res = runner.invoke(app, ["eval", "--dataset", str(FOLLOWUPS), "--corpus", str(examples), "--limit", "4",
                              "--method", "evident", "--json"], catch_exceptions=False)
    assert res.exit_code == 0, res.stderr
    data = json.loads(res.stdout)
    assert data["queries"] == 4 and data["methods"]["evident"]["groundedness"]["n"] == 4

    bad = tmp_path / "q.jsonl"
    bad.write_text('{"id": "a", "query": "And in London?", "history": [{"role": "system", "content": "x"}]}\n',
                   encoding="utf-8")
    with pytest.raises(DatasetError, match=r"q\.jsonl:1: field history\.0\.role"):
        load_dataset(bad)
    res = runner.invoke(app, ["eval", "--dataset", str(bad), "--corpus", str(examples)], catch_exceptions=False)
    assert res.exit_code == 2 and f"{bad}:1: field history.0.role" in res.stderr
    assert "Traceback" not in res.stderr


@pytest.fixture
def langsmith(monkeypatch: pytest.MonkeyPatch) -> Iterator[LangSmithServer]:
    """LangSmith configured, at the stand-in API on 127.0.0.1."""
    with LangSmithServer() as server:
        monkeypatch.setenv("LANGSMITH_ENDPOINT", server.url)
        monkeypatch.setenv("LANGSMITH_API_KEY", "test-key")
        yield server


# langsmith's own client warns about its deprecated feedback arguments; nothing of ours.
@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_a_follow_ups_history_reaches_the_langsmith_example(examples: Path, langsmith: LangSmithServer) -> None:
    res = CliRunner().invoke(app, ["eval", "--dataset", str(FOLLOWUPS), "--corpus", str(examples), "--limit", "2",
                                   "--method", "bm25", "--json"], catch_exceptions=False)
    assert res.exit_code == 0, res.stderr
    sent = {e["inputs"]["id"]: e["inputs"] for e in langsmith.examples.values()}
    first = load_dataset(FOLLOWUPS, limit=1)[0]
    assert sent["f01"]["query"] == "And in London?"
    assert sent["f01"]["history"] == [{"role": m.role, "content": m.content} for m in first.history]
