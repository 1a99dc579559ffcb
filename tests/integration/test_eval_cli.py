"""`evident eval` end to end on the bundled examples: reports, the --json shape, resume, bad input."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from evident.cli import app
from evident.context import EvidentContext
from evident.eval.dataset import load_dataset
from evident.eval.runner import evaluate

ROOT = Path(__file__).resolve().parents[2]
QUESTIONS = ROOT / "examples" / "questions.jsonl"
NAMED = ("hallucination", "groundedness", "first_citation_precision", "cited_url_precision", "evidence_recall",
         "false_abstention", "correct_abstention", "retrieval_recall_at_1", "retrieval_recall_at_3", "anscov_at_10")


@pytest.fixture(autouse=True)
def _no_langsmith(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("LANGSMITH_API_KEY", "LANGCHAIN_API_KEY", "LANGSMITH_ENDPOINT"):
        monkeypatch.delenv(var, raising=False)


def invoke(*args: str) -> object:
    return CliRunner().invoke(app, ["eval", *args], catch_exceptions=False)


# A plain `pip install evident-rag`, simulated: a finder ahead of every other refuses the eval extra's packages.
WITHOUT = """
import sys

absent, sys.argv = sys.argv[1].split(","), ["evident", *sys.argv[2:]]

class Absent:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in absent:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, Absent())
from evident.cli import main
main()
"""


@pytest.mark.parametrize(("absent", "json_out"), [("statsmodels,scipy,matplotlib", False), ("matplotlib", True)])
def test_without_the_eval_extra_eval_names_the_extra_to_install(examples: Path, absent: str, json_out: bool) -> None:
    args = ["eval", "--dataset", str(QUESTIONS), "--corpus", str(examples), "--limit", "1"] + ["--json"] * json_out
    proc = subprocess.run([sys.executable, "-c", WITHOUT, absent, *args], capture_output=True, text=True,
                          timeout=120, stdin=subprocess.DEVNULL)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr + proc.stdout, proc.stderr
    said = f"needs the eval extra ({absent.replace(',', ', ')} missing): pip install 'evident-rag[eval]'"
    assert proc.stderr == f"evident eval: {said}\n"
    if json_out:
        assert json.loads(proc.stdout)["error"] == said


def test_offline_run_writes_reports_and_stable_json(tmp_path: Path, examples: Path) -> None:
    out = tmp_path / "out"
    res = invoke("--dataset", str(QUESTIONS), "--corpus", str(examples), "--limit", "6", "--out", str(out),
                 "--json", "--ablation")
    assert res.exit_code == 0, res.stderr  # type: ignore[attr-defined]
    data = json.loads(res.stdout)  # type: ignore[attr-defined]
    assert set(data) == {"dataset", "queries", "methods", "tests", "ablation"}
    assert data["dataset"] == str(QUESTIONS) and data["queries"] == 6
    # No model: the baselines are reported as skipped (on stderr and in the report), never imitated.
    assert set(data["methods"]) == {"evident", "bm25"}
    assert "pilot skipped: needs a model" in res.stderr  # type: ignore[attr-defined]
    for method, metrics in data["methods"].items():
        for name in NAMED:
            assert name in metrics, (method, name)
        for name, est in metrics.items():
            assert set(est) == {"value", "ci_low", "ci_high", "n"}, name
            if not name.startswith(("latency_", "answer_")) and est["value"] is not None:
                assert 0.0 <= est["ci_low"] <= est["value"] <= est["ci_high"] <= 1.0, (name, est)
    assert "retention" in data["methods"]["evident"] and "retention" not in data["methods"]["bm25"]
    assert {(t["method"], t["baseline"]) for t in data["tests"]} == {("evident", "bm25")}
    assert all(set(t) == {"metric", "method", "baseline", "z", "p"} and 0 <= t["p"] <= 1 for t in data["tests"])
    assert len(data["ablation"]) == 25 and {(c["n"], c["t"]) for c in data["ablation"]} >= {(3, 0.5), (8, 0.9)}

    report = (out / "report.md").read_text(encoding="utf-8")
    for heading in ("Groundedness (Table 2 layout", "Table 3 layout", "Table 5 layout", "Table 7 layout"):
        assert heading in report
    assert "**pilot**, **direct**, **ges** (needs a model" in report
    results = json.loads((out / "results.json").read_text(encoding="utf-8"))
    assert len(results["records"]["evident"]) == 6 and len(results["records"]["bm25"]) == 6
    assert results["metrics"]["evident"]["groundedness"]["n"] == data["methods"]["evident"]["groundedness"]["n"]
    for png in ("metrics.png", "abstention.png", "ablation.png"):
        assert (out / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", png


def test_plain_json_has_exactly_the_documented_keys(tmp_path: Path, examples: Path) -> None:
    res = invoke("--dataset", str(QUESTIONS), "--corpus", str(examples), "--limit", "2", "--method", "bm25", "--json")
    assert res.exit_code == 0, res.stderr  # type: ignore[attr-defined]
    data = json.loads(res.stdout)  # type: ignore[attr-defined]
    assert set(data) == {"dataset", "queries", "methods", "tests"}
    assert set(data["methods"]) == {"bm25"} and data["tests"] == []


def test_second_run_resumes_from_the_cache(tmp_path: Path, examples: Path) -> None:
    queries = load_dataset(QUESTIONS, limit=4)
    ctx = EvidentContext(corpus=[str(examples)])
    first = evaluate(queries, ctx, ["evident", "bm25", "pilot"], tmp_path, progress=False)
    assert first.computed == {"retrieval": 4, "evident": 4, "bm25": 4, "pilot": 0}
    again = evaluate(queries, ctx, ["evident", "bm25", "pilot"], tmp_path, progress=False)
    assert again.computed == {"retrieval": 0, "evident": 0, "bm25": 0, "pilot": 0}
    assert [r.record for r in again.rows["evident"]] == [r.record for r in first.rows["evident"]]
    assert again.skipped == {"pilot": first.skipped["pilot"]}
    # A changed alignment setting redoes EvidenT only: retrieval and bm25 do not depend on it.
    stricter = evaluate(queries, EvidentContext(corpus=[str(examples)], threshold=0.8), ["evident", "bm25"],
                        tmp_path, progress=False)
    assert stricter.computed == {"retrieval": 0, "evident": 4, "bm25": 0}
    # Questions run in parallel threads keep their order and give the same answers.
    parallel = evaluate(queries, ctx, ["evident", "bm25"], tmp_path / "parallel", progress=False, jobs=3)
    assert parallel.computed == {"retrieval": 4, "evident": 4, "bm25": 4}
    for method in ("evident", "bm25"):
        assert [(r.query.id, r.record.answer, r.record.facts) for r in parallel.rows[method]] == [
            (r.query.id, r.record.answer, r.record.facts) for r in first.rows[method]]


def test_bad_dataset_line_names_file_and_line(tmp_path: Path, examples: Path) -> None:
    bad = tmp_path / "q.jsonl"
    bad.write_text('{"id": "a", "query": "How long?", "gold_urls": []}\n\n{"id": "b", "query": \n', encoding="utf-8")
    res = invoke("--dataset", str(bad), "--corpus", str(examples))
    assert res.exit_code == 2
    assert f"{bad}:3: invalid JSON" in res.stderr  # type: ignore[attr-defined]
    bad.write_text('{"id": "a", "query": "How long?"}\n{"id": "b", "gold_urls": "x"}\n', encoding="utf-8")
    res = invoke("--dataset", str(bad), "--corpus", str(examples))
    assert res.exit_code == 2 and f"{bad}:2: field query" in res.stderr  # type: ignore[attr-defined]
    bad.write_text('{"id": 7, "query": "How long?"}\n{"id": "7", "query": "Again?"}\n', encoding="utf-8")
    res = invoke("--dataset", str(bad), "--corpus", str(examples))
    assert res.exit_code == 2 and f"{bad}:2: id '7' repeats line 1" in res.stderr  # type: ignore[attr-defined]
    assert "Traceback" not in res.stderr  # type: ignore[attr-defined]


def test_usage_errors_exit_2(tmp_path: Path, examples: Path) -> None:
    res = invoke("--dataset", str(QUESTIONS), "--corpus", str(examples), "--method", "magic")
    assert res.exit_code == 2 and "unknown method 'magic'" in res.stderr  # type: ignore[attr-defined]
    res = invoke("--dataset", str(tmp_path / "missing.jsonl"), "--corpus", str(examples))
    assert res.exit_code == 2 and "missing.jsonl: no such file" in res.stderr  # type: ignore[attr-defined]


def test_documents_from_a_config_file(tmp_path: Path, examples: Path) -> None:
    config = tmp_path / "evident.toml"
    config.write_text(f'corpus = ["{examples}"]\n[retrieval]\ntop_n = 3\n', encoding="utf-8")
    res = invoke("--dataset", str(QUESTIONS), "--config", str(config), "--limit", "3", "--method", "bm25", "--json")
    assert res.exit_code == 0, res.stderr  # type: ignore[attr-defined]
    data = json.loads(res.stdout)  # type: ignore[attr-defined]
    assert data["methods"]["bm25"]["groundedness"]["n"] >= 1
    res = invoke("--dataset", str(QUESTIONS), "--config", str(tmp_path / "missing.toml"))
    assert res.exit_code == 2 and "config file not found" in res.stderr  # type: ignore[attr-defined]


@pytest.mark.embeddings
def test_semantic_metrics_with_the_local_model_and_off(monkeypatch: pytest.MonkeyPatch, examples: Path) -> None:
    # Retrieval by words alone (weight 0: the index is not embedded); the metrics still use the model.
    monkeypatch.setenv("EVIDENT_SEMANTIC_WEIGHT", "0")
    args = ("--dataset", str(QUESTIONS), "--corpus", str(examples), "--limit", "2", "--method", "bm25")
    res = invoke(*args)
    assert res.exit_code == 0, res.stderr  # type: ignore[attr-defined]
    assert "sem_max (SemMax)" in res.stdout and "sem_recall (SemRecall)" in res.stdout  # type: ignore[attr-defined]
    assert "semantic metrics: on (local:all-MiniLM-L6-v2" in res.stdout  # type: ignore[attr-defined]
    data = json.loads(invoke(*args, "--json").stdout)  # type: ignore[attr-defined]
    sem_max, sem_recall = data["methods"]["bm25"]["sem_max"], data["methods"]["bm25"]["sem_recall"]
    assert sem_max["n"] == sem_recall["n"] == 2 and 0.0 < sem_recall["value"] <= sem_max["value"] <= 1.0
    monkeypatch.setenv("EVIDENT_EMBEDDINGS", "none")
    res = invoke(*args)
    assert res.exit_code == 0 and "sem_max" not in res.stdout  # type: ignore[attr-defined]
    assert 'semantic metrics: off (words only: embeddings = "none"' in res.stdout  # type: ignore[attr-defined]
