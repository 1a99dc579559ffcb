"""The one sentence of its own that a weak offline answer opens with (paper App. D.2).

Fixed wording that starts with `PREFACE`, so that the verify step recognises it as the one sentence
without a citation. It never repeats the user's message: a message may be several sentences about the
asker's situation, and everything else an offline answer says is the documentation's own words.
Pure Python, no framework imports.
"""

from __future__ import annotations

from evident.citations.answer import PREFACE

__all__ = ["OFFLINE_PREFACE", "PREFACE", "preface"]

OFFLINE_PREFACE = f"{PREFACE} the answer; these passages come closest:"


def preface() -> str:
    """The weak-evidence lead-in of an offline answer."""
    return OFFLINE_PREFACE
