"""When two pieces of a source read as one statement, so that a quote may join them with " … ".

A quote made of fragments from different places of a page can say something the page does not:
the rate given for one kind of loan joined to the name of another. Two pieces are joined only when
the second follows the first in the source, within the same sentence or the next one, inside one
block of text, with at most `MAX_GAP_TOKENS` words skipped. Blocks are separated by blank lines,
by a new line that starts a heading, a list item, a table row or a block quote, and by HTML block
tags; so list items, table rows and sections never join each other.

Only the source text *between* the two pieces is read: no page-wide sentence index is needed.
"""

from __future__ import annotations

import re

MAX_GAP_TOKENS = 40

_HTML_BLOCK = (
    r"</?(?:p|li|ul|ol|h[1-6]|div|tr|td|th|table|thead|tbody|br|hr|section|article|header|footer|"
    r"aside|nav|blockquote|pre|dt|dd|dl|main|figure|figcaption)\b[^>]*>"
)
BLOCK_BREAK = re.compile(
    r"\n[ \t]*\n"  # blank line
    r"|\n[ \t]*(?:#{1,6}[ \t]|[-*+•][ \t]|\d{1,3}[.)][ \t]|\||>)"  # heading, list item, table row, quote
    r"|" + _HTML_BLOCK,
    re.IGNORECASE,
)
# A sentence ends at . ! ? (or their CJK forms) followed by space or closing punctuation and then a
# capital, a digit or markup (or space up to the next word); "e.g. this" and "4.2" do not end one.
# CJK stops need no space.
SENTENCE_END = re.compile(r"[.!?…]+[\"'”’)\]*_]*(?=\s+[^\s\w]*[A-Z0-9\u0400-\u042f]|\s+$)|[。！？]")


def breaks_statement(between: str) -> bool:
    """Whether source text between two words ends a sentence or a block."""
    return bool(BLOCK_BREAK.search(between) or SENTENCE_END.search(between))


def reads_as_one_statement(text: str, end: int, start: int, gap_tokens: int) -> bool:
    """Whether source text ending at `end` and text starting at `start` may share one quote.

    `gap_tokens` is the number of words between them; `start < end` (a piece found before the
    previous one) never joins, so a quote always follows the source's order.
    """
    if start < end or gap_tokens > MAX_GAP_TOKENS:
        return False
    between = text[end:start]
    if BLOCK_BREAK.search(between):
        return False
    return len(SENTENCE_END.findall(between)) <= 1
