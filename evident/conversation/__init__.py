"""Conversations: a follow-up question turned into a standalone one, and the bounds of a chat's messages.

`rule` is framework-free (the offline rewrite, the input checks, how a thread stays bounded);
`asking` finds the asking part of one message and weighs its words (framework-free);
`pages` fuses a follow-up's ranking with its earlier messages' (framework-free);
`messages` translates LangChain messages to and from it (the answer as an `AIMessage`).
"""

from evident.conversation.rule import check_turns, condense, is_elliptical, overflow
from evident.models import Turn

__all__ = ["Turn", "check_turns", "condense", "is_elliptical", "overflow"]
