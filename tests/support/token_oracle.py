"""The slow, obvious tokenizer the vectorised ones are checked against."""

from __future__ import annotations

from evident.alignment.normalize import nfkc_casefold
from evident.alignment.tokenize import is_word_char


def oracle_tokens(text: str) -> list[str]:
    """Word tokens of the comparison form, one character at a time."""
    out, cur = [], ""
    for ch in nfkc_casefold(text):
        if is_word_char(ch):
            cur += ch
        elif cur:
            out.append(cur)
            cur = ""
    return out + ([cur] if cur else [])
