"""The LLM path against servers that differ from OpenAI's API (issue 17): a request shape the server
rejects with HTTP 500, output caps a server reads only as `max_tokens`, a one-slot server; and, with a
model without HTTP, a model that forgets citations or copies the prompt's example, and passages that are
only headings."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from langchain_core.documents import Document

from evident.alignment.aligner import evidence_problem, is_heading_only
from evident.context import EvidentContext
from evident.graph import build_graph
from evident.graph.tracing import summarize
from evident.llm.batching import approx_counter, extraction_budget
from evident.llm.models import reply_cap
from evident.prompts.extraction import EXTRACTION_SYSTEM, EXTRACTION_USER
from tests.support.llm import (
    BOOKING,
    BOOKING_QUERY,
    BUSINESS,
    EXPENSES,
    TRAVEL,
    FakeModel,
    ListRetriever,
    check_grounded,
    echo_responder,
    fake_context,
    llm_context,
    passages_json,
    passages_reply,
    retriever,
    scripted,
    server,
)
from tests.support.openai_server import ChatRequest, OpenAIServer, Reply

__all__ = ["server"]

QUERY = BOOKING_QUERY


def ask(server: OpenAIServer, query: str = QUERY, **ctx: Any) -> dict[str, Any]:
    g = build_graph(retriever=retriever(TRAVEL, EXPENSES))
    return g.invoke({"query": query}, context=llm_context(server, **ctx))


def ask_model(model: FakeModel, query: str = QUERY) -> dict[str, Any]:
    return build_graph(retriever=retriever(TRAVEL, EXPENSES), chat_model=model).invoke(
        {"query": query}, context=fake_context())


def shapes(server: OpenAIServer) -> list[str]:
    return [(r.response_format or {}).get("type", "text") for r in server.of_kind("extract")]


def test_a_json_schema_500_moves_to_json_mode_at_once_and_the_rung_is_remembered() -> None:
    with OpenAIServer(reject_json_schema=True) as server:
        server.script(extract=[passages_reply((TRAVEL, BOOKING))], generate=[Reply(content=f"{BOOKING} [{TRAVEL}]")])
        first = ask(server, model_max_retries=2)
        # One json_schema request (no retries of the 500), then JSON mode, which works.
        assert shapes(server) == ["json_schema", "json_object"]
        assert first["status"] == "answered" and not first["model_errors"]
        (note,) = first["extraction_notes"]
        assert "json_schema rejected by the server" in note and "read with json_mode" in note
        assert "Input should be 'text' or 'json_object'" in note and "File" not in note and "POST" not in note
        check_grounded(first)

        g = build_graph(retriever=retriever(TRAVEL, EXPENSES))
        batches = [b for update in g.stream({"query": QUERY}, context=llm_context(server), stream_mode="updates")
                   for b in (update.get("extract_batch") or {}).get("extractions") or []]
        assert [b["rung"] for b in batches] == ["json_mode"]
        # ... and in the trace metadata of the step.
        assert summarize("extract_batch", {"extractions": batches})["rung"] == "json_mode"
        assert shapes(server)[2:] == ["json_object"]  # the next query starts on the rung that worked

        second = ask(server)
        assert shapes(server)[2:] == ["json_object", "json_object"]
        assert second["extraction_notes"] == ["read with json_mode"]


def test_a_server_traceback_is_trimmed_to_its_message() -> None:
    with OpenAIServer(reject_json_schema=True) as server:
        server.script(extract=[Reply(status=500, error="Traceback (most recent call last):\n  File \"x.py\", line 1"
                                     "\n    boom()\nRuntimeError: the GPU fell over")],
                      generate=[Reply(content=f"{BOOKING} [{TRAVEL}]")])
        out = ask(server, model_max_retries=0)
        (error, *_) = out["model_errors"]
        assert "RuntimeError: the GPU fell over" in error["message"] and "Traceback" not in error["message"]
        assert "File" not in error["message"]


def test_the_output_cap_is_sent_as_max_tokens_too() -> None:
    with OpenAIServer(cap_field="max_tokens") as server:
        server.script(extract=[passages_reply((TRAVEL, BOOKING))],
                      generate=[Reply(content=f"{BOOKING} [{TRAVEL}]\n" * 20)])
        out = ask(server)
        extract, generate = server.of_kind("extract")[0].body, server.of_kind("generate")[0].body
        assert extract["max_tokens"] == extract["max_completion_tokens"] == 2048
        assert generate["max_tokens"] == generate["max_completion_tokens"] == 1024
        assert out["status"] == "answered"

        capped = ask(server, model_max_tokens=64)
        assert server.of_kind("generate")[-1].body["max_tokens"] == 64
        # The server honoured the cap: the draft stopped at 64 tokens (4 characters each here), two
        # sentences and a fragment, which is removed rather than re-cited.
        assert capped["answer"] == f"{BOOKING} [{TRAVEL}]\n{BOOKING} [{TRAVEL}]"
        assert capped["removed_sentences"] == ["Employees"]


def test_the_extraction_budget_fits_the_context_window() -> None:
    count = approx_counter(4.0)
    assert extraction_budget(EvidentContext(), count) == EvidentContext().context_budget_tokens
    for window in (2048, 4096, 8192, 32768):
        ctx = EvidentContext(context_window=window)
        budget = extraction_budget(ctx, count)
        instructions = count(EXTRACTION_SYSTEM + EXTRACTION_USER)
        assert budget + instructions + reply_cap(ctx, "extract") <= window
        assert budget <= ctx.context_budget_tokens


def handbook(topic: str, rules: int) -> str:
    return f"# {topic.title()} handbook\n\n" + "\n\n".join(
        f"Rule {i} of the {topic} handbook says that item {i} must be reviewed by team {i % 7} every quarter."
        for i in range(1, rules + 1)
    )


def test_a_single_slot_server_finishes_a_long_document_query_without_timeouts() -> None:
    docs = [Document(page_content=handbook(t, 30), metadata={"url": f"https://wiki.example/{t}"})
            for t in ("security", "billing", "onboarding")]
    # Each request takes 0.3 s on the server; all batches at once would queue there for longer than
    # the 1 s per-call timeout. The client queues them instead: the server reports one slot on /props.
    with OpenAIServer(echo_responder(tokens={"ttft_s": 0.3}), slots=1) as server:
        g = build_graph(retriever=ListRetriever(docs=docs))
        out = g.invoke({"query": "Which team reviews the items?"},
                       context=llm_context(server, context_budget_tokens=400, token_counter="approx",
                                           model_timeout_s=1.0, model_max_retries=0))
        batches = len(server.of_kind("extract"))
        assert batches >= 5
        assert server.max_in_flight == 1
        assert not out["model_errors"], out["model_errors"]
        assert out["status"] == "answered" and len(out["extraction_notes"]) == batches
        check_grounded(out)


def test_an_uncited_model_answer_is_salvaged_sentence_by_sentence() -> None:
    out = ask_model(scripted(passages_json((TRAVEL, BOOKING), (TRAVEL, BUSINESS)),
                             f"{BOOKING} Flights to the moon are always business class.\n{BUSINESS}"))
    assert out["generated_by"] == "model"
    assert out["answer"] == f"{BOOKING} [{TRAVEL}]\n{BUSINESS} [{TRAVEL}]"
    assert out["removed_sentences"] == ["Flights to the moon are always business class."]
    (note,) = out["model_errors"]
    assert "3 sentence(s)" in note["message"] and "2 re-cited" in note["message"] and "1 removed" in note["message"]
    check_grounded(out)


def test_an_uncited_sentence_is_not_cut_at_an_abbreviation() -> None:
    # "U.S." and "e.g." end no sentence: cut there, "Trips to the U.S." went as a fragment and the rest
    # of the sentence was re-cited alone, an answer saying less than the model wrote.
    page = "https://wiki.example/abroad"
    esta = "Trips to the U.S. need an approved ESTA at least 72 hours before departure."
    fares = "Book refundable fares, e.g. flexible economy, when your dates may still change."
    g = build_graph(retriever=ListRetriever(docs=[
        Document(page_content=f"# Flights abroad\n\n{esta} {fares}\n", metadata={"url": page})]),
        chat_model=scripted(passages_json((page, esta), (page, fares)), f"{esta} {fares}"))
    out = g.invoke({"query": "What do I need before a trip to the U.S.?"}, context=fake_context())
    assert out["answer"] == f"{esta} [{page}] {fares} [{page}]"
    assert out["removed_sentences"] == []
    assert "2 sentence(s)" in out["model_errors"][0]["message"] and "2 re-cited" in out["model_errors"][0]["message"]


def test_a_restated_question_and_repeats_are_not_salvaged() -> None:
    question = "How early must employees book flights through the TravelDesk portal?"
    model = scripted(passages_json((TRAVEL, BOOKING)), f"{question} {BOOKING}\n{BOOKING}\n{question}\n"
                     "Employees must book flights through the TravelDesk portal")
    out = ask_model(model, query=question)
    assert out["answer"] == f"{BOOKING} [{TRAVEL}]"
    # The last line restates the question (cut where a weak model broke its line): no claim either.
    assert out["removed_sentences"] == [question, BOOKING, question,
                                        "Employees must book flights through the TravelDesk portal"]
    assert "5 sentence(s)" in out["model_errors"][0]["message"] and "1 re-cited" in out["model_errors"][0]["message"]


def test_passages_copied_from_the_prompts_example_are_dropped() -> None:
    example = {"passage_id": "1", "url": "[example-doc]", "content": "<a passage copied exactly from that document>"}
    real = {"passage_id": "2", "url": TRAVEL, "content": BOOKING}
    model = scripted(json.dumps({"collected_passages": [example, real]}), f"{BOOKING} [{TRAVEL}]")
    out = ask_model(model)
    assert [p["url"] for p in out["passages"]] == [TRAVEL]
    assert "dropped 1 passage(s) copied from the prompt's example" in out["extraction_notes"][0]
    # The example itself cannot be mistaken for document text: placeholders, not prose.
    assert "[example-doc]" in model.of_kind("extract")[0]
    assert "docs.example.com" not in model.of_kind("extract")[0]


def test_a_heading_or_a_fragment_is_not_evidence() -> None:
    out = ask_model(scripted(passages_json((TRAVEL, "# Travel policy"), ("https://invented.example/x", "Overview"),
                                           (TRAVEL, BOOKING)), f"{BOOKING} [{TRAVEL}]"))
    reasons = {d["content"]: (d["action"], d["reason"]) for d in out["alignment"]}
    assert reasons["# Travel policy"] == ("dropped", "the passage is only a heading")
    assert reasons["Overview"][0] == "dropped"
    assert [d["content"] for d in out["verified"]] == [BOOKING]


def test_the_evidence_rule() -> None:
    assert is_heading_only("# Travel policy\n\n## Booking") and not is_heading_only(f"# Travel\n{BOOKING}")
    assert evidence_problem("Overview", 3) is not None
    assert evidence_problem("**Booking rules:**", 1) == "the passage is only a heading"
    assert evidence_problem("Receipts must be attached.", 3) is None
    assert evidence_problem("Receipts attached.", 3) is not None
    assert evidence_problem("Receipts attached.", 2) is None


def test_only_headings_verified_means_no_generation_call() -> None:
    model = scripted(passages_json((TRAVEL, "# Travel policy")), "unused")
    out = ask_model(model)
    assert not out["verified"] and not model.of_kind("generate")
    assert out["status"] == "insufficient"


def test_ask_stream_never_prints_the_draft_the_composer_replaced(server: OpenAIServer, examples: Path,
                                                                 tmp_path: Path) -> None:
    echo = echo_responder()

    def respond(request: ChatRequest) -> Reply:
        if request.kind == "extract":
            return echo(request)
        return Reply(content="Penguins cannot fly, so they walk to the office.")  # nothing supports it

    server.respond_with(respond)
    env = {**os.environ, "EVIDENT_MODEL": "cli-model", "OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": "k",
           "EVIDENT_INDEX_DIR": str(tmp_path)}
    env.pop("EVIDENT_CONFIG", None)
    proc = subprocess.run(
        [sys.executable, "-m", "evident.cli", "ask", "How many days do I have to submit an expense report?",
         "--corpus", str(examples), "--stream"],
        capture_output=True, text=True, env=env, timeout=120, stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0, proc.stderr
    assert "Penguins" not in proc.stdout and "Penguins" not in proc.stderr  # the draft is never shown
    assert "no sentence of the model's answer is supported" in proc.stderr  # and why
