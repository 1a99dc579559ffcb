"""Property tests: a quote joins only pieces that read as one statement in the source.

Pages are generated with paragraphs, bullet lists and headings; passages are made of fragments of
two sentences. Fragments of distant sentences (two or more sentences apart, or in different
blocks) must never share a quote; fragments of neighbouring sentences of one paragraph, in the
page's order, may.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import pairwise

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from evident.alignment import QUOTE_JOINER, IndexCache, align
from evident.alignment.statement import reads_as_one_statement
from evident.alignment.tokenize import words

CASES = settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))

# Each page uses every content word once at most, so that where a fragment comes from is known;
# common words recur, so that short n-grams do occur in several places.
VOCAB = [f"{c}{v}{k}{w}" for c in "bdfgklmnprst" for v in "aeiou" for k in ("n", "r", "st", "") for w in "aeiou"]
COMMON = ["the", "of", "and", "to", "a"]


@dataclass
class Sentence:
    block: int
    index: int  # position within its block
    start: int
    end: int
    words: list[str]


@dataclass
class Page:
    text: str
    sentences: list[Sentence]

    def sentence_at(self, offset: int) -> Sentence | None:
        for s in self.sentences:
            if s.start <= offset <= s.end:
                return s
        return None


@st.composite
def pages(draw) -> Page:  # type: ignore[no-untyped-def]
    text = ""
    sentences: list[Sentence] = []
    stream = iter(draw(st.permutations(VOCAB)))
    for block in range(draw(st.integers(2, 6))):
        kind = draw(st.sampled_from(["paragraph", "paragraph", "list", "numbered", "heading"]))
        if kind == "heading":
            text += "## " + " ".join(next(stream) for _ in range(draw(st.integers(2, 5)))) + "\n\n"
            continue
        count = draw(st.integers(1 if kind == "paragraph" else 2, 5))
        for i in range(count):
            ws = [next(stream) if draw(st.integers(0, 3)) else draw(st.sampled_from(COMMON))
                  for _ in range(draw(st.integers(8, 18)))]
            body = ws[0].capitalize() + " " + " ".join(ws[1:]) + draw(st.sampled_from([".", "!", "?"]))
            if kind == "paragraph":
                text += (" " if i else "")
            else:
                text += "- " if kind == "list" else f"{i + 1}. "
            # Each list item is a block of its own: items never join each other.
            sentences.append(Sentence(block * 10 + (i if kind != "paragraph" else 0), i if kind == "paragraph" else 0,
                                      len(text), len(text) + len(body), ws))
            text += body + ("\n" if kind != "paragraph" else "")
        text += "\n" if kind != "paragraph" else "\n\n"
    return Page(text, sentences)


def bounds(draw, s: Sentence, n: int) -> tuple[int, int]:  # type: ignore[no-untyped-def]
    a = draw(st.integers(0, len(s.words) - n))
    return a, draw(st.integers(a + n, len(s.words)))


def fragment(draw, s: Sentence, n: int) -> list[str]:  # type: ignore[no-untyped-def]
    a, b = bounds(draw, s, n)
    return s.words[a:b]


def occurrences(seq: list[str], within: list[str]) -> int:
    return sum(within[i : i + len(seq)] == seq for i in range(len(within) - len(seq) + 1))


def distant(a: Sentence, b: Sentence) -> bool:
    return a.block != b.block or abs(a.index - b.index) >= 2


@CASES
@given(pages(), st.data(), st.sampled_from([" ", ". ", ", and ", QUOTE_JOINER, " ... "]), st.integers(3, 6))
def test_fragments_of_distant_sentences_never_share_a_quote(page: Page, data: st.DataObject, sep: str,
                                                            n: int) -> None:
    pairs = [(a, b) for a in page.sentences for b in page.sentences if a is not b and distant(a, b)]
    if not pairs:
        return
    first, second = data.draw(st.sampled_from(pairs))
    one, two = fragment(data.draw, first, n), fragment(data.draw, second, n)
    if page.sentences.index(second) == page.sentences.index(first) + 1 and (
            one[-1:] == first.words[-1:] and two[:1] == second.words[:1]):
        return  # the end of one block and the start of the next: a verbatim copy across the break
    passage = " ".join(one) + sep + " ".join(two)
    url = "https://docs.example/page"
    [d] = align([{"passage_id": "p", "url": url, "content": passage}], [{"url": url, "content": page.text}],
                n=n, cache=IndexCache())
    if d.action == "dropped":
        return
    page_words = words(page.text)
    if occurrences(one + two, page_words) == 0:
        assert d.action != "kept"  # at least one fragment is left out of the quote
    assert len(d.quote.split(QUOTE_JOINER)) == len(d.spans)
    for (_, end), (start, _) in pairwise(d.spans):
        left, right = page.sentence_at(end), page.sentence_at(start)
        assert left is not None and right is not None
        assert start >= end and not distant(left, right), (d.spans, d.quote)
    if occurrences(one, page_words) == occurrences(two, page_words) == 1:
        touched = {id(page.sentence_at(s)) for span in d.spans for s in span}
        assert not (id(first) in touched and id(second) in touched)


@CASES
@given(pages(), st.data(), st.sampled_from([" ", QUOTE_JOINER, " [...] "]))
def test_fragments_of_neighbouring_sentences_are_joined_in_source_order(page: Page, data: st.DataObject,
                                                                       sep: str) -> None:
    pairs = [(a, b) for a, b in pairwise(page.sentences) if a.block == b.block]
    if not pairs:
        return
    first, second = data.draw(st.sampled_from(pairs))
    (a1, b1), (a2, b2) = bounds(data.draw, first, 5), bounds(data.draw, second, 5)
    one, two = first.words[a1:b1], second.words[a2:b2]
    skipped = len(first.words) - b1 + a2  # source words between the two fragments
    url = "https://docs.example/page"
    [d] = align([{"passage_id": "p", "url": url, "content": " ".join(one) + sep + " ".join(two)}],
                [{"url": url, "content": page.text}], threshold=0.0, cache=IndexCache())
    assert d.action != "dropped" and all(a[1] <= b[0] for a, b in pairwise(d.spans))
    page_words = words(page.text)
    if occurrences(one, page_words) > 1 or occurrences(two, page_words) > 1:
        return  # a fragment also found elsewhere (common words only) may be quoted from there
    seam = [one[-1], two[0], *first.words[b1:], *second.words[:a2]]
    if sep == " " and any(w in COMMON for w in seam):
        return  # "the the" across the seam: where the passage left words out is ambiguous
    if sep == " " and 0 < skipped <= 2:
        # Words left out between the fragments without an ellipsis, few enough to be a substitution.
        assert d.action == "corrected", d
        assert [x.passage for x in d.substitutions] == [""]
        return
    assert d.action == "kept", d
    assert words(d.quote) == one + two


def test_block_and_sentence_boundaries() -> None:
    text = ("Alpha beta gamma. Delta epsilon zeta. Eta theta iota.\n\n## Kappa\n\n- Lambda mu\n- Nu xi\n"
            "<ul><li>Omicron pi</li><li>Rho sigma</li></ul> Version 4.2 of the tool, e.g. this one, works.")
    at = text.index
    assert reads_as_one_statement(text, at("beta") + 4, at("gamma"), 0)  # same sentence
    assert reads_as_one_statement(text, at("gamma") + 5, at("Delta"), 0)  # the next sentence
    assert not reads_as_one_statement(text, at("gamma") + 5, at("Eta"), 3)  # two sentences on
    assert not reads_as_one_statement(text, at("Delta"), at("alpha".capitalize()), 0)  # source order
    assert not reads_as_one_statement(text, at("iota") + 4, at("Kappa"), 0)  # a heading between
    assert not reads_as_one_statement(text, at("Lambda mu") + 9, at("Nu xi"), 0)  # list items
    assert not reads_as_one_statement(text, at("Omicron pi") + 10, at("Rho"), 0)  # HTML list items
    assert reads_as_one_statement(text, at("Version") + 7, at("works"), 8)  # "4.2" and "e.g." end nothing
    assert not reads_as_one_statement(text, at("beta") + 4, at("gamma"), 41)  # the gap is bounded
