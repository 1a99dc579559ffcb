"""Large documents as sections: each one a document of its own, with its own id.

A query pays for the text of every document it retrieves (extraction, alignment, answer checks all
read it), so one 50 MB manual would make every question that touches it slow and memory-hungry.
Indexed as sections of at most `budget` characters, only the sections a question matches are read.
A section's text is an exact slice of the document's text (the slices cover the whole document, in
order), so spans into a section are spans into the source; its id is `<url>#section-<n>` and it
carries `section_of` (the document's id), `section_start` (where the slice begins) and
`section_outline` (the headings above that start, so its quotes' heading paths are the document's) in
metadata.

A section keeps its document's title: the title is what the page is named for, which the search weighs
(`embedded.TITLE_WEIGHT`) and every quote's heading path starts with. The heading a cut happens to fall
before names only the section's first lines (in git's git-config(1): "lines", one of the values listed
under diff.dirstat), so a title made of it weighed that word 20 times for a hundred thousand characters of
text, and stood above the document's own headings in the path of every quote from there.
"""

from __future__ import annotations

import re
from itertools import pairwise

from evident.alignment.models import SourceDocument
from evident.alignment.outline import SECTION_OUTLINE, section_outline

SECTION_MARK = "#section-"
_HEADING_START = re.compile(r"\n(?=#{1,6}[ \t])")


def split_sections(doc: SourceDocument, budget: int) -> list[SourceDocument]:
    """`doc` itself when its text fits `budget` characters, else its sections in order."""
    text = doc.content
    if len(text) <= budget:
        return [doc]
    bounds = _cuts(text, budget)
    pieces = [(start, end) for start, end in pairwise(bounds) if text[start:end].strip()]
    sections = []
    for number, (start, end) in enumerate(pieces, start=1):
        sections.append(
            SourceDocument(
                url=f"{doc.url}{SECTION_MARK}{number}",
                title=doc.title,
                content=text[start:end],
                source=doc.source,
                source_type=doc.source_type,
                metadata={**doc.metadata, "section_of": doc.url, "section": number,
                          "sections": len(pieces), "section_start": start,
                          SECTION_OUTLINE: section_outline(text, start)},
            )
        )
    return sections


def _cuts(text: str, budget: int) -> list[int]:
    """Offsets that cut `text` into pieces of at most `budget` characters, at the best break found.

    Preferred breaks, in order: before a Markdown heading, at a blank line, at a line end, at a
    space; a piece is never cut shorter than half the budget to reach one (bounded piece count).
    """
    cuts = [0]
    start = 0
    while len(text) - start > budget:
        low, high = start + budget // 2, start + budget
        cut = _last_heading(text, low, high)
        if cut is None:
            for separator in ("\n\n", "\n", " "):
                found = text.rfind(separator, low, high)
                if found != -1:
                    cut = found + len(separator)
                    break
        if cut is None or cut <= start:
            cut = high
        cuts.append(cut)
        start = cut
    cuts.append(len(text))
    return cuts


def _last_heading(text: str, low: int, high: int) -> int | None:
    last = None
    for match in _HEADING_START.finditer(text, low, high):
        last = match.end()
    return last

