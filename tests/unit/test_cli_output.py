"""Terminal-safe text, query cleaning and graph input validation (issue 9, item 6)."""

from __future__ import annotations

import json
import unicodedata
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from evident.commands.common import QueryError, clean_query, print_json, safe_text
from evident.commands.index import ProgressLines
from evident.context import EvidentContext
from evident.graph import graph


@given(st.text())
def test_safe_text_never_contains_a_control_character(text: str) -> None:
    shown = safe_text(text)
    assert all(char in "\n\t" or not (ord(char) < 0x20 or 0x7F <= ord(char) <= 0x9F) for char in shown)
    assert not any("\ud800" <= char <= "\udfff" for char in shown)
    shown.encode("utf-8")  # printable on any UTF-8 terminal


def test_safe_text_shows_escapes_visibly_and_keeps_layout() -> None:
    assert safe_text("a\x1b[2Jb\x1b]0;title\x07c") == "a\\x1b[2Jb\\x1b]0;title\\x07c"
    assert safe_text("line one\r\nline\ttwo\rover") == "line one\nline\ttwo\\x0dover"
    assert safe_text("C1 \x9b CSI, bad \udcff byte, Grüße 休暇") == "C1 \\x9b CSI, bad \\udcff byte, Grüße 休暇"


@pytest.mark.parametrize(
    ("query", "cleaned"),
    [("plain question?", "plain question?"), ("red\x1b[31m text", "red text"),
     ("link \x1b]8;;http://x\x07here\x1b]8;;\x07 end", "link here end"), ("bell\x07 and\x00nul", "bell and nul"),
     ("tab\tand\nnewline", "tab\tand\nnewline")],
)
def test_clean_query_removes_escape_sequences_and_controls(query: str, cleaned: str) -> None:
    assert clean_query(query) == cleaned


def test_clean_query_rejects_undecodable_bytes() -> None:
    undecodable = b"caf\xe9 hours".decode("utf-8", "surrogateescape")
    with pytest.raises(QueryError, match="not valid UTF-8"):
        clean_query(undecodable)


def test_print_json_stays_valid_json_with_surrogates(capsys: pytest.CaptureFixture[str]) -> None:
    print_json({"query": "bad \udcff byte", "text": "esc \x1b"})
    assert json.loads(capsys.readouterr().out) == {"query": "bad \udcff byte", "text": "esc \x1b"}


@pytest.mark.parametrize(
    ("inputs", "message"),
    [({}, "the input has no query"), ({"query": None}, "the input has no query"),
     ({"query": 42}, "the query must be a string, not int"), ({"query": ["a"]}, "the query must be a string, not list"),
     ({"query": "a \udcff"}, "not valid UTF-8")],
)
def test_graph_input_without_a_string_query_is_a_clear_error(inputs: dict[str, Any], message: str,
                                                             examples: Path) -> None:
    out = graph.invoke(inputs, context=EvidentContext(corpus=[str(examples)]))
    assert out["status"] == "error" and message in out["error"]


@pytest.mark.parametrize(
    ("text", "shown"),
    [("a\u202eb", "a\\u202eb"), ("\u2066x\u2069", "\\u2066x\\u2069"), ("l\u200er\u200f", "l\\u200er\\u200f"),
     ("\u061c", "\\u061c"), ("zero\u200bwidth", "zero\\u200bwidth"), ("\ufeffbom", "\\ufeffbom"),
     ("soft\u00adhyphen", "soft\\xadhyphen"), ("line\u2028sep", "line\\u2028sep"),
     ("private \ue000 \U000f0000", "private \\ue000 \\U000f0000"), ("unassigned \u0378", "unassigned \\u0378"),
     ("\u200dleading joiner", "\\u200dleading joiner"), ("joiner at end\u200c", "joiner at end\\u200c")],
)
def test_safe_text_shows_bidi_and_other_invisible_characters_escaped(text: str, shown: str) -> None:
    assert safe_text(text) == shown


def test_safe_text_keeps_joiners_inside_words() -> None:
    for word in ("می\u200cخواهم", "क्\u200dष", "👨\u200d👩\u200d👧"):  # Persian ZWNJ, Devanagari ZWJ, an emoji family
        assert safe_text(word) == word


@given(st.text())
def test_safe_text_never_contains_a_format_or_invisible_character(text: str) -> None:
    hidden = {"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"}
    shown = safe_text(text)
    assert all(char in "\n\t\u200c\u200d" or unicodedata.category(char) not in hidden for char in shown)


def test_print_json_escapes_invisible_characters_and_round_trips(capsys: pytest.CaptureFixture[str]) -> None:
    data = {"answer": "a\u202eb \x9b c\u200bd 休暇", "title\u2066": "esc \x1b", "joined": "می\u200cخواهم"}
    print_json(data)
    out = capsys.readouterr().out
    assert json.loads(out) == data
    assert "\\u202e" in out and "\\u009b" in out and "\\u2066" in out and "休暇" in out
    assert not any(unicodedata.category(char) in {"Cc", "Cf"} for char in out.replace("\n", "").replace("\u200c", ""))


def test_progress_lines_where_no_bar_can_be_drawn(capsys: pytest.CaptureFixture[str]) -> None:
    now = [0.0]
    lines = ProgressLines("embedding", "documents", every_s=10, clock=lambda: now[0])
    for done, at in ((64, 4.0), (128, 11.0), (192, 15.0), (256, 22.0), (400, 30.5)):
        now[0] = at
        lines.update(done, 400)
    assert capsys.readouterr().err.splitlines() == [
        "evident index: embedding: 128 of 400 documents (32%), 11 s elapsed, about 23 s left",
        "evident index: embedding: 256 of 400 documents (64%), 22 s elapsed, about 12 s left",
        "evident index: embedding: 400 of 400 documents (100%), 30 s elapsed",
    ]
    quick = ProgressLines("reading corpus", "files", every_s=10, clock=lambda: 1.0)
    quick.update(3, 3)  # a run shorter than a period prints nothing
    assert capsys.readouterr().err == ""
