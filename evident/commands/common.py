"""Shared CLI plumbing: one-line errors on stderr, JSON on stdout, terminal-safe text and queries."""

from __future__ import annotations

import json
import logging
import re
import sys
from collections.abc import Iterator
from typing import Any, NamedTuple, NoReturn

import typer

USAGE_ERROR = 2

# C0 controls except tab and newline, DEL, C1 controls (0x9b is a one-byte CSI on some terminals),
# and lone surrogates (undecodable bytes of a command line argument, which cannot be printed).
_TERMINAL_UNSAFE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff]")
# Whole ESC sequences: CSI (ESC [ ... final byte), OSC and other strings (ESC ] P X ^ _ ... ST or
# BEL), and two-character escapes; a query loses them entirely rather than keeping their arguments.
_ESCAPE_SEQUENCE = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b[\]PX^_].*?(?:\x07|\x1b\\|$)|\x1b[ -~]", re.DOTALL)
_QUERY_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def safe_text(text: str) -> str:
    """`text` as it may reach a terminal: each control character shown as a visible escape.

    Documents, queries, file names and model output are untrusted; raw, an ESC could recolour,
    retitle or rewrite the terminal (a CSI can move the cursor over earlier lines, an OSC can set
    a clickable link). Every human-output path of the CLI prints through this. Newlines and tabs
    stay; a CRLF line end becomes a newline; anything else becomes `\\xNN` (or `\\udcNN`).
    """
    return _TERMINAL_UNSAFE.sub(_visible, text.replace("\r\n", "\n"))


def _visible(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


class QueryError(ValueError):
    """A query that cannot be asked as given; `str()` is the one-line reason."""


def clean_query(query: str) -> str:
    """The query to ask: escape sequences removed, other control characters turned into spaces.

    Raises `QueryError` for text that is not valid UTF-8 (undecodable argument bytes arrive as lone
    surrogates): guessing what it meant would answer a question nobody asked.
    """
    if any("\ud800" <= char <= "\udfff" for char in query):
        raise QueryError("the query is not valid UTF-8 text")
    cleaned = _QUERY_CONTROLS.sub(" ", _ESCAPE_SEQUENCE.sub(" ", query))
    return " ".join(cleaned.split()) if cleaned != query else query


def fail(command: str, message: str, code: int = USAGE_ERROR) -> NoReturn:
    print(f"evident {command}: {safe_text(message)}", file=sys.stderr)
    raise typer.Exit(code)


def warn(command: str, message: str) -> None:
    print(f"evident {command}: warning: {safe_text(message)}", file=sys.stderr)


class _TerminalSafeFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return safe_text(super().format(record))


def log_warnings_to_stderr() -> None:
    """Library warnings (skipped files, a rebuilt index) on stderr, one terminal-safe line each."""
    handler = logging.StreamHandler()
    handler.setFormatter(_TerminalSafeFormatter("evident: warning: %(message)s"))
    logging.basicConfig(level=logging.WARNING, handlers=[handler])


class JsonlLine(NamedTuple):
    number: int
    value: Any = None  # the line's JSON value
    error: UnicodeDecodeError | json.JSONDecodeError | None = None  # why the line could not be read


def jsonl_lines(raw: bytes) -> Iterator[JsonlLine]:
    """Each non-blank line of a JSONL file's bytes (a UTF-8 BOM skipped), numbered from 1.

    Lines are split as bytes and decoded one by one, so an undecodable or broken line is that line's
    `error` and the lines after it are still read; each command decides what a bad line means.
    """
    for number, data in enumerate(raw.removeprefix(b"\xef\xbb\xbf").splitlines(), start=1):
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            yield JsonlLine(number, error=exc)
            continue
        if not text.strip():
            continue
        try:
            value = json.loads(text)
        except json.JSONDecodeError as exc:
            yield JsonlLine(number, error=exc)
            continue
        yield JsonlLine(number, value)


def print_json(data: Any) -> None:
    try:
        line = json.dumps(data, ensure_ascii=False)
        line.encode("utf-8")
    except UnicodeEncodeError:
        # Lone surrogates cannot be written as UTF-8; \u escapes keep the line valid JSON.
        line = json.dumps(data, ensure_ascii=True)
    sys.stdout.write(line + "\n")
    sys.stdout.flush()
