"""Sentence units with exact character offsets, for noisy page text (Markdown, plain text, HTML-extracted).

A *unit* is a prose sentence, or a whole Markdown heading, list item, table row or code line. Offsets
always index the original string, so a unit can be turned back into the exact source span that
alignment verifies. This is the sentence splitter of edited text, pages and answers: the offline engine
quotes and cites units, verify splits a model's uncited text at them, and `evident eval` counts an
answer's sentences with them; "U.S." or "e.g." ends none. (A user's message is not edited text: it is
cut by `evident.conversation.asking`'s own rule.) Page chrome (breadcrumbs, link bars) is recognised here because it
decides where a line break ends a unit. Pure Python, no framework imports.
"""

from __future__ import annotations

import re
from typing import Literal

from evident.alignment.lexicon import words
from evident.alignment.spans import trim_span

Kind = Literal["heading", "item", "row", "code", "fence", "rule", "prose"]

__all__ = ["Kind", "split_sentences", "split_units", "unit_kind", "strip_marker", "is_noise"]

_HEADING = re.compile(r"[ \t]{0,3}#{1,6}(?:[ \t]|$)")
_FENCE = re.compile(r"[ \t]{0,3}(```+|~~~+)")
# Bullets (including the typographic ones HTML extraction leaves behind) and numbered/lettered items.
_ITEM = re.compile(r"[ \t]*(?:[-*+•●▪◦‣–]|\d{1,3}[.)]|[a-zA-Z][)])[ \t]+\S")
_RULE = re.compile(r"[ \t]*([-*_=~])(?:[ \t]*\1){2,}[ \t]*$")
_TABLE_SEP = re.compile(r"[ \t]*\|?[ \t]*:?-{2,}:?[ \t]*(?:\|[ \t]*:?-{2,}:?[ \t]*)*\|?[ \t]*$")
_MARKER = re.compile(r"(?:#{1,6}|[-*+•●▪◦‣–]|\d{1,3}[.)]|[a-zA-Z][)])[ \t]+")

# A sentence ends at terminal punctuation plus any closing quotes/brackets; CJK full stops need no space.
_CLOSERS = "\"'”’)]»"
_LATIN_END = re.compile(r"[.!?…]+[" + re.escape(_CLOSERS) + r"]*(?=\s)")
_CJK_END = re.compile(r"[。！？]+[" + re.escape(_CLOSERS) + r"]*")
_LINE_END = re.compile(r"(?:[.!?…:。！？])[" + re.escape(_CLOSERS) + r"]*$")
_OPENERS = "\"'“‘([«¿¡*_`"

# Never a sentence end, whatever follows.
_ABBREV = frozenset(
    """e.g i.e etc vs mr mrs ms dr prof inc ltd co corp llc st jr sr approx cf al fig figs eq
    dept est incl excl esp resp ca viz""".split()
)
# Only an abbreviation when a number follows ("No. 5", "p. 12", "Jan. 3"); otherwise a plain word.
_ABBREV_BEFORE_DIGIT = frozenset(
    "no nos nr p pp vol ch sec art ref jan feb mar apr jun jul aug sep sept oct nov dec".split()
)
_DOTTED = re.compile(r"(?:[^\W\d_]\.)+[^\W\d_]\.?$")

_SHORT_LINE = 30
# Nobody hard-wraps prose this narrow: a block of lines all shorter than this is a list of labels.
_WRAP_MIN = 50
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af]")


def _line_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) of each line without its terminator; splitlines() defines what a line break is."""
    spans: list[tuple[int, int]] = []
    pos = 0
    for raw in text.splitlines(keepends=True):
        body = raw.rstrip("\r\n\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029")
        spans.append((pos, pos + len(body)))
        pos += len(raw)
    return spans


def _line_kind(line: str) -> Kind:
    if _FENCE.match(line):
        return "fence"
    if _TABLE_SEP.match(line) and "-" in line and ("|" in line or line.strip().startswith(":")):
        return "row"
    if _RULE.match(line):
        return "rule"
    if _HEADING.match(line):
        return "heading"
    if line.lstrip().startswith("|"):
        return "row"
    if _ITEM.match(line):
        return "item"
    return "prose"


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" \t"))


def _no_break_after(token: str, following: str) -> bool:
    """True when the punctuation ending `token` does not end a sentence."""
    word = token.lstrip(_OPENERS).rstrip(_CLOSERS)
    if not word.endswith("."):
        return False
    bare = word.rstrip(".").casefold()
    if not bare:
        return False
    if bare in _ABBREV or _DOTTED.match(word):
        return True
    if bare in _ABBREV_BEFORE_DIGIT and following[:1].isdigit():
        return True
    # Initials ("J. Smith") are one letter; "Plan B." would be too, but that is rare in docs.
    return len(bare) == 1 and bare.isalpha()


def _starts_sentence(ch: str) -> bool:
    if ch.isupper() or ch.isdigit() or ch in _OPENERS:
        return True
    # Scripts without case (CJK, Arabic, Hebrew, Devanagari...) cannot signal a new sentence by case.
    return ch.isalpha() and not ch.islower()


def _split_prose(text: str, start: int, end: int, out: list[tuple[int, int]]) -> None:
    """Split one prose segment at sentence ends, appending trimmed spans to `out`."""
    segment = text[start:end]
    cuts: list[int] = []
    for m in _LATIN_END.finditer(segment):
        nxt = m.end()
        while nxt < len(segment) and segment[nxt].isspace():
            nxt += 1
        if nxt >= len(segment) or not _starts_sentence(segment[nxt]):
            continue
        token_start = m.start()
        while token_start > 0 and not segment[token_start - 1].isspace():
            token_start -= 1
        if _no_break_after(segment[token_start : m.end()], segment[nxt:]):
            continue
        cuts.append(m.end())
    for m in _CJK_END.finditer(segment):
        if m.end() < len(segment):
            cuts.append(m.end())
    prev = 0
    for cut in sorted(set(cuts)) + [len(segment)]:
        s, e = trim_span(text, start + prev, start + cut)
        if s < e:
            out.append((s, e))
        prev = cut


def _breaks_after(line: str, nxt: str, width: int) -> bool:
    """Whether a line break inside a prose block also ends a unit (vs. hard-wrapped prose)."""
    body = line.rstrip()
    follow = nxt.lstrip()
    if not body or not follow:
        return True
    if _LINE_END.search(body):
        return not _no_break_after(body.split()[-1], follow)
    # Page chrome (breadcrumbs, link bars, "Last edited by") never continues into content or back.
    if _chrome(body) or _chrome(follow):
        return True
    if body[-1] in ",;([{-–—/&+=" or follow[0].islower():
        return False
    # Short lines followed by a capitalised line are titles, nav entries or labels in extracted HTML;
    # lines near the block's wrap width are hard-wrapped prose.
    stripped = len(body.strip())
    return width < _WRAP_MIN or stripped < _SHORT_LINE or stripped < 0.7 * width


def _chrome(line: str) -> bool:
    # Single words are left to the wrap logic: a wrapped paragraph can end on one.
    return len(words(line)) >= 2 and is_noise(line)


def _table_starts(text: str, lines: list[tuple[int, int]], i: int) -> bool:
    """A table without outer pipes (GFM, or an HTML table as text) starts at line i: the next line
    is a separator or has as many cell pipes."""
    if i + 1 >= len(lines):
        return False
    line = text[lines[i][0] : lines[i][1]]
    nxt = text[lines[i + 1][0] : lines[i + 1][1]]
    cells = line.count("|")
    if not cells or nxt.count("|") != cells:
        return False
    return bool(_TABLE_SEP.match(nxt)) or (" | " in line and " | " in nxt)


def split_units(text: str) -> list[tuple[int, int, Kind]]:
    """Like split_sentences, with each unit's kind (heading, item, row, code, fence, rule, prose)."""
    lines = _line_spans(text)
    units: list[tuple[int, int, Kind]] = []
    i = 0
    n = len(lines)
    while i < n:
        ls, le = lines[i]
        line = text[ls:le]
        if not line.strip():
            i += 1
            continue
        kind = _line_kind(line)
        opening = _FENCE.match(line)
        if opening:
            fence = opening.group(1)
            s, e = trim_span(text, ls, le)
            units.append((s, e, "fence"))
            i += 1
            # Inside a fence every non-blank line is code, whatever it looks like.
            while i < n:
                cs, ce = lines[i]
                body = text[cs:ce]
                if body.strip().startswith(fence[0] * 3) and body.strip().strip(fence[0]) == "":
                    s, e = trim_span(text, cs, ce)
                    units.append((s, e, "fence"))
                    i += 1
                    break
                s, e = trim_span(text, cs, ce)
                if s < e:
                    units.append((s, e, "code"))
                i += 1
            continue
        if kind in ("heading", "row", "rule"):
            s, e = trim_span(text, ls, le)
            units.append((s, e, kind))
            i += 1
            continue
        if kind == "item":
            # An item owns the more-indented, non-structural lines that follow it (wrapped item text).
            end = le
            base = _indent(line)
            j = i + 1
            while j < n:
                cs, ce = lines[j]
                body = text[cs:ce]
                if not body.strip() or _indent(body) <= base or _line_kind(body) != "prose":
                    break
                end = ce
                j += 1
            s, e = trim_span(text, ls, end)
            units.append((s, e, "item"))
            i = j
            continue
        if _table_starts(text, lines, i):
            cells = line.count("|")
            while i < n and text[lines[i][0] : lines[i][1]].count("|") == cells:
                s, e = trim_span(text, *lines[i])
                units.append((s, e, "row"))
                i += 1
            continue
        # Prose block: consecutive prose lines up to a blank or structural line.
        j = i + 1
        while j < n:
            body = text[lines[j][0] : lines[j][1]]
            if not body.strip() or _line_kind(body) != "prose" or _table_starts(text, lines, j):
                break
            j += 1
        block = lines[i:j]
        width = max(len(text[a:b].strip()) for a, b in block)
        seg_start = block[0][0]
        for k, (a, b) in enumerate(block):
            last = k == len(block) - 1
            if last or _breaks_after(text[a:b], text[block[k + 1][0] : block[k + 1][1]], width):
                spans: list[tuple[int, int]] = []
                _split_prose(text, seg_start, b, spans)
                units.extend((s, e, "prose") for s, e in spans)
                if not last:
                    seg_start = block[k + 1][0]
        i = j
    return units


def split_sentences(text: str, *, inside_items: bool = False) -> list[tuple[int, int]]:
    """Sentence spans (start, end) into `text`, in order, non-overlapping, stripped of whitespace.

    Headings, list items (with their marker), table rows, code lines and fence lines are units of
    their own; prose splits at sentence ends but not after abbreviations or inside numbers and URLs.
    With `inside_items` a list item splits at its sentence ends too (the first keeps the marker):
    what an answer claims, sentence by sentence, rather than what a page quotes whole.
    """
    out: list[tuple[int, int]] = []
    for s, e, kind in split_units(text):
        if inside_items and kind == "item":
            _split_prose(text, s, e, out)
        else:
            out.append((s, e))
    return out


def unit_kind(unit: str) -> Kind:
    """Kind of a single unit judged from its own text (no surrounding context)."""
    return _line_kind(unit.split("\n", 1)[0]) if unit.strip() else "prose"


def strip_marker(unit: str, kind: Kind | None = None) -> str:
    """The unit without its heading hashes, bullet or number marker, or table-row outer pipes."""
    u = unit.strip()
    kind = kind or unit_kind(u)
    if kind == "row":
        return u.strip("|").strip()
    if kind == "heading":
        return u.lstrip("#").strip().rstrip("#").strip()
    if kind == "item":
        m = _MARKER.match(u)
        return u[m.end() :].strip() if m else u
    return u


# Page chrome, matched only in short units (a real sentence may mention "privacy policy").
_BOILERPLATE = re.compile(
    r"was this (?:page|article|answer) helpful|^last (?:edited|updated|modified|reviewed)\b"
    r"|^edit this page|^skip to (?:main )?content|^table of contents$|^on this page$"
    r"|all rights reserved|^(?:copyright\s*)?©|^copyright\s+\d{4}|^back to top|^jump to\b"
    r"|^view (?:source|history)|^print this page|^thanks for (?:your )?feedback|^rate this page"
    r"|^powered by|^cookie (?:settings|preferences)|^(?:sign|log) ?(?:in|out)\b|^share (?:this|on)\b"
    r"|^subscribe\b|^(?:next|previous|prev)(?: page| article)?\b"
    r"|^(?:yes|no)\s*/?\s*(?:yes|no)$|^(?:privacy policy|terms of (?:use|service))$",
    re.IGNORECASE,
)
# "Learn more" / "Read more about fees" is a link label; "Learn more below to see whether you qualify."
# is a sentence of the page, often the one that tells the reader what the page covers.
_MORE = re.compile(r"(?:read|learn) more\b", re.IGNORECASE)
_CRUMB_SPLIT = re.compile(r"\s+(?:>|\||/|·|•|→)\s+|\s*[›»]\s*")


def is_noise(sentence: str, kind: Kind | None = None) -> bool:
    """Navigation or boilerplate-looking unit: breadcrumbs, page chrome, separators, tiny fragments.

    `kind` is the unit's kind from split_units when known: a table row without outer pipes looks
    like a link bar on its own.
    """
    u = sentence.strip()
    if not u or not any(ch.isalnum() for ch in u):
        return True
    kind = kind or unit_kind(u)
    if kind in ("fence", "rule") or _TABLE_SEP.match(u):
        return True
    body = strip_marker(u, kind)
    tokens = words(body)
    if not tokens:
        return True
    # CJK writes a whole clause without spaces; count its characters as words.
    single = len(tokens) == 1 and len(_CJK.findall(tokens[0])) <= 1
    # "Yes." or "Nothing." after a question is its answer, not a fragment.
    answer_word = single and kind == "prose" and body[:1].isupper() and body.endswith((".", "!"))
    if single and kind not in ("item", "row", "code") and not answer_word:
        return True
    if len(tokens) <= 12 and _BOILERPLATE.search(body):
        return True
    if len(tokens) <= 12 and _MORE.match(body):
        return len(tokens) <= 3 or not body.rstrip(_CLOSERS).endswith((".", "!", "?"))
    if kind == "row":
        return False
    # Breadcrumbs and link bars: several short segments joined by separators, no sentence, no data.
    parts = [p for p in _CRUMB_SPLIT.split(body) if p.strip()]
    if len(parts) < 2 or body.rstrip(_CLOSERS).endswith((".", "!", "?")):
        return False
    if "›" in body or "»" in body:
        # Only breadcrumbs use these as separators; their entries may carry versions ("Flow 4.x to 5").
        return all(len(words(p)) <= 6 for p in parts)
    # A pipe-separated line with numbers is a table row without outer pipes, not a link bar.
    return all(len(words(p)) <= 4 for p in parts) and not any(ch.isdigit() for ch in body)
