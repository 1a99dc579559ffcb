"""verify_answer: an agent's final answer checked against the EvidenT evidence of its own thread.

The evidence is built from the example corpus's real text, each passage at its exact offsets in the
source, as the EvidenT tool's artifact carries it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode

from evident.agent.artifact import EvidenceArtifact, EvidenceCitation, EvidencePassage
from evident.agent.thread import thread_evidence
from evident.agent.verify_answer import (
    AnswerCheck,
    AnswerCheckSettings,
    VerifyAnswerState,
    source_spans,
    verify_answer,
    verify_answer_node,
    verify_answer_tool,
)
from evident.alignment import content_hash, quote_of
from evident.models import INSUFFICIENT_ANSWER

ROOT = Path(__file__).resolve().parents[2]
TRAVEL_URL = "https://policies.tessellate.example/finance/travel-and-expenses"
TRAVEL = (ROOT / "examples/corpus/policies/travel-and-expenses.md").read_text(encoding="utf-8")

LEAVE_URL = "https://policies.tessellate.example/people/leave"
LEAVE = (ROOT / "examples/corpus/policies/leave.md").read_text(encoding="utf-8")
FLIGHTS = "For flights of 6 hours or longer, you may book premium economy."
BOOK_EARLY = "Book flights at least 14 days before departure."
MILES = "loyalty programmes must never influence which airline or hotel you choose"
TRAINS = "First class is allowed for train journeys longer than 4 hours"


def passage(pid: str, text: str, url: str = TRAVEL_URL, source: str = TRAVEL) -> EvidencePassage:
    start = source.index(text)
    return EvidencePassage(passage_id=pid, url=url, title=url.rsplit("/", 1)[-1], spans=[(start, start + len(text))],
                           quote=text, content_hash=content_hash(source))


def artifact(*passages: EvidencePassage, query: str = "q") -> EvidenceArtifact:
    numbers = {url: i for i, url in enumerate(dict.fromkeys(p.url for p in passages), 1)}
    return EvidenceArtifact(
        query=query, status="answered", answer="(EvidenT's answer)",
        citations=[EvidenceCitation(number=numbers[p.url], sentence=p.quote, url=p.url, title=p.title,
                                    passage_ids=[p.passage_id], spans=p.spans, quote=p.quote,
                                    content_hash=p.content_hash) for p in passages],
        passages=list(passages),
    )


def thread(answer: str, *artifacts: EvidenceArtifact | dict[str, Any]) -> list[AnyMessage]:
    messages: list[AnyMessage] = [HumanMessage("How do I book travel?")]
    for i, found in enumerate(artifacts):
        call = f"call-{i}"
        messages.append(AIMessage("", tool_calls=[{"name": "evident_search", "args": {"query": "q"}, "id": call}]))
        body = found.model_dump(mode="json") if isinstance(found, EvidenceArtifact) else found
        messages.append(ToolMessage("(the tool's content)", tool_call_id=call, artifact=body))
    messages.append(AIMessage(answer, id="final"))
    return messages


def check(answer: str, *artifacts: EvidenceArtifact | dict[str, Any], **settings: Any) -> AnswerCheck:
    found = verify_answer(thread(answer, *artifacts), AnswerCheckSettings(**settings))
    assert found is not None
    return found


TRAVEL_CALL = artifact(passage("p1", FLIGHTS), passage("p2", BOOK_EARLY))


def test_a_sentence_its_passage_supports_keeps_its_mark_and_the_exact_spans() -> None:
    result = check(f"{FLIGHTS} [1]", TRAVEL_CALL)
    [sentence] = result.sentences
    assert sentence.status == "supported"
    assert sentence.kept == ["1"] and sentence.removed == []
    assert sentence.url == TRAVEL_URL
    [(start, end)] = sentence.spans
    assert TRAVEL[start:end] == FLIGHTS == sentence.quote
    assert sentence.citations[0].content_hash == content_hash(TRAVEL)
    assert result.corrected == f"{FLIGHTS} [1]" and not result.changed


def test_a_rewritten_sentence_is_supported_by_the_token_measure_unless_paraphrase_is_off() -> None:
    rewritten = "You may book premium economy for flights of 6 hours or longer [1]."
    assert check(rewritten, TRAVEL_CALL).sentences[0].status == "supported"
    strict = check(rewritten, TRAVEL_CALL, paraphrase=False)
    assert strict.sentences[0].status == "unsupported"
    assert strict.corrected == INSUFFICIENT_ANSWER  # nothing left of the answer


def test_an_unsupported_sentence_is_removed_or_flagged() -> None:
    answer = f"{FLIGHTS} [1] Every employee gets a company car for business trips [1]."
    removed = check(answer, TRAVEL_CALL)
    assert [s.status for s in removed.sentences] == ["supported", "unsupported"]
    assert removed.sentences[1].corrected is None and removed.sentences[1].removed == ["1"]
    assert removed.corrected == f"{FLIGHTS} [1]"
    flagged = check(answer, TRAVEL_CALL, unsupported="flag")
    assert flagged.corrected == f"{FLIGHTS} [1] Every employee gets a company car for business trips. [unsupported]"


def test_a_misquoted_number_is_contradicted_with_the_sources_words() -> None:
    result = check("For flights of 4 hours or longer, you may book premium economy [1].", TRAVEL_CALL)
    [sentence] = result.sentences
    assert sentence.status == "contradicted"
    assert [(w.passage, w.source) for w in sentence.source_words] == [("4", "6")]
    assert sentence.quote == FLIGHTS
    [(start, end)] = sentence.spans
    assert TRAVEL[start:end] == FLIGHTS
    assert result.corrected == f"{FLIGHTS} [1]"  # the source's own words, with the mark that cites them
    assert check("For flights of 4 hours or longer, you may book premium economy [1].", TRAVEL_CALL,
                 contradicted="remove").corrected == INSUFFICIENT_ANSWER


def test_a_dropped_negation_is_contradicted() -> None:
    result = check("Loyalty programmes must influence which airline or hotel you choose [1].",
                   artifact(passage("p1", MILES)))
    assert result.sentences[0].status == "contradicted"
    assert [(w.passage, w.source) for w in result.sentences[0].source_words] == [("", "never")]
    assert result.corrected == f"{MILES} [1]"


def test_a_short_sentence_that_drops_a_negation_is_contradicted_by_the_finer_alignment() -> None:
    said = "Floating holidays do not carry over."
    leave = artifact(passage("l1", said, url=LEAVE_URL, source=LEAVE))
    result = check("Floating holidays carry over [1].", leave)
    assert result.sentences[0].status == "contradicted"
    assert [(w.passage, w.source) for w in result.sentences[0].source_words] == [("", "do not")]
    assert result.corrected == f"{said} [1]"
    assert check("Floating holidays carry over [1].", leave, fine_n=3).sentences[0].status == "unsupported"


def test_a_table_row_with_a_changed_number_is_contradicted_and_corrected_in_place() -> None:
    start = TRAVEL.index("| Scheduled flight time |")
    table = TRAVEL[start:TRAVEL.index("\n\n", start)]
    header = "| Scheduled flight time | Allowed cabin |\n|---|---|\n"
    result = check(f"{header}| 7 hours or longer | Premium economy |\n\n[1]", artifact(passage("t", table)))
    [sentence] = result.sentences
    assert sentence.status == "contradicted"
    assert [(w.passage, w.source) for w in sentence.source_words] == [("7", "6")]
    assert all(TRAVEL[a:b] in table for a, b in sentence.spans) and sentence.spans[0][0] >= start
    assert result.corrected == f"{header}| 6 hours or longer | Premium economy |\n\n[1]"


def test_a_changed_name_is_contradicted() -> None:
    text = "Every business trip needs your manager's approval in TripDesk before you book anything."
    result = check("Every business trip needs your manager's approval in Ledgerly before you book anything [1].",
                   artifact(passage("p1", text)))
    assert result.sentences[0].status == "contradicted"
    assert [(w.passage, w.source) for w in result.sentences[0].source_words] == [("Ledgerly", "TripDesk")]


def test_a_reworded_word_is_no_contradiction() -> None:
    result = check("For flights of 6 hours or longer, you can book premium economy [1].", TRAVEL_CALL)
    assert result.sentences[0].status == "supported"
    assert result.corrected == "For flights of 6 hours or longer, you can book premium economy. [1]"


def test_a_citation_to_a_passage_that_does_not_support_the_sentence_is_removed() -> None:
    two_sources = artifact(passage("p1", FLIGHTS), passage("t1", TRAINS, url="wiki/trains", source=TRAINS))
    result = check(f"{TRAINS} [1][2].", two_sources)
    [sentence] = result.sentences
    assert sentence.status == "supported"
    assert sentence.kept == ["2"] and sentence.removed == ["1"]
    assert [c.relation for c in sentence.citations] == ["unrelated", "supports"]
    assert result.corrected == f"{TRAINS}. [2]"


def test_a_sentence_cited_to_the_wrong_source_is_re_cited_to_the_one_that_supports_it() -> None:
    two_sources = artifact(passage("p1", FLIGHTS), passage("t1", TRAINS, url="wiki/trains", source=TRAINS))
    result = check(f"{TRAINS} [1].", two_sources)
    [sentence] = result.sentences
    assert sentence.status == "supported"
    assert [(c.mark, c.verdict) for c in sentence.citations] == [("1", "removed"), ("2", "added")]
    assert result.corrected == f"{TRAINS}. [2]"


def test_marks_resolve_to_the_latest_call_first_and_to_an_earlier_one_that_supports() -> None:
    earlier = artifact(passage("p1", FLIGHTS))  # its [1] is the travel policy
    later = artifact(passage("s1", TRAINS, url="wiki/trains", source=TRAINS))  # its [1] is the trains page
    result = check(f"{FLIGHTS} [1] {TRAINS} [1].", earlier, later)
    first, second = result.sentences
    assert first.status == second.status == "supported"
    assert first.citations[0].tool_call_id == "call-0" and first.url == TRAVEL_URL
    assert second.citations[0].tool_call_id == "call-1" and second.url == "wiki/trains"
    assert result.corrected == f"{FLIGHTS} [1] {TRAINS}. [1]"


def test_url_marks_comma_lists_and_marks_to_nothing() -> None:
    call = artifact(passage("p1", FLIGHTS), passage("t1", TRAINS, url="wiki/trains", source=TRAINS))
    by_url = check(f"{FLIGHTS} [{TRAVEL_URL}]", call)
    assert by_url.sentences[0].kept == [TRAVEL_URL] and by_url.sentences[0].status == "supported"
    listed = check(f"{TRAINS} [1, 2]", call)
    assert listed.sentences[0].kept == ["2"] and listed.sentences[0].removed == ["1"]
    nowhere = check(f"{FLIGHTS} [7] [https://invented.example/page]", call)
    assert [(c.mark, c.relation, c.verdict) for c in nowhere.sentences[0].citations[:2]] == [
        ("7", "unresolved", "removed"), ("https://invented.example/page", "unresolved", "removed")]
    assert nowhere.corrected == f"{FLIGHTS} [1]"  # re-cited to the source that says it


def test_uncited_text_claims_are_checked_and_lead_ins_and_source_lists_left_alone() -> None:
    answer = (f"Here is what the travel policy says:\n\n{FLIGHTS} Staff may fly business class on any trip.\n\n"
              f"Sources:\n[1] Travel and Expense Policy — {TRAVEL_URL}")
    result = check(answer, TRAVEL_CALL)
    assert [(s.sentence, s.status) for s in result.sentences] == [
        (FLIGHTS, "supported"), ("Staff may fly business class on any trip.", "unsupported")]
    assert result.sentences[0].citations[0].verdict == "added"
    assert result.corrected == (f"Here is what the travel policy says:\n\n{FLIGHTS} [1]\n\n"
                                f"Sources:\n[1] Travel and Expense Policy — {TRAVEL_URL}")
    kept = check(answer, TRAVEL_CALL, uncited="keep")
    assert kept.sentences == [] and kept.corrected == answer


def test_evidence_is_read_from_dicts_and_models_alike_and_only_before_the_answer() -> None:
    as_json = check(f"{FLIGHTS} [1]", TRAVEL_CALL.model_dump(mode="json"))
    assert as_json.sentences[0].status == "supported" and as_json.evidence_calls == 1
    messages = thread(f"{FLIGHTS} [1]")
    messages.append(ToolMessage("later", tool_call_id="late", artifact=TRAVEL_CALL.model_dump(mode="json")))
    late = verify_answer(messages)
    assert late is not None and late.evidence_calls == 0 and late.sentences[0].status == "unsupported"


def test_other_tools_artifacts_are_skipped_and_a_broken_evidence_artifact_is_named() -> None:
    broken = {"kind": "evident.evidence/v1", "query": "q"}  # no status
    result = check(f"{FLIGHTS} [1]", {"rows": [1, 2]}, broken, TRAVEL_CALL)
    assert result.evidence_calls == 1
    assert len(result.notes) == 1 and "call-1" in result.notes[0] and "not a valid" in result.notes[0]
    assert result.sentences[0].status == "supported"


def test_no_final_answer_means_nothing_to_check() -> None:
    calling = [HumanMessage("q"), AIMessage("", tool_calls=[{"name": "evident_search", "args": {}, "id": "c"}])]
    assert verify_answer(calling) is None
    assert thread_evidence(calling).artifacts == ()


def test_source_spans_map_a_quote_of_several_segments_to_the_source() -> None:
    a, b = TRAVEL.index(BOOK_EARLY), TRAVEL.index(FLIGHTS)
    spans = [(a, a + len(BOOK_EARLY)), (b, b + len(FLIGHTS))]
    joined = EvidencePassage(passage_id="j", url=TRAVEL_URL, spans=spans, quote=quote_of(TRAVEL, spans))
    offset = joined.quote.index(FLIGHTS)
    assert source_spans(joined, [(offset, offset + len(FLIGHTS))]) == [spans[1]]
    assert source_spans(joined, [(0, len(joined.quote))]) == spans  # the joiner is no source text
    adjacent = EvidencePassage(passage_id="k", url=TRAVEL_URL, spans=[(a, a + 4), (a + 4, a + 10)],
                               quote=TRAVEL[a:a + 10])
    assert source_spans(adjacent, [(2, 8)]) == [(a + 2, a + 8)]
    wrong = EvidencePassage(passage_id="w", url=TRAVEL_URL, spans=[(a, a + 5)], quote="not five")
    assert source_spans(wrong, [(0, 3)]) == [(a, a + 5)]  # cannot be mapped: the passage's own spans


def test_the_node_replaces_the_final_answer_in_a_messages_state_graph() -> None:
    builder = StateGraph(VerifyAnswerState)
    builder.add_node("verify_answer", verify_answer_node)
    builder.add_edge(START, "verify_answer")
    out = builder.compile().invoke({"messages": thread("For flights of 4 hours or longer, you may book premium"
                                                      " economy [1].", TRAVEL_CALL)})
    final = out["messages"][-1]
    assert len(out["messages"]) == 4 and final.id == "final"
    assert final.content == f"{FLIGHTS} [1]"
    assert final.response_metadata["evident_check"] == {"supported": 0, "unsupported": 0, "contradicted": 1,
                                                        "changed": True}
    assert out["answer_check"]["sentences"][0]["source_words"] == [{"passage": "4", "source": "6"}]


def _tool_reply(draft: str, **run: Any) -> ToolMessage:
    messages = thread("(not yet answered)", TRAVEL_CALL)[:-1]
    messages.append(AIMessage("", tool_calls=[{"name": "verify_answer", "id": "check-1", "args": {"answer": draft}}]))
    builder = StateGraph(MessagesState)
    builder.add_node("tools", ToolNode([verify_answer_tool]))
    builder.add_edge(START, "tools")
    reply = builder.compile().invoke({"messages": messages}, **run)["messages"][-1]
    assert isinstance(reply, ToolMessage)
    return reply


def test_the_tool_checks_a_draft_against_the_conversation_it_is_called_in() -> None:
    reply = _tool_reply("For flights of 4 hours or longer, you may book premium economy [1].")
    assert reply.text.startswith(f"{FLIGHTS} [1]") and "1 contradicted" in reply.text
    assert reply.artifact["sentences"][0]["status"] == "contradicted"
    assert set(verify_answer_tool.tool_call_schema.model_json_schema()["properties"]) == {"answer"}


def test_the_tool_takes_its_settings_from_the_run() -> None:
    from evident.context import EvidentContext

    draft = "Every employee gets a company car for business trips [1]."
    assert _tool_reply(draft).text.startswith(INSUFFICIENT_ANSWER)
    flagged = _tool_reply(draft, context=EvidentContext(unsupported="flag"))
    assert flagged.text.startswith("Every employee gets a company car for business trips. [unsupported]")


@pytest.mark.parametrize("mode", ["remove", "flag"])
def test_the_context_decides_what_the_node_does_with_an_unsupported_sentence(mode: str) -> None:
    from langgraph.runtime import Runtime

    from evident.context import EvidentContext

    state = {"messages": thread("Every employee gets a company car for business trips [1].", TRAVEL_CALL)}
    out = verify_answer_node(state, Runtime(context=EvidentContext(unsupported=mode)))  # type: ignore[arg-type]
    expected = INSUFFICIENT_ANSWER if mode == "remove" else \
        "Every employee gets a company car for business trips. [unsupported]"
    assert out["messages"][0].content == expected


def test_an_earlier_turns_answer_is_not_checked_again() -> None:
    messages = [*thread(f"{FLIGHTS} [1]", TRAVEL_CALL), HumanMessage("And trains?")]
    assert verify_answer(messages) is None
