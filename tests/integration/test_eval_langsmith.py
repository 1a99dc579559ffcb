"""`evident eval` as LangSmith experiments, against the stand-in LangSmith API on 127.0.0.1."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from evident.cli import app
from tests.support.langsmith_server import LangSmithServer

ROOT = Path(__file__).resolve().parents[2]
QUESTIONS = ROOT / "examples" / "questions.jsonl"


# langsmith's own client warns about its deprecated feedback arguments; nothing of ours.
@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_each_method_is_an_experiment_scored_by_the_harness(
    tmp_path: Path, examples: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with LangSmithServer() as ls:
        monkeypatch.setenv("LANGSMITH_ENDPOINT", ls.url)
        monkeypatch.setenv("LANGSMITH_API_KEY", "test-key")
        args = ["eval", "--dataset", str(QUESTIONS), "--corpus", str(examples), "--limit", "3",
                "--method", "evident", "--method", "bm25", "--json", "--out", str(tmp_path / "out")]
        res = CliRunner().invoke(app, args, catch_exceptions=False)
        assert res.exit_code == 0, res.stderr
        data = json.loads(res.stdout)  # LangSmith's console chatter stayed off stdout

        [dataset] = ls.datasets.values()
        assert dataset["name"].startswith("evident-eval questions.jsonl ")
        examples_sent = [e for e in ls.examples.values() if e["dataset_id"] == dataset["id"]]
        assert sorted(e["inputs"]["id"] for e in examples_sent) == ["q01", "q02", "q03"]
        assert all(e["outputs"]["gold_urls"] for e in examples_sent)

        names = sorted(s["name"] for s in ls.sessions.values() if s.get("reference_dataset_id") == dataset["id"])
        assert len(names) == 2
        assert names[0].startswith("evident-eval-bm25") and names[1].startswith("evident-eval-evident")
        for name, method in zip(names, ("bm25", "evident"), strict=True):
            feedback = ls.experiment_feedback(name)
            per_key: dict[str, list[float]] = {}
            summary: dict[str, float] = {}
            for f in feedback:
                if f.get("run_id"):
                    per_key.setdefault(f["key"], []).append(f["score"])
                else:  # the experiment-level scores
                    summary[f["key"]] = f["score"]
            assert len(per_key["hallucination"]) == 3 and len(per_key["groundedness"]) == 3
            # The per-question scores are the harness's: their mean is the reported rate.
            mean = sum(per_key["groundedness"]) / 3
            assert mean == pytest.approx(data["methods"][method]["groundedness"]["value"])
            assert summary["groundedness"] == pytest.approx(mean, abs=1e-4)  # LangSmith keeps 4 digits
            recall = data["methods"][method]["retrieval_recall_at_3"]["value"]
            assert summary["retrieval_recall_at_3"] == pytest.approx(recall, abs=1e-4)
        report = (tmp_path / "out" / "report.md").read_text(encoding="utf-8")
        assert "LangSmith experiments: evident-eval-evident" in report

        # The dataset is reused by the next run over the same questions.
        again = CliRunner().invoke(app, args, catch_exceptions=False)
        assert again.exit_code == 0, again.stderr
        assert len(ls.datasets) == 1 and len(ls.examples) == 3
        assert len([s for s in ls.sessions.values() if s.get("reference_dataset_id") == dataset["id"]]) == 4
