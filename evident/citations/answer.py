"""Answers as cited sentences: parsing `text [url][url]` lines, rendering them back, checking them.

A "sentence" here is the paper's fact unit (§6.2): the text that precedes a citation group.
Framework-free, so the verify and postprocess nodes stay thin and this logic is tested alone.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from evident.alignment import AlignmentDecision, IndexCache, SourceDocument, align, overlap_n, quote_of
from evident.alignment.outline import document_path
from evident.models import Citation, Line, Sentence

# A bracketed absolute URL ("[https://…]", "[file:///…]") is a citation even when no retrieved
# document has it: a model that invents one must see it removed by verify, not left in the text.
_ABSOLUTE = re.compile(r"[a-zA-Z][a-zA-Z0-9+.-]*:[^\]\s]+")
# Any bracketed token without whitespace; it is a citation when it is one of the query's document
# ids (`[KB-1042]`, `[hr/leave.md]`) or an absolute URL, so "[Home]" or "[1]" stay text.
BRACKETED = re.compile(r"\[\s*([^\[\]\s]+)\s*\]")
BULLET = re.compile(r"^(\s*(?:[-*•]|\d{1,3}[.)])\s+)")
# The one sentence of an answer that needs no citation: "{PREFACE} <what was asked>. {PREFACE_TAIL}",
# written by the offline composer and asked of a model (prompts/generation.py), recognised by verify.
PREFACE = "The documentation does not explicitly state"
PREFACE_TAIL = "Here are some details from the documentation which may help:"


# A Markdown table is one unit: its lines (header, rule, rows) as its text, and the citations on the
# line after it. Cited inside a cell, a marker would be a cell of its own, which Markdown renderers
# drop when the header has fewer; after the table it cites every row.
_TABLE_LINE = re.compile(r"^\s*\|.*\|\s*$")
_TABLE_RULE = re.compile(r"^[\s|:-]*-[\s|:-]*$")


def is_table(text: str) -> bool:
    """Whether a unit's text is a Markdown table (every line a `| … |` row)."""
    lines = text.splitlines()
    return len(lines) > 1 and all(_TABLE_LINE.match(x) for x in lines)


def table_rows(text: str) -> list[str]:
    """A table unit's lines that hold text (its header and rows; not the `|---|` rule)."""
    return [x.strip() for x in text.splitlines() if x.strip() and not _TABLE_RULE.match(x)]


def _citations_only(body: str, known: Collection[str]) -> list[str] | None:
    """The cited ids of a line made of citation markers alone, else None."""
    urls = [m.group(1) for m in BRACKETED.finditer(body) if is_citation(m.group(1), known)]
    rest = BRACKETED.sub(lambda m: "" if is_citation(m.group(1), known) else m.group(0), body)
    return urls if urls and not rest.strip() else None


def is_citation(token: str, known: Collection[str] = ()) -> bool:
    """Whether a bracketed `token` cites a document: one of the `known` ids of this query (the
    retrieved and verified documents' urls, whatever their form) or an absolute URL."""
    return token in known or _ABSOLUTE.fullmatch(token) is not None


def known_ids(*groups: Iterable[Any]) -> frozenset[str]:
    """The document ids (`url` fields) of the given passages, decisions or documents (models or their JSON)."""
    urls = (item.get("url") if isinstance(item, Mapping) else getattr(item, "url", None) for g in groups for item in g)
    return frozenset(u for u in urls if isinstance(u, str) and u)


def citations_in(text: str, known: Collection[str] = ()) -> list[str]:
    """The cited document ids of `text` in order of appearance (repeats kept)."""
    return [m.group(1) for m in BRACKETED.finditer(text) if is_citation(m.group(1), known)]


def parse_answer(text: str, known: Collection[str] = ()) -> list[Line]:
    """Lines of cited units; `[x]` is a citation when `is_citation(x, known)`, otherwise text."""
    lines: list[Line] = []
    table: Sentence | None = None  # the last table read, until a line that is not blank or its citations
    for raw in text.splitlines():
        if _TABLE_LINE.match(raw):
            if table is not None and lines and lines[-1].sentences == [table]:
                table.text += "\n" + raw.strip()
            else:
                table = Sentence(text=raw.strip())
                lines.append(Line(sentences=[table]))
            continue
        if table is not None and raw.strip():
            cited = _citations_only(raw.strip(), known)
            table_unit, table = table, None
            if cited is not None:
                table_unit.urls.extend(cited)
                continue
        if not raw.strip():
            if lines and lines[-1].sentences:
                lines.append(Line())  # paragraph break
            continue
        m = BULLET.match(raw)
        prefix = m.group(1).lstrip() if m else ""
        body = raw[m.end():] if m else raw.strip()
        units: list[Sentence] = []
        pos = 0
        current: Sentence | None = None
        for cm in BRACKETED.finditer(body):
            if not is_citation(cm.group(1), known):
                continue
            between = body[pos:cm.start()]
            if current is not None and not between.strip():
                current.urls.append(cm.group(1))
            else:
                current = Sentence(text=between.strip(), urls=[cm.group(1)])
                units.append(current)
            pos = cm.end()
        tail = body[pos:].strip()
        if tail:
            units.append(Sentence(text=tail))
        units = [u for u in units if u.text or u.urls]
        if units:
            lines.append(Line(prefix=prefix, sentences=units))
    while lines and not lines[-1].sentences:
        lines.pop()
    return lines


def render_answer(lines: Sequence[Line]) -> str:
    """Back to text: repeated citation URLs after a sentence removed, one list item per line, a table's
    citations on a line of their own after it, then a paragraph break."""
    out: list[str] = []
    for line in lines:
        if not line.sentences:
            if out and out[-1]:
                out.append("")
            continue
        if len(line.sentences) == 1 and is_table(line.sentences[0].text):
            u = line.sentences[0]
            cites = "".join(f"[{x}]" for x in dict.fromkeys(u.urls)) + (" [unsupported]" if u.flagged else "")
            out.append(u.text + (f"\n\n{cites.strip()}" if cites else ""))
            if cites:
                out.append("")  # a paragraph ends the citations: the next line's text is not theirs
            continue
        parts: list[str] = []
        for u in line.sentences:
            urls = list(dict.fromkeys(u.urls))
            cites = "".join(f"[{x}]" for x in urls)
            flag = " [unsupported]" if u.flagged else ""
            text = u.text + flag
            parts.append(f"{text} {cites}".strip() if cites else text)
        out.append(line.prefix + " ".join(p for p in parts if p))
    return "\n".join(out).strip()


def sentences_in(lines: Iterable[Line]) -> Iterable[Sentence]:
    for line in lines:
        yield from line.sentences


def is_preface(unit: Sentence) -> bool:
    """Whether `unit` is the one sentence an answer may hold without a citation: the fixed `PREFACE` lead-in."""
    return not unit.urls and unit.text.startswith(PREFACE)


def hedged(lines: Iterable[Line]) -> bool:
    """Whether an answer hedges: it holds the `PREFACE` lead-in, so its cited passages only come closest to
    the question (the offline composer writes it on weak evidence, a model is asked to when the passages do
    not answer directly)."""
    return any(is_preface(u) for u in sentences_in(lines))


def support(text: str, decision: AlignmentDecision, n: int) -> float:
    """How well a verified passage supports a sentence: overlap_n(sentence, passage quote); a table,
    by its least supported row (rows a table shows together need not stand together in the source)."""
    parts = decision.quote.split(" … ") if decision.quote else []
    if is_table(text):
        return min((support(row, decision, n) for row in table_rows(text)), default=0.0)
    return max((overlap_n(text, q, n) for q in parts), default=0.0)


class SupportMeasure(Protocol):
    """How verify and postprocess judge a sentence against a passage: a score and its pass rule."""

    def score(self, text: str, decision: AlignmentDecision) -> float: ...

    def passes(self, score: float) -> bool: ...


@dataclass(frozen=True)
class NgramSupport:
    """The default measure: the paper's n-gram overlap against the passage quote, above `threshold`."""

    n: int
    threshold: float

    def score(self, text: str, decision: AlignmentDecision) -> float:
        return support(text, decision, self.n)

    def passes(self, score: float) -> bool:
        return score > self.threshold


def check_answer(
    lines: list[Line],
    verified: Sequence[AlignmentDecision],
    *,
    n: int,
    threshold: float,
    unsupported: str = "remove",
    measure: SupportMeasure | None = None,
) -> tuple[list[Line], list[str]]:
    """Keep only citations to verified passages that support their sentence (DESIGN §2 verify).

    A citation to a URL with no verified passage is dropped; a sentence left without support is
    repaired to the verified passage that supports it best, else removed (or flagged).
    Returns the checked lines and the sentences that were removed or flagged.
    """
    m = measure or NgramSupport(n, threshold)  # model-written answers pass their own measure
    by_url: dict[str, list[AlignmentDecision]] = {}
    for d in verified:
        by_url.setdefault(d.url, []).append(d)
    touched: list[str] = []
    for line in lines:
        kept: list[Sentence] = []
        for u in line.sentences:
            if not u.text:
                continue
            if is_preface(u):
                kept.append(u)
                continue
            scores = {
                url: max(m.score(u.text, d) for d in by_url[url]) for url in u.urls if url in by_url
            }
            good = [url for url, s in scores.items() if m.passes(s)]
            if not good:
                best = max(
                    ((m.score(u.text, d), i, d.url) for i, d in enumerate(verified)),
                    key=lambda t: (t[0], -t[1]),
                    default=(0.0, 0, ""),
                )
                if m.passes(best[0]):
                    good = [best[2]]
            if good:
                u.urls = good
                kept.append(u)
            else:
                touched.append(u.text)  # drops.UNSUPPORTED_SENTENCE
                if unsupported == "flag":
                    u.urls = [url for url in u.urls if url in by_url]
                    u.flagged = True
                    kept.append(u)
        line.sentences = kept
    return [ln for ln in lines if ln.sentences or not ln.prefix], touched  # blank = paragraph break


def resolve_citation(
    sentence: str,
    url: str,
    verified: Sequence[AlignmentDecision],
    documents: Sequence[SourceDocument],
    *,
    n: int,
    threshold: float,
    measure: SupportMeasure | None = None,
) -> Citation:
    """The passages of `url` that support `sentence`, and the exact spans of the sentence in them (of
    each of its rows, for a table)."""
    if is_table(sentence):
        rows = [resolve_citation(row, url, verified, documents, n=n, threshold=threshold, measure=measure)
                for row in table_rows(sentence)]
        page = next((d for d in documents if d.url == url), None)
        row_spans = sorted({span for row in rows for span in row.spans})
        return Citation(sentence=sentence, url=url, spans=row_spans,
                        passage_ids=list(dict.fromkeys(p for row in rows for p in row.passage_ids)),
                        quote=quote_of(page.content, row_spans) if page is not None else "",
                        heading_path=document_path(page, row_spans) if page is not None else [])
    m = measure or NgramSupport(n, threshold)
    doc = next((d for d in documents if d.url == url), None)
    mine = [d for d in verified if d.url == url]
    # Among equally supporting passages, the one quoting the sentence as written comes first: a short
    # sentence ("No.") is otherwise found as a word inside the first passage's text.
    written = " ".join(sentence.split())
    scored = sorted(
        ((m.score(sentence, d), written not in " ".join(d.quote.split()), i, d) for i, d in enumerate(mine)),
        key=lambda t: (-t[0], t[1], t[2]),
    )
    supporting = [d for s, _, _, d in scored if m.passes(s)] or [d for _, _, _, d in scored[:1]]
    spans: list[tuple[int, int]] = []
    if doc is not None and supporting:
        cache = IndexCache(max_chars=1_000_000)
        best_ov = -1.0
        for start, end in supporting[0].spans:
            region = doc.content[start:end]
            found = align(
                [{"passage_id": "s", "url": url, "content": sentence}],
                [{"url": url, "content": region}],
                n=n, threshold=threshold, cache=cache,
            )[0]
            if found.action != "dropped" and found.final_overlap > best_ov:
                best_ov = found.final_overlap
                spans = [(start + a, start + b) for a, b in found.spans]
        if not spans:
            spans = list(supporting[0].spans)
    quote = quote_of(doc.content, spans) if doc is not None else ""
    return Citation(sentence=sentence, url=url, passage_ids=[d.passage_id for d in supporting],
                    spans=spans, quote=quote, heading_path=document_path(doc, spans) if doc is not None else [])


def apply_glossary(lines: Sequence[Line], glossary: dict[str, str]) -> None:
    """Standardise company terms in the answer text (never inside quotes or URLs)."""
    if not glossary:
        return
    pattern = re.compile(
        r"(?<!\w)(" + "|".join(re.escape(k) for k in sorted(glossary, key=len, reverse=True)) + r")(?!\w)",
        re.IGNORECASE,
    )
    lookup = {k.casefold(): v for k, v in glossary.items()}
    for u in sentences_in(lines):
        u.text = pattern.sub(lambda m: lookup.get(m.group(0).casefold(), m.group(0)), u.text)
