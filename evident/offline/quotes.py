"""The verified quotes as the offline composer reads them: their citable sentences (prose sentences,
list items, table rows), in order, each with the passage it came from and the URLs of every page that
says it word for word. Pure Python, no framework imports."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from evident.alignment.aligner import QUOTE_JOINER
from evident.alignment.models import AlignmentDecision
from evident.alignment.sentences import Kind, is_noise, split_units, strip_marker
from evident.offline.terms import content_keys
from evident.offline.windows import names_a_thing

__all__ = ["QuotedSentence", "quoted_sentences"]


# What a citable sentence is in its quote: prose, a prose line ending in ":" that introduces the items
# after it, a list item, a table row or a code line (the last three are shown on lines of their own).
SentenceKind = Literal["prose", "label", "item", "row", "code"]
_OWN_LINE: frozenset[Kind] = frozenset({"item", "row", "code"})


@dataclass
class QuotedSentence:
    """One citable sentence of the quotes: what `quoted_sentences` reads of it, then what
    `evident.offline.selection` learns of it while choosing (its relevance, its rank's flags)."""

    text: str
    kind: SentenceKind
    passage: int
    order: int
    urls: list[str] = field(default_factory=list)
    # A table row's first cell: the thing the row is about ("TF-2202" in "TF-2202 | Authentication failed").
    key: str | None = None
    # The label a list item, row or code line sits under (its order), if the quote holds it.
    parent: int | None = None
    # A sentence merged into an earlier passage's copy, or text the quote left out ("…"), came right
    # before it: the sentence before it in the list is not the one before it in the source.
    after_gap: bool = False
    # The unit right before it in its quote is the sentence before it in the list (nothing skipped).
    adjacent: bool = False
    # A table row's header row (the row above the |---| line; itself, for that row): shown in a table
    # of the rows kept.
    header: str | None = None
    # What selection learns. Query-term relevance; a continuation's `carried` is that of the sentence it
    # continues, which it ranks with when the answer must be cut.
    relevance: float = 0.0
    carried: float = 0.0
    # One of the sentences (at least `strong_relevance` as on-topic as the best) the answer was made
    # longer than `max_sentences` for: kept before the others of later passages.
    strong: bool = False
    # Holds a word of the new turn itself, not only words a follow-up carried over from the
    # conversation (always, for a first question or a turn that names nothing of its own).
    own: bool = True

    @property
    def bullet(self) -> bool:
        """Shown on a line of its own: a list item, table row or code line."""
        return self.kind in _OWN_LINE

    @property
    def lead(self) -> bool:
        """Of the extractor's best window (the first passage): kept whole and cut last."""
        return self.passage == 0


_TERMINAL = (".", "!", "?", ":", ";", "。", "！", "？", ")", '"', "”", "’")
_NOT_TITLE = re.compile(r"[-_=/.<>{}\[\]$`|@#]")


def _is_title(text: str) -> bool:
    """A short unpunctuated line standing alone: a heading that lost its markup in HTML extraction."""
    return (
        not text.endswith(_TERMINAL)
        and len(text.split()) <= 8
        and text[:1].isupper()
        and not _NOT_TITLE.search(text)
    )


def _is_term(heading: str) -> bool:
    """A heading that names a thing (as `evident.offline.windows.is_term` reads it) and does not read as
    a section title: "--no-include-untracked", "gc.auto", not "Eligibility"."""
    return names_a_thing(heading) and not _is_title(heading.lstrip("#").strip())


def _units(part: str) -> list[tuple[str, Kind]]:
    """Units of one quote fragment, with the kinds alignment's trimming hides restored.

    Alignment quotes start at the first word, so a quote that began with "- " or "| " or "## " has
    lost the marker that made its first line an item, a row or a heading.
    """
    units = split_units(part)
    out: list[tuple[str, Kind]] = []
    for i, (s, e, kind) in enumerate(units):
        raw = part[s:e]
        nxt: Kind | None = units[i + 1][2] if i + 1 < len(units) else None
        alone = part[e : e + 4].lstrip(" \t").startswith(("\n\n", "\r\n\r\n")) or nxt is None
        if kind != "prose":
            pass
        elif alone and (i == 0 or part[:s].rstrip(" \t").endswith("\n\n")) and _is_title(raw):
            kind = "heading"
        elif i == 0 and nxt == "item" and not raw.endswith(":"):
            kind = "item"
        elif i == 0 and "|" in raw and (nxt == "row" or (raw.endswith("|") and "|" in raw[:-1])):
            # A row that lost its leading "| " still has the pipes between its cells; a sentence right
            # above a table has none.
            kind = "row"
        out.append((raw, kind))
    return out


_TABLE_RULE = "|-: \t"


def _header_row(units: list[tuple[str, Kind]], i: int) -> bool:
    """Whether row `units[i]` is its table's header row: the one above the |---| line; in a table
    without that line (an HTML table read as text), its first row when that names (no digit) and a
    row under it holds a number. A quote may start in the middle of such a table: its first row is
    then a row of values, "E-2202 | Login failed", not a header."""
    raw = units[i][0]
    after = units[i + 1 :]
    if after and not after[0][0].strip(_TABLE_RULE):
        return True
    if (i > 0 and units[i - 1][1] == "row") or any(ch.isdigit() for ch in raw):
        return False
    run = after[: next((n for n, (_, k) in enumerate(after) if k != "row"), len(after))]
    return all(r.strip(_TABLE_RULE) for r, _ in run) and any(ch.isdigit() for r, _ in run for ch in r)


def quoted_sentences(decisions: Sequence[AlignmentDecision]) -> list[QuotedSentence]:
    """Citable units of the quotes, in order, with duplicates merged under all their URLs."""
    out: list[QuotedSentence] = []
    by_key: dict[str, QuotedSentence] = {}
    for p, decision in enumerate(decisions):
        last_label: int | None = None
        gap = False
        for n, part in enumerate(decision.quote.split(QUOTE_JOINER)):
            gap = gap or n > 0  # the quote left text out between its parts ("…")
            units = _units(part)
            shown_before = -2  # the index in `units` of the last unit appended from this part
            header_row: str | None = None
            for i, (raw, kind) in enumerate(units):
                if kind != "row":
                    header_row = None
                if kind == "heading" and _is_term(raw):
                    # A definition's term ("stash.showIncludeUntracked", "--no-include-untracked") says
                    # what its description is about. A quote that lost the term's "###" already reads
                    # it as a line of text; with the markup kept, it is the same line.
                    raw, kind = raw.lstrip("#").strip(), "prose"
                if kind in ("heading", "fence", "rule") or is_noise(raw, kind):
                    continue
                text = " ".join((strip_marker(raw, kind) if kind in ("item", "row") else raw).split())
                if not content_keys(text):
                    continue
                # Merged only when identical (modulo spacing): the one sentence shown must be a
                # verbatim quote of every document it cites.
                if text in by_key:
                    seen = by_key[text]
                    if decision.url not in seen.urls:
                        seen.urls.append(decision.url)
                    gap = True
                    continue
                # (The tuple, not _OWN_LINE, so that the type checker narrows `kind` to a SentenceKind.)
                shown: SentenceKind = (
                    kind if kind in ("item", "row", "code") else "label" if text.endswith(":") else "prose"
                )
                sentence = QuotedSentence(text, shown, p, len(out), [decision.url], after_gap=gap,
                                          adjacent=shown_before == i - 1)
                shown_before = i
                gap = False
                # A header row names the columns, not a thing (`_header_row`).
                header = _header_row(units, i)
                if kind == "row" and "|" in text and not header:
                    sentence.key = text.split("|", 1)[0]
                if kind == "row":
                    header_row = text if header else header_row
                    sentence.header = header_row
                sentence.parent = last_label if sentence.bullet else None
                if sentence.kind == "label":
                    last_label = sentence.order
                elif not sentence.bullet:
                    last_label = None
                by_key[text] = sentence
                out.append(sentence)
    return out
