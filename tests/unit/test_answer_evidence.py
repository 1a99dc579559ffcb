"""How well the documentation backs an answer (`evidence`: clear, weak, none), read by `postprocess` from the
checked answer whoever wrote it; and the offline answer `generate` and `verify` write by one code path, so a
model's unusable draft on weak evidence is answered with the hedge too."""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from evident.citations.answer import PREFACE, PREFACE_TAIL, parse_answer, render_answer
from evident.context import EvidentContext
from evident.models import INSUFFICIENT_ANSWER, SourceDocument
from evident.nodes.generate import generate
from evident.nodes.postprocess import postprocess
from evident.nodes.rewrite import rewrite
from evident.nodes.verify import verify
from evident.state import EvidentState
from tests.support.offline import decision

BILLING = "https://help.acme.example/billing"
REFUND = "Annual plans can be refunded within 30 days of purchase."
QUERY = "How many days do I have to get a refund on an annual plan?"


def _state(draft: str = "", **more: Any) -> EvidentState:
    verified = [decision("p1", BILLING, REFUND).model_dump(mode="json")]
    document = SourceDocument(url=BILLING, title="Billing", content=REFUND).model_dump(mode="json")
    # The draft as `generate` leaves it in the state: its lines of cited sentences, as JSON.
    lines = [line.model_dump(mode="json") for line in parse_answer(draft, {BILLING})]
    state: dict[str, Any] = {"query": QUERY, "verified": verified, "documents": [document], "draft": lines,
                             "messages": [], **more}
    return state  # type: ignore[return-value]  # a partial state, as the nodes before these leave it


def _runtime() -> Runtime[EvidentContext]:
    return Runtime(context=EvidentContext())


def _finish(state: EvidentState) -> dict[str, Any]:
    """`state` through `postprocess`: the answer and its `status` and `evidence`."""
    return {**state, **postprocess(state, _runtime())}


def test_a_clear_answer_a_hedged_one_and_no_answer() -> None:
    clear = _finish(_state(f"{REFUND} [{BILLING}]"))
    assert (clear["status"], clear["evidence"]) == ("answered", "clear")
    weak = _finish(_state(f"{PREFACE} the answer; these passages come closest:\n- {REFUND} [{BILLING}]"))
    assert (weak["status"], weak["evidence"]) == ("answered", "weak")
    assert weak["answer"].startswith(PREFACE)
    none = _finish(_state(INSUFFICIENT_ANSWER))
    assert (none["status"], none["evidence"], none["answer"]) == ("insufficient", "none", INSUFFICIENT_ANSWER)
    failed = _finish(_state(status="error", error="the index cannot be read"))
    assert (failed["status"], failed["evidence"]) == ("error", "none")
    # The answer message says it as the state does: a client reading the conversation sees it too.
    assert weak["messages"][-1].additional_kwargs["evidence"] == "weak"


def test_a_model_that_leads_with_the_preface_hedges() -> None:
    # The generation prompt asks a model to open so when the passages do not answer directly: the same mark.
    out = _finish(_state(f"{PREFACE} whether refunds are paid in cash. {PREFACE_TAIL}\n{REFUND} [{BILLING}]",
                         generated_by="model"))
    assert (out["status"], out["evidence"]) == ("answered", "weak")


def test_the_verify_fallback_hedges_on_weak_evidence_as_generate_does() -> None:
    # No sentence of the model's draft stands on the verified passage: verify answers with the offline
    # composer, and on weak evidence that answer hedges exactly as generate's offline answer does.
    for weak in (False, True):
        state = _state("I cannot help with refunds.", generated_by="model", weak_evidence=weak)
        fallback = verify(state, _runtime())
        offline = generate(_state(weak_evidence=weak), _runtime())
        assert fallback["generated_by"] == offline["generated_by"] == "offline"
        assert fallback["draft"] == offline["draft"]
        assert render_answer(fallback["draft"]).startswith(PREFACE) == weak
        assert _finish({**state, **fallback})["evidence"] == ("weak" if weak else "clear")  # type: ignore[typeddict-item]


def test_the_verify_fallback_leaves_out_what_the_conversation_already_said() -> None:
    other = "Monthly plans are not refunded, but you can cancel at any time."
    verified = [decision("p1", BILLING, REFUND).model_dump(mode="json"),
                decision("p2", BILLING, other).model_dump(mode="json")]
    said = [{"type": "human", "content": "Can I get a refund?"},
            {"type": "ai", "content": f"{REFUND} [{BILLING}]", "additional_kwargs": {"status": "answered"}},
            {"type": "human", "content": QUERY}]
    # What the conversation already said, as `rewrite` read it from these messages (`conversation.said`).
    conversation = rewrite({"messages": said}, _runtime())["conversation"]
    state = _state("I cannot help with refunds.", generated_by="model", verified=verified, messages=said,
                   conversation=conversation)
    fallback = verify(state, _runtime())
    assert fallback["draft"] == generate(_state(verified=verified, messages=said, conversation=conversation),
                                         _runtime())["draft"]
    answer = render_answer(fallback["draft"])
    assert REFUND not in answer and other in answer
