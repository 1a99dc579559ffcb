"""`evident index` and `evident ask` as a user runs them: real subprocesses, real files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.offline import HANDBOOK, WEAK_QUESTION

Q = "How many days do I have to submit an expense report after a trip?"


def run(*args: str, env: dict[str, str] | None = None, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "evident.cli", *args], capture_output=True, text=True, timeout=timeout,
        env=full_env, stdin=subprocess.DEVNULL,
    )


def no_traceback(proc: subprocess.CompletedProcess[str]) -> None:
    assert "Traceback" not in proc.stderr and "Traceback" not in proc.stdout, proc.stderr


@pytest.fixture(scope="module")
def index_file(tmp_path_factory: pytest.TempPathFactory, examples: Path) -> Path:
    path = tmp_path_factory.mktemp("cli") / "examples.sqlite3"
    proc = run("index", str(examples), "--index", str(path), "--json")
    assert proc.returncode == 0, proc.stderr
    stats = json.loads(proc.stdout)
    assert stats["documents"] >= 30 and stats["added"] == stats["documents"]
    again = json.loads(run("index", str(examples), "--index", str(path), "--json").stdout)
    assert again["unchanged"] == stats["documents"] and again["added"] == again["updated"] == 0
    return path


def test_ask_json_shape(index_file: Path, examples: Path) -> None:
    proc = run("ask", Q, "--corpus", str(examples), "--index", str(index_file), "--json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert set(out) >= {"query", "status", "evidence", "answer", "citations", "retrieved", "passages", "alignment",
                        "source_errors", "timings_ms"}
    assert out["status"] == "answered" and out["evidence"] == "clear"
    retrieved = {r["url"] for r in out["retrieved"]}
    assert all(set(r) >= {"url", "title", "source"} for r in out["retrieved"])
    for c in out["citations"]:
        assert set(c) == {"sentence", "url", "passage_ids", "spans", "quote", "heading_path", "span_base",
                          "content_hash", "revision"}
        assert c["content_hash"] and c["revision"].startswith("mtime_ns=")  # docs/revisions.md
        assert c["span_base"] == "document"  # the embedded index stores whole documents
        assert c["url"] in retrieved and c["spans"] and c["passage_ids"]
    # The quote that answers, under the page's title and the section it is in.
    answer = next(c for c in out["citations"] if "within 30 days of the trip" in c["quote"])
    assert answer["heading_path"] == ["Travel and Expense Policy", "9. Submitting expenses"]


def test_ask_human_output_shows_spans(index_file: Path, examples: Path) -> None:
    proc = run("ask", Q, "--corpus", str(examples), "--index", str(index_file))
    assert proc.returncode == 0, proc.stderr
    assert "Citations" in proc.stdout and "30 days" in proc.stdout
    assert " › " in proc.stdout  # a heading path above a quote
    assert "[" in proc.stdout and ":" in proc.stdout


def test_batch_keeps_order_and_survives_bad_lines(tmp_path: Path, index_file: Path, examples: Path) -> None:
    batch = tmp_path / "q.jsonl"
    batch.write_text(
        "\n".join([
            json.dumps({"id": "a", "query": Q}),
            "{not json",
            json.dumps({"id": "c", "query": ""}),
            json.dumps({"id": "d", "query": "zygomorphic quasar lutefisk"}),
            json.dumps({"id": "e"}),
        ]) + "\n",
        encoding="utf-8",
    )
    proc = run("ask", "--batch", str(batch), "--corpus", str(examples), "--index", str(index_file), "--json")
    no_traceback(proc)
    lines = [json.loads(x) for x in proc.stdout.splitlines()]
    assert [x.get("id") for x in lines] == ["a", None, "c", "d", "e"]
    assert [x["status"] for x in lines] == ["answered", "error", "error", "insufficient", "error"]
    assert [x["evidence"] for x in lines] == ["clear", "none", "none", "none", "none"]
    assert f"{batch}:2: invalid JSON" in lines[1]["error"]
    assert 'missing string field "query"' in lines[4]["error"]
    assert proc.returncode == 1  # the batch ran to the end, and says some queries failed


def test_a_hedged_answer_is_marked_in_json_plain_and_batch_output(tmp_path: Path) -> None:
    # The page says when unused days expire, not whether they are paid out: the answer hedges, and says so
    # to a program (`evidence`) as well as in its words.
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "handbook.md").write_text(HANDBOOK, encoding="utf-8")
    common = ["--corpus", str(tmp_path / "docs"), "--index", str(tmp_path / "index.sqlite3")]
    env = {"EVIDENT_EMBEDDINGS": "none"}
    question = WEAK_QUESTION
    out = json.loads(run("ask", question, *common, "--json", env=env).stdout)
    assert (out["status"], out["evidence"]) == ("answered", "weak")
    assert out["answer"].startswith("The documentation does not explicitly state")
    plain = run("ask", question, *common, env=env)
    assert plain.returncode == 0 and "Status: answered (weak evidence" in plain.stdout, plain.stderr
    batch = tmp_path / "q.jsonl"
    batch.write_text(json.dumps({"id": "w", "query": question}) + "\n", encoding="utf-8")
    lines = run("ask", "--batch", str(batch), *common, env={**env, "COLUMNS": "400"})  # one line, unwrapped
    assert "w answered (weak evidence): The documentation does not explicitly state" in lines.stderr


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["ask", ""], "the query is empty"),
        (["ask", "x" * 100_000], "too long"),
        (["ask", "hello", "--corpus", "/definitely/not/here"], "does not exist"),
        (["ask"], "missing QUESTION"),
        (["ask", "--batch", "/no/such.jsonl"], "no such file"),
        (["index", "/definitely/not/here"], "no such file or directory"),
        (["verify", "--docs", "/no/docs.jsonl", "--passages", "/no/p.jsonl"], "/no/docs.jsonl"),
    ],
)
def test_bad_input_one_line_exit_2(args: list[str], needle: str, examples: Path) -> None:
    if args[0] == "ask" and "--corpus" not in args:
        args = [*args, "--corpus", str(examples)]
    proc = run(*args)
    no_traceback(proc)
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert needle in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_index_skips_binary_and_reports_empty_corpus(tmp_path: Path) -> None:
    corpus = tmp_path / "c"
    corpus.mkdir()
    (corpus / "blob.txt").write_bytes(b"\x00\x01\x02binary\x00")
    proc = run("index", str(corpus), "--index", str(tmp_path / "i.sqlite3"))
    no_traceback(proc)
    assert proc.returncode == 2 and "no documents" in proc.stderr
    assert "blob.txt" in proc.stderr  # the skip was reported, with the file named
    (corpus / "ok.md").write_text("# Parking\n\nVisitors park on level 2 of the garage.\n", encoding="utf-8")
    proc = run("ask", "Where do visitors park?", "--corpus", str(corpus), "--json")
    no_traceback(proc)
    out = json.loads(proc.stdout)
    assert out["status"] == "answered" and "level 2" in out["answer"]


def test_invalid_jsonl_corpus_names_the_line(tmp_path: Path) -> None:
    corpus = tmp_path / "c.jsonl"
    corpus.write_text(
        json.dumps({"url": "https://x.example/a", "title": "A", "text": "Alpha text here."}) + "\n{oops\n",
        encoding="utf-8",
    )
    proc = run("index", str(corpus), "--index", str(tmp_path / "i.sqlite3"))
    no_traceback(proc)
    assert proc.returncode == 2 and f"{corpus}:2" in proc.stderr
