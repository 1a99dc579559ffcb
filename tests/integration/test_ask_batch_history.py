"""`evident ask --batch` with follow-up questions: a line's `history` makes it a conversation's next message."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from evident.cli import app
from evident.context import EvidentContext
from evident.graph import graph

ROOT = Path(__file__).resolve().parents[2]
FOLLOWUPS = ROOT / "examples" / "followups.jsonl"


def _ask_batch(batch: Path, examples: Path) -> tuple[int, list[dict[str, object]], str]:
    res = CliRunner().invoke(app, ["ask", "--batch", str(batch), "--corpus", str(examples), "--json"],
                             catch_exceptions=False)
    return res.exit_code, [json.loads(line) for line in res.stdout.splitlines()], res.stderr


# The batch reads its settings from the environment, the graph below is given a context: with the
# environment's embeddings switch removed, both rank by meaning as a user's install does.
@pytest.mark.embeddings
def test_a_line_with_history_is_answered_as_the_conversation_would_be(tmp_path: Path, examples: Path) -> None:
    lines = FOLLOWUPS.read_text(encoding="utf-8").splitlines()[:2]
    batch = tmp_path / "followups.jsonl"
    batch.write_text("\n".join(lines) + "\n", encoding="utf-8")
    code, out, stderr = _ask_batch(batch, examples)
    assert code == 0, stderr
    assert [o["id"] for o in out] == ["f01", "f02"] and out[0]["query"] == "And in London?"
    assert out[0]["status"] == "answered" and "300 GBP" in str(out[0]["answer"])

    ctx = EvidentContext(corpus=[str(examples)])
    for line, got in zip(lines, out, strict=True):
        item = json.loads(line)
        conversation = {"messages": [*item["history"], {"role": "user", "content": item["query"]}]}
        state = graph.invoke(conversation, context=ctx)
        assert got["answer"] == state["answer"]
        # The line shows the standalone question the graph answered.
        assert got["standalone_query"] == state["standalone_query"] != item["query"]
        assert got["standalone_query"].startswith(item["query"] + " (")
        # The same question without its history is asked alone, and answered otherwise.
        assert got["answer"] != graph.invoke({"query": item["query"]}, context=ctx)["answer"]


def test_a_bad_history_is_that_lines_error(tmp_path: Path, examples: Path) -> None:
    batch = tmp_path / "q.jsonl"
    batch.write_text(
        '{"id": "a", "query": "And in London?", "history": [{"role": "system", "content": "x"}]}\n'
        '{"id": "b", "query": "How many days do I have to submit an expense report?", "history": []}\n',
        encoding="utf-8",
    )
    code, out, stderr = _ask_batch(batch, examples)
    assert code == 1  # the batch ran to the end, and says one query failed
    assert out[0]["id"] == "a" and out[0]["status"] == "error" and out[0]["line"] == 1
    assert f"{batch}:1: " in str(out[0]["error"]) and '"history" must be a list' in str(out[0]["error"])
    assert out[1]["id"] == "b" and out[1]["status"] == "answered"
    assert "Traceback" not in stderr
