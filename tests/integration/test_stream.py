"""Streaming: node progress and the verified answer from `graph.stream`, and `evident ask --stream`.

The model's draft is never streamed as the answer: `verify` may remove its sentences (here, UNSUPPORTED)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessageChunk

from evident.context import EvidentContext
from evident.graph import build_graph
from tests.support.llm import (
    BOOKING,
    CORPUS,
    EXPENSES,
    TRAVEL,
    llm_context,
    passages_reply,
    retriever,
    server,
)
from tests.support.openai_server import OpenAIServer, Reply

__all__ = ["server"]

UNSUPPORTED = "Directors can always fly first class."
DRAFT = f"{BOOKING} [{TRAVEL}]\n{UNSUPPORTED} [{TRAVEL}]"
LLM_PATH = ["rewrite", "retrieve", "extract_batch", "extract", "align", "generate", "verify", "postprocess"]
OFFLINE_PATH = ["rewrite", "retrieve", "extract", "align", "generate", "verify", "postprocess"]
Q = "How early must flights be booked?"


def script(server: OpenAIServer) -> None:
    server.script(extract=[passages_reply((TRAVEL, BOOKING))], generate=[Reply(content=DRAFT, chunk_chars=6)])


def events(chunks: Any) -> list[tuple[str, Any]]:
    """(kind, payload): ("update", node), ("message", (node, text)) in the order they came."""
    out: list[tuple[str, Any]] = []
    for mode, item in chunks:
        if mode == "updates":
            out.extend(("update", node) for node in item)
        elif mode == "messages":
            message, meta = item
            out.append(("message", (meta["langgraph_node"], message)))
    return out


def check_llm_events(seen: list[tuple[str, Any]]) -> None:
    updates = [p for k, p in seen if k == "update"]
    assert updates == LLM_PATH
    # One message: the verified answer, whole, as `postprocess` adds it to `messages`; no token of the
    # extraction, rewrite or generation calls (all tagged `nostream`), so nothing `verify` removed.
    ((node, answer),) = [p for k, p in seen if k == "message"]
    assert node == "postprocess" and not isinstance(answer, AIMessageChunk)
    assert answer.additional_kwargs["status"] == "answered"
    assert BOOKING in answer.content and UNSUPPORTED not in answer.content
    assert seen.index(("update", "verify")) < seen.index(("message", (node, answer)))


def test_updates_and_tokens_stream_in_llm_mode(server: OpenAIServer) -> None:
    script(server)
    g = build_graph(retriever=retriever(TRAVEL))
    check_llm_events(events(g.stream({"query": Q}, context=llm_context(server), stream_mode=["updates", "messages"])))


def test_async_stream_is_the_same(server: OpenAIServer) -> None:
    script(server)
    g = build_graph(retriever=retriever(TRAVEL))

    async def collect() -> list[tuple[str, Any]]:
        return [c async for c in g.astream({"query": Q}, context=llm_context(server),
                                           stream_mode=["updates", "messages"])]

    check_llm_events(events(asyncio.run(collect())))


def test_offline_mode_streams_updates_and_the_answer_comes_with_postprocess() -> None:
    g = build_graph(retriever=retriever(TRAVEL))
    chunks = list(g.stream({"query": Q}, context=EvidentContext(), stream_mode=["updates", "messages"]))
    # No model, no tokens: the one message is the verified answer, whole, as it joins `messages`.
    (answer,) = [item for m, item in chunks if m == "messages"]
    updates = [item for m, item in chunks if m == "updates"]
    assert [node for item in updates for node in item] == OFFLINE_PATH
    post = updates[-1]["postprocess"]
    assert answer[1]["langgraph_node"] == "postprocess" and answer[0].content == post["answer"]
    assert post["status"] == "answered" and BOOKING in post["answer"] and post["citations"]


# -- evident ask --stream ---------------------------------------------------------------------------


def corpus(tmp_path: Path) -> Path:
    path = tmp_path / "corpus.jsonl"
    with path.open("w", encoding="utf-8") as f:
        for url in (TRAVEL, EXPENSES):
            title, kind, text = CORPUS[url]
            f.write(json.dumps({"url": url, "title": title, "text": text, "metadata": {"source_type": kind}}) + "\n")
    return path


def ask(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "evident.cli", "ask", *args], capture_output=True, text=True,
                          check=False, timeout=120, env={**os.environ, **(env or {})}, stdin=subprocess.DEVNULL)


def model_env(server: OpenAIServer) -> dict[str, str]:
    return {"EVIDENT_MODEL": "test-model", "OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": "test-key"}


def test_ask_stream_offline_prints_steps_on_stderr_and_the_answer_on_stdout(tmp_path: Path) -> None:
    proc = ask(Q, "--corpus", str(corpus(tmp_path)), "--stream")
    assert proc.returncode == 0, proc.stderr
    steps = [line for line in proc.stderr.splitlines() if line.startswith("· ")]
    assert [s.split(":")[0][2:] for s in steps] == OFFLINE_PATH
    assert steps[3].startswith("· align: ") and " kept" in steps[3]
    assert BOOKING in proc.stdout and "Citations" in proc.stdout
    assert "· " not in proc.stdout and BOOKING not in proc.stderr
    assert "Status: answered" in proc.stderr


def test_ask_stream_prints_only_the_verified_answer(server: OpenAIServer, tmp_path: Path) -> None:
    script(server)
    proc = ask(Q, "--corpus", str(corpus(tmp_path)), "--stream", env=model_env(server))
    assert proc.returncode == 0, proc.stderr
    assert len(server.requests) == 2  # extraction, then generation: the draft was written
    assert "· verify: 1 sentence kept, 1 removed" in proc.stderr
    assert BOOKING in proc.stdout and "Citations" in proc.stdout
    assert UNSUPPORTED not in proc.stdout and UNSUPPORTED not in proc.stderr  # the draft's sentence, never shown


def test_ask_stream_json_events(server: OpenAIServer, tmp_path: Path) -> None:
    script(server)
    proc = ask(Q, "--corpus", str(corpus(tmp_path)), "--stream", "--json", env=model_env(server))
    assert proc.returncode == 0, proc.stderr
    lines = [json.loads(line) for line in proc.stdout.splitlines()]
    steps = [e["node"] for e in lines if e["event"] == "step"]
    assert steps == LLM_PATH
    result = lines[-1]
    assert result["event"] == "result" and result["status"] == "answered"
    (answer,) = [e["text"] for e in lines if e["event"] == "answer"]
    assert answer == result["answer"] and UNSUPPORTED not in answer
    assert not [e for e in lines if e["event"] not in ("step", "answer", "result")]
    assert result["citations"][0]["quote"] == BOOKING
    align = next(e for e in lines if e.get("node") == "align")["summary"]
    assert align["kept"] == 1 and align["decisions"][0]["action"] == "kept"


def test_ask_stream_rejects_batch(tmp_path: Path) -> None:
    batch = tmp_path / "q.jsonl"
    batch.write_text(json.dumps({"id": 1, "query": Q}) + "\n", encoding="utf-8")
    proc = ask("--batch", str(batch), "--stream", "--corpus", str(corpus(tmp_path)))
    assert proc.returncode == 2 and "--stream" in proc.stderr and "Traceback" not in proc.stderr
