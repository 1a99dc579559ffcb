"""The embedded windows of a page (`evident.embeddings.windows`): exact, ordered spans of whole sentences
or lines, that together hold every non-blank character of the text once, and the texts embedded for them.

Property tests over arbitrary text (sentences, lines, unicode, sentences longer than a window), then a few
concrete pages whose windows are known by hand.
"""

from __future__ import annotations

import re

from hypothesis import example, given
from hypothesis import strategies as st

from evident.embeddings.windows import (
    MAX_WINDOW_CHARS,
    WINDOW_WORDS,
    document_windows,
    passage_windows,
    window_text,
)

# The documented cut points, written out here rather than imported: a sentence ends at ., !, ?, :, ;
# (or their CJK forms) followed by whitespace, and a line at a newline. A window longer than its word
# budget may hold none of them inside.
_BOUNDARY = re.compile(r"[.!?。！？:;]\s|\n")

_WORDS = st.sampled_from(
    [
        "the",
        "key",
        "rotation",
        "grace",
        "period",
        "24",
        "hours",
        "Äiti",
        "naïve",
        "漢字",
        "e.g",
        "a",
        "Élan",
        "x-y",
        "2.5",
        "“quoted”",
        "emoji🙂",
        "end",
    ]
)
_ENDS = st.sampled_from([".", "!", "?", ":", ";", "。", "", ",", "..."])
_GAPS = st.sampled_from([" ", "  ", "\n", "\n\n", " \n", "\t", "\u00a0", "\u3000", "\r\n", "\n  "])


@st.composite
def _sentence(draw: st.DrawFn, max_words: int = 12) -> str:
    return " ".join(draw(st.lists(_WORDS, min_size=1, max_size=max_words))) + draw(_ENDS)


@st.composite
def _prose(draw: st.DrawFn) -> str:
    """Sentences and lines joined by assorted whitespace; now and then one longer than a whole window."""
    pieces = draw(st.lists(st.one_of(_sentence(), _sentence(max_words=150)), min_size=0, max_size=20))
    out = draw(st.sampled_from(["", " ", "\n", "  \n "]))  # text may open with blank space
    for piece in pieces:
        out += piece + draw(_GAPS)
    return out


# Arbitrary characters too: control characters, letters of any script, every kind of space.
_TEXT = st.one_of(
    _prose(),
    st.text(max_size=400),
    st.text(alphabet=st.sampled_from(list("ab .!?:;\n\t\u00a0\u2028\u3000。é漢")), max_size=300),
)


def _word_count(text: str) -> int:
    return len(text.split())


def _check_windows(content: str, windows: list[tuple[int, int]], words: int) -> None:
    """The properties the module docstring promises of `passage_windows(content, words=words)`."""
    previous_end = 0
    for start, end in windows:
        # In order, non-overlapping, non-empty, inside the text.
        assert 0 <= previous_end <= start < end <= len(content)
        assert content[start:end].strip()
        # Trimmed: a page's indentation, and the spaces or CRLF's "\r" before a line break, stay outside.
        assert not content[start].isspace() and not content[end - 1].isspace(), (start, end)
        previous_end = end
    # Every non-blank character in exactly one window (the spans do not overlap, so "at least one" and
    # "in the windows' order" together make it exactly one); only whitespace lies between windows.
    covered = [0] * len(content)
    for start, end in windows:
        for i in range(start, end):
            covered[i] += 1
    for i, char in enumerate(content):
        if not char.isspace():
            assert covered[i] == 1, (i, char)
    # At most `words` words, unless the window is one sentence or line that alone has more.
    for start, end in windows:
        text = content[start:end].strip()
        if _word_count(text) > words:
            assert not _BOUNDARY.search(text), text
    # Greedy: the next window starts where adding its first sentence would have gone over the budget,
    # so no window is cut shorter than it had to be.
    for (s1, e1), (s2, e2) in zip(windows, windows[1:], strict=False):
        following = content[s2:e2].strip()
        cut = _BOUNDARY.search(following)
        first_piece = following[: cut.start() + 1] if cut else following
        assert _word_count(content[s1:e1]) + _word_count(first_piece) > words, (content[s1:e1], first_piece)


@given(_TEXT)
@example("")
@example("One. Two.\nThree")
@example(" ".join(["word"] * 200) + ".")
@example("  hello")
@example(" ".join(["word"] * 60) + "\r\nNext line.")
def test_windows_are_ordered_exact_spans_that_hold_every_character(content: str) -> None:
    windows = passage_windows(content)
    _check_windows(content, windows, WINDOW_WORDS)
    # A text with no non-blank character has no window, and any other has at least one.
    assert (windows == []) == (not content.strip())


@given(_TEXT, st.integers(min_value=1, max_value=12))
def test_a_smaller_word_budget_keeps_the_same_properties(content: str, words: int) -> None:
    # Small budgets force many cuts: the greedy packing and the long-sentence exception are exercised.
    _check_windows(content, passage_windows(content, words=words), words)


@given(st.text(alphabet=st.sampled_from([" ", "\n", "\t", "\r", "\u00a0", "\u2028", "\u3000", "\x0c"]), max_size=50))
def test_blank_text_has_no_windows(content: str) -> None:
    assert passage_windows(content) == []


@given(st.text(max_size=80), st.sampled_from(["", "   ", "\n\t"]))
def test_a_page_with_no_text_is_one_window_of_its_title(title: str, content: str) -> None:
    spans, texts = document_windows(title, content)
    # Every page has a vector, even one with no text: its title's, or a placeholder when that is blank too.
    assert spans == [(0, 0)]
    assert texts == [" ".join(title.split()) or "(untitled)"]


@given(st.text(max_size=80), _TEXT)
def test_each_page_window_is_embedded_with_its_title_first(title: str, content: str) -> None:
    spans, texts = document_windows(title, content)
    if not content.strip():
        assert spans == [(0, 0)]
        return
    assert spans == passage_windows(content)
    assert texts == [window_text(title, content, s, e) for s, e in spans]


@given(st.text(max_size=80), _TEXT, st.data())
def test_window_text_is_the_title_then_the_body_capped(title: str, content: str, data: st.DataObject) -> None:
    start = data.draw(st.integers(min_value=0, max_value=len(content)))
    end = data.draw(st.integers(min_value=start, max_value=len(content)))
    text = window_text(title, content, start, end)
    head = " ".join(title.split())
    full_body = " ".join(content[start:end].split())
    if head:
        # The title is one line (its own whitespace folded), so it is read before the window's text.
        assert text.startswith(head + "\n")
        body = text[len(head) + 1 :]
    else:
        body = text
    assert len(body) <= MAX_WINDOW_CHARS
    assert body == full_body[:MAX_WINDOW_CHARS]


def test_a_long_window_is_cut_to_max_window_chars_after_the_title() -> None:
    content = "supercalifragilistic " * 200  # one "sentence" of 4,200 characters, 200 words
    [(start, end)] = passage_windows(content)
    text = window_text("Spelling", content, start, end)
    assert text.startswith("Spelling\n")
    assert len(text) == len("Spelling\n") + MAX_WINDOW_CHARS


def test_sentences_are_packed_into_windows_of_at_most_sixty_words() -> None:
    sentence = " ".join(["word"] * 24) + "."  # 25 words with its last
    content = f"{sentence} {sentence} {sentence}"
    windows = passage_windows(content)
    # 25 + 25 = 50 fits in 60; a third sentence would make 75, so it opens the second window.
    assert windows == [(0, 2 * len(sentence) + 1), (2 * len(sentence) + 2, len(content))]
    assert [content[s:e] for s, e in windows] == [f"{sentence} {sentence}", sentence]


def test_a_sentence_longer_than_a_window_is_a_window_of_its_own() -> None:
    long = " ".join(["long"] * 100) + "."
    content = f"Short one. {long} Short two."
    windows = [content[s:e] for s, e in passage_windows(content)]
    assert windows == ["Short one.", long, "Short two."]


def test_lines_are_cut_points_and_titles_head_every_window() -> None:
    content = "# Authentication\nThe default grace period is 24 hours.\nKeys expire after a year."
    assert [content[s:e] for s, e in passage_windows(content, words=6)] == [
        "# Authentication",
        "The default grace period is 24 hours.",
        "Keys expire after a year.",
    ]
    spans, texts = document_windows("  API   keys ", content)
    assert spans == [(0, len(content))]  # 13 words: one window at the default budget
    assert texts == ["API keys\n# Authentication The default grace period is 24 hours. Keys expire after a year."]
    assert window_text("", content, 17, 54) == "The default grace period is 24 hours."
