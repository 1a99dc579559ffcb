"""What earlier answers said (evident/conversation/said.py)."""

from __future__ import annotations

from evident.alignment.models import AlignmentDecision
from evident.conversation.said import fresh_passages, said_before, said_text

ANSWER = "Reports are due within 30 days. [https://x] Receipts are required. [https://x]"


def decision(quote: str) -> AlignmentDecision:
    return AlignmentDecision.model_validate({"passage_id": "p1", "url": "https://x", "action": "kept", "overlap": 1.0,
                                             "quote": quote, "spans": [[0, len(quote)]], "original_url": "https://x"})


def test_a_quote_is_said_when_each_of_its_sentences_was() -> None:
    said = said_text([ANSWER])
    assert said_before("Reports are due within 30 days.", said)
    assert said_before("reports are due  within 30 days. Receipts are required.", said)  # cited in between
    assert not said_before("Reports are due within 30 days. Managers approve them.", said)
    assert not said_before("Reports are due within 30 days.", said_text([]))


def test_fresh_passages_keep_what_is_new_or_everything() -> None:
    said = said_text([ANSWER])
    old, new = decision("Receipts are required."), decision("Managers approve them.")
    assert fresh_passages([old, new], said) == [new]
    assert fresh_passages([old], said) == [old]  # nothing new: asked again, given again
