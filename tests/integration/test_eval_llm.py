"""`evident eval` with a model: EvidenT and the three baselines through the scripted
OpenAI-compatible server (the real ChatOpenAI client), the judge, and a resume with no new call."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from evident.cli import app
from evident.models import INSUFFICIENT_ANSWER
from tests.support.llm import CORPUS, EXPENSES, TRAVEL, echo_responder, prompt_documents, server
from tests.support.openai_server import ChatRequest, OpenAIServer, Reply

__all__ = ["server"]

INVENTED = "https://invented.example/ges"
_SENTENCE = re.compile(r"[^.!?\n]+[.!?]")
echo = echo_responder()


def responder(request: ChatRequest) -> Reply:
    text = request.text
    if "Target text:" in text:  # the judge
        return Reply(content='{"label": "Yes", "reason": "restates the source", "confidence_score": 0.9}')
    if request.kind == "extract" or "<passage>" in text:  # EvidenT's own two calls
        return echo(request)
    if "401(k)" in text:
        return Reply(content=INSUFFICIENT_ANSWER)
    docs = prompt_documents(request.text)
    first = next(m.group(0).strip() for m in _SENTENCE.finditer(docs[0][1]) if len(m.group(0).split()) >= 4)
    if "Every sentence of the answer must be backed" in text:  # ground-every-sentence: one invented source
        return Reply(content=f"{first} [1]\nIt is also reviewed yearly. [2]\n\nReferences:\n[1] {docs[0][0]}\n"
                             f"[2] {INVENTED}")
    return Reply(content=f"{first} [1]\n\nReferences:\n[1] {docs[0][0]}")


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path]:
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"url": u, "title": t, "text": body}) + "\n"
                              for u, (t, _, body) in CORPUS.items()), encoding="utf-8")
    questions = tmp_path / "questions.jsonl"
    rows = [
        {"id": "travel", "query": "How early must flights be booked through TravelDesk?", "answerable": True,
         "gold_urls": [TRAVEL], "gold_evidence": ["at least 14 days before departure"]},
        {"id": "expenses", "query": "When must expense reports be submitted in Ledgerly?", "answerable": True,
         "gold_urls": [EXPENSES], "gold_evidence": ["within 30 days of the trip's end date"]},
        {"id": "pension", "query": "What does the company match in the 401(k) plan?", "answerable": False,
         "gold_urls": []},
    ]
    questions.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return corpus, questions


def test_llm_methods_and_judge_then_resume_without_calls(
    server: OpenAIServer, files: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for var in ("LANGSMITH_API_KEY", "LANGCHAIN_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("EVIDENT_MODEL", "test-model")
    monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    server.respond_with(responder)
    corpus, questions = files
    args = ["eval", "--dataset", str(questions), "--corpus", str(corpus), "--out", str(tmp_path / "out"),
            "--json", "--judge"]
    res = CliRunner().invoke(app, args, catch_exceptions=False)
    assert res.exit_code == 0, res.stderr
    data = json.loads(res.stdout)
    methods = data["methods"]
    assert set(methods) == {"evident", "bm25", "pilot", "direct", "ges"}

    baseline_calls = [r for r in server.requests
                      if r.kind == "generate" and "<passage>" not in r.text and "Target text:" not in r.text]
    assert len(baseline_calls) == 9  # three baselines x three questions, one call each
    assert sum("[1]\n<document>" in r.text for r in baseline_calls) == 6  # the documents, numbered
    assert sum("<passage>" in r.text for r in server.requests) >= 2  # EvidenT generated from verified passages
    assert any(r.kind == "extract" for r in server.requests)

    # ges cites an invented page on both answerable questions; pilot and direct cite what they saw.
    assert methods["ges"]["hallucination"]["value"] == pytest.approx(2 / 3)
    assert methods["pilot"]["hallucination"]["value"] == 0.0
    assert methods["evident"]["hallucination"]["value"] == 0.0
    for m in ("pilot", "direct", "ges"):
        assert methods[m]["correct_abstention"] == {**methods[m]["correct_abstention"], "value": 1.0, "n": 1}
        assert methods[m]["groundedness"]["value"] == 1.0
        # Judged "Yes" by the model, except the invented source, which has no text to judge: ges has
        # two facts per answer, one of them citing it.
        expected = 2 / 4 if m == "ges" else 1.0
        assert methods[m]["judge_entailed"]["value"] == pytest.approx(expected)
    assert {t["baseline"] for t in data["tests"]} == {"bm25", "pilot", "direct", "ges"}
    halluc = next(t for t in data["tests"] if t["metric"] == "hallucination" and t["baseline"] == "ges")
    assert halluc["z"] < 0  # evident hallucinates less

    calls = len(server.requests)
    again = CliRunner().invoke(app, args, catch_exceptions=False)
    assert again.exit_code == 0, again.stderr
    assert len(server.requests) == calls  # every answer and judgement came from the cache
    assert json.loads(again.stdout)["methods"] == methods


def test_failed_model_calls_are_reported_and_retried_on_the_next_run(
    server: OpenAIServer, files: tuple[Path, Path], tmp_path: Path
) -> None:
    from evident.eval.dataset import load_dataset
    from evident.eval.runner import evaluate
    from evident.eval.summary import method_metrics
    from tests.support.llm import llm_context

    corpus, questions = files
    queries = load_dataset(questions, limit=1)
    ctx = llm_context(server, corpus=[str(corpus)], model_max_retries=0)
    server.respond_with(lambda request: Reply(status=500, error="model down"))
    down = evaluate(queries, ctx, ["evident", "pilot"], tmp_path, progress=False)
    [evident], [pilot] = down.rows["evident"], down.rows["pilot"]
    # EvidenT answers offline when its model fails, and says so; the baseline has nothing to fall back on.
    assert evident.record.degraded and "HTTP 500" in evident.record.reason
    assert pilot.record.outcome == "error" and "HTTP 500" in pilot.record.reason
    assert method_metrics(down.rows["pilot"], 5, 0.7)["errors"].value == 1.0

    server.respond_with(responder)
    up = evaluate(queries, ctx, ["evident", "pilot"], tmp_path, progress=False)
    assert up.computed == {"retrieval": 0, "evident": 1, "pilot": 1}  # neither failure was cached
    assert not up.rows["evident"][0].record.degraded and up.rows["pilot"][0].record.outcome == "answered"
