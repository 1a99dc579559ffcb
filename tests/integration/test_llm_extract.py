"""The LLM path end to end: what the model replies to the extraction and generation calls is scripted,
the whole graph runs, and the final answer and citations are checked (not only intermediate state).

What is about the wire (request shapes, the structured-output ladder, a reply cut off at the token limit)
runs the real ChatOpenAI client against the scripted OpenAI-compatible server; what alignment and
verification do with a reply runs with a model without HTTP (`FakeModel`).
"""

from __future__ import annotations

import json
from typing import Any

from evident.graph import build_graph
from evident.models import INSUFFICIENT_ANSWER
from tests.support.llm import (
    BOOKING,
    BUSINESS,
    EXPENSES,
    REMOTE,
    TRAVEL,
    FakeModel,
    check_grounded,
    fake_context,
    llm_context,
    passages_json,
    passages_reply,
    retriever,
    scripted,
    server,
)
from tests.support.openai_server import ChatRequest, OpenAIServer, Reply

__all__ = ["server"]  # the fixture

DEADLINE = "Expense reports must be submitted in Ledgerly within 30 days of the trip's end date."
REMOTE_DAYS = "Remote work is allowed up to three days per week."


def run(server: OpenAIServer, query: str, *urls: str, **ctx: Any) -> dict[str, Any]:
    g = build_graph(retriever=retriever(*urls))
    return g.invoke({"query": query}, context=llm_context(server, **ctx))


def ask(model: FakeModel, query: str, *urls: str, **ctx: Any) -> dict[str, Any]:
    g = build_graph(retriever=retriever(*urls), chat_model=model)
    return g.invoke({"query": query}, context=fake_context(**ctx))


def test_verbatim_passages_give_a_cited_answer_with_spans(server: OpenAIServer) -> None:
    server.script(
        extract=[passages_reply((TRAVEL, BOOKING), (TRAVEL, BUSINESS))],
        generate=[Reply(content=(
            f"You must book flights in the TravelDesk portal at least 14 days before departure. [{TRAVEL}]\n"
            f"Business class is allowed only on flights longer than 8 hours. [{TRAVEL}]"))],
    )
    out = run(server, "How early must flights be booked, and when is business class allowed?", TRAVEL, EXPENSES)
    assert out["status"] == "answered", out["model_errors"]
    assert out["mode"] == "llm" and out["model_errors"] == []
    assert "14 days" in out["answer"] and "8 hours" in out["answer"]
    assert [d["action"] for d in out["alignment"]] == ["kept", "kept"]
    check_grounded(out)
    quotes = " ".join(c["quote"] for c in out["citations"])
    assert "14 days before departure" in quotes and "longer than 8 hours" in quotes
    # The extraction request: structured output, temperature 0, documents with URL and source type.
    ex = server.of_kind("extract")[0]
    assert ex.response_format["type"] == "json_schema"
    assert ex.response_format["json_schema"]["schema"]["required"] == ["collected_passages"]
    assert ex.body["temperature"] == 0
    assert f"url: {TRAVEL}" in ex.text and "source_type: policy" in ex.text
    assert not server.of_kind("generate")[0].response_format


def test_paraphrased_tail_is_cut_and_its_claim_never_reaches_the_answer() -> None:
    drifting = BOOKING[:-1] + ", and directors may book first class on any flight at any time."
    model = scripted(
        passages_json((TRAVEL, drifting)),
        f"Employees must book flights through the TravelDesk portal at least 14 days before departure. [{TRAVEL}] "
        f"Directors may book first class on any flight at any time. [{TRAVEL}]",
    )
    out = ask(model, "How early must flights be booked?", TRAVEL)
    assert [d["action"] for d in out["alignment"]] == ["truncated"]
    assert "first class" not in out["alignment"][0]["quote"]
    assert out["status"] == "answered"
    assert "14 days before departure" in out["answer"]
    assert "first class" not in out["answer"] and "Directors" not in out["answer"]
    assert any("first class" in s for s in out["removed_sentences"])
    check_grounded(out)
    assert all("first class" not in c["quote"] for c in out["citations"])


def test_wrong_urls_are_relinked_and_repaired() -> None:
    # The model quotes the remote-work page but cites the travel page, in extraction and in the answer.
    model = scripted(passages_json((TRAVEL, REMOTE_DAYS), (TRAVEL, BOOKING)),
                     f"Remote work is allowed up to three days per week. [{TRAVEL}]")
    out = ask(model, "How many days of remote work are allowed?", TRAVEL, REMOTE)
    relinked = [d for d in out["alignment"] if d["action"] == "relinked"]
    assert len(relinked) == 1 and relinked[0]["original_url"] == TRAVEL and relinked[0]["url"] == REMOTE
    assert out["status"] == "answered"
    assert out["answer"] == f"Remote work is allowed up to three days per week. [{REMOTE}]"
    check_grounded(out)
    assert [c["url"] for c in out["citations"]] == [REMOTE]


def test_invented_urls_never_reach_the_answer() -> None:
    evil = "https://evil.example/travel"
    model = scripted(
        passages_json((evil, BOOKING), ("https://made-up.example/x", "Interns may never travel abroad.")),
        f"Flights must be booked through the TravelDesk portal at least 14 days before departure. [{evil}]\n"
        "Interns may never travel abroad. [https://made-up.example/x]",
    )
    out = ask(model, "How early must flights be booked?", TRAVEL, EXPENSES)
    assert sorted(d["action"] for d in out["alignment"]) == ["dropped", "relinked"]
    assert "evil.example" not in out["answer"] and "made-up" not in out["answer"]
    assert "Interns" not in out["answer"]
    assert "14 days" in out["answer"]
    check_grounded(out)
    assert {c["url"] for c in out["citations"]} == {TRAVEL}


def test_a_changed_number_is_removed() -> None:
    model = scripted(
        passages_json((EXPENSES, DEADLINE), (EXPENSES, "Reports above 5,000 EUR need the approval of a director.")),
        f"Expense reports must be submitted in Ledgerly within 45 days of the trip's end date. [{EXPENSES}]\n"
        f"Reports above 5,000 EUR need a director's approval. [{EXPENSES}]",
    )
    out = ask(model, "When are expense reports due and who approves large ones?", EXPENSES)
    assert out["status"] == "answered"
    assert "45" not in out["answer"]
    assert "5,000 EUR" in out["answer"]
    assert any("45 days" in s for s in out["removed_sentences"])
    check_grounded(out)


def test_an_answer_with_nothing_supported_falls_back_to_the_offline_composer() -> None:
    model = scripted(passages_json((EXPENSES, DEADLINE)),
                     f"Expense reports are due within 45 days of the trip. [{EXPENSES}]")
    out = ask(model, "How many days do I have to submit an expense report?", EXPENSES)
    assert out["status"] == "degraded"
    assert "45" not in out["answer"] and "30 days" in out["answer"]
    assert any(e["message"].startswith("verify:") for e in out["model_errors"])
    check_grounded(out)


def test_a_reply_failing_validation_falls_back_to_json_mode(server: OpenAIServer) -> None:
    server.script(
        extract=[Reply(content=json.dumps({"collected_passages": [{"passage_id": "1", "url": TRAVEL}]})),
                 passages_reply((TRAVEL, BOOKING))],
        generate=[Reply(content=f"{BOOKING} [{TRAVEL}]")],
    )
    out = run(server, "How early must flights be booked?", TRAVEL)
    kinds = [r.response_format["type"] for r in server.of_kind("extract")]
    assert kinds == ["json_schema", "json_object"]
    assert out["status"] == "answered" and out["model_errors"] == []
    assert out["answer"] == f"{BOOKING} [{TRAVEL}]"
    check_grounded(out)


def test_a_reply_in_another_shape_is_read_tolerantly() -> None:
    other = {"passages": [{"id": 7, "text": BOOKING, "source": TRAVEL}]}
    model = scripted("Here you go:\n```json\n" + json.dumps(other) + "\n```", f"{BOOKING} [{TRAVEL}]")
    out = ask(model, "How early must flights be booked?", TRAVEL)
    assert len(model.of_kind("extract")) == 1
    assert [d["action"] for d in out["alignment"]] == ["kept"]
    assert out["status"] == "answered"
    check_grounded(out)


def test_truncated_json_keeps_the_complete_passages(server: OpenAIServer) -> None:
    full = json.dumps({"collected_passages": [
        {"passage_id": "1", "url": TRAVEL, "content": BOOKING},
        {"passage_id": "2", "url": TRAVEL, "content": BUSINESS},
    ]})
    cut = full[: full.index("Business class is allowed") + 20]  # inside the second passage
    server.script(extract=[Reply(content=cut, finish_reason="length")],
                  generate=[Reply(content=f"{BOOKING} [{TRAVEL}]")])
    out = run(server, "How early must flights be booked?", TRAVEL)
    assert [p["content"] for p in out["passages"]] == [BOOKING]
    assert out["status"] == "answered" and out["model_errors"] == []
    check_grounded(out)


def test_truncated_json_without_a_length_finish_reason() -> None:
    first = json.dumps({"passage_id": "1", "url": TRAVEL, "content": BOOKING})
    cut = f'{{"collected_passages": [{first}, {{"passage_id": "2", "url": "{TRAVEL}", "con'
    out = ask(scripted(cut, f"{BOOKING} [{TRAVEL}]"), "How early must flights be booked?", TRAVEL)
    assert [p["content"] for p in out["passages"]] == [BOOKING]
    assert out["status"] == "answered"


def test_a_server_without_structured_output_gets_plain_text(server: OpenAIServer) -> None:
    def respond(request: ChatRequest) -> Reply:
        if request.response_format:
            return Reply(status=400, error="response_format is not supported by this server")
        if request.kind == "extract":
            body = json.dumps({"collected_passages": [{"passage_id": "1", "url": TRAVEL, "content": BOOKING}]})
            return Reply(content=f"Sure. The relevant passages are:\n{body}\nHope this helps!")
        return Reply(content=f"{BOOKING} [{TRAVEL}]")

    server.respond_with(respond)
    out = run(server, "How early must flights be booked?", TRAVEL)
    rf = [(r.response_format or {}).get("type") for r in server.of_kind("extract")]
    assert rf == ["json_schema", "json_object", None]
    assert out["status"] == "answered" and out["model_errors"] == []
    check_grounded(out)


def test_function_calling_method(server: OpenAIServer) -> None:
    server.script(
        extract=[Reply(tool_calls=[{"name": "collected_passages", "arguments": {
            "collected_passages": [{"passage_id": "1", "url": TRAVEL, "content": BUSINESS}]}}])],
        generate=[Reply(content=f"{BUSINESS} [{TRAVEL}]")],
    )
    out = run(server, "When is business class allowed?", TRAVEL, structured_output="function_calling")
    req = server.of_kind("extract")[0]
    assert req.tools and req.tools[0]["function"]["name"] == "collected_passages"
    assert req.tools[0]["function"]["parameters"]["required"] == ["collected_passages"]
    assert out["status"] == "answered" and "8 hours" in out["answer"]
    check_grounded(out)


def test_no_relevant_passage_is_insufficient() -> None:
    model = scripted(passages_json())
    out = ask(model, "What is the parking policy?", TRAVEL, EXPENSES)
    assert out["answer"] == INSUFFICIENT_ANSWER and out["citations"] == []
    assert out["status"] == "insufficient" and out["model_errors"] == []
    assert model.of_kind("generate") == []


def test_a_quote_with_normalised_whitespace_is_kept_as_the_source_text() -> None:
    model = scripted(passages_json((TRAVEL, BOOKING.replace(" ", "  ").upper())), f"{BOOKING} [{TRAVEL}]")
    out = ask(model, "How early must flights be booked?", TRAVEL)
    assert out["alignment"][0]["action"] == "kept"
    assert out["alignment"][0]["quote"] == BOOKING  # the document's own characters, not the model's
    assert out["status"] == "answered"
    check_grounded(out)
