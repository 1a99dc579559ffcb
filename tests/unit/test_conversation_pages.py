"""The conversation's pages in a follow-up's retrieval (evident/conversation/pages.py)."""

from __future__ import annotations

from dataclasses import dataclass

from evident.conversation.pages import HISTORY_MESSAGES, conversation_text, with_conversation
from evident.conversation.rule import Turn
from evident.models import INSUFFICIENT_ANSWER


@dataclass(frozen=True)
class Page:
    url: str
    copy: str = "found"


def pages(*urls: str, copy: str = "found") -> list[Page]:
    return [Page(u, copy) for u in urls]


def test_the_conversation_text_is_its_recent_messages_without_citations_or_refusals() -> None:
    history = [Turn(role="user", content="How many days do I have?"),
               Turn(role="assistant", content="Within 30 days. [https://x.example/expenses]"),
               Turn(role="user", content="And receipts?"),
               Turn(role="assistant", content=INSUFFICIENT_ANSWER)]
    assert conversation_text(history, 1000) == "How many days do I have? Within 30 days. And receipts?"
    old = [Turn(role="user", content=f"question {i}") for i in range(HISTORY_MESSAGES + 2)]
    assert conversation_text(old, 1000).split()[:2] == ["question", "2"]


def test_the_conversation_text_keeps_the_newest_messages_within_its_bound() -> None:
    history = [Turn(role="user", content="a" * 50), Turn(role="assistant", content="b" * 50)]
    assert conversation_text(history, 60) == "a" * 9 + " " + "b" * 50
    assert conversation_text([], 60) == ""


def test_the_conversation_pages_lead_by_their_weight() -> None:
    found = pages("receipts-faq", "expenses", "travel")
    earlier = pages("expenses", "travel", "payroll", copy="conversation")
    fused = with_conversation(found, earlier, weight=3.0, limit=3)
    assert [p.url for p in fused] == ["expenses", "travel", "payroll"]
    # At weight 1 the new turn's first page outranks the conversation's third.
    assert [p.url for p in with_conversation(found, earlier, weight=1.0, limit=3)] == ["expenses", "travel",
                                                                                       "receipts-faq"]
    # A page both rankings hold is the new turn's copy (its metadata was made for the new turn).
    assert [p.copy for p in fused] == ["found", "found", "conversation"]
    # Weight 0 is the new turn's ranking alone.
    assert [p.url for p in with_conversation(found, earlier, weight=0.0, limit=3)] == ["receipts-faq", "expenses",
                                                                                       "travel"]


def test_urls_that_are_one_page_fuse_as_one() -> None:
    fused = with_conversation(pages("https://x.example/a/"), pages("https://x.example/a", "b"), weight=1.0, limit=5,
                              key=lambda url: url.rstrip("/"))
    assert [p.url for p in fused] == ["https://x.example/a/", "b"]
