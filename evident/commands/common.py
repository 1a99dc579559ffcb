"""Shared CLI plumbing: one-line errors on stderr, JSON on stdout, terminal-safe text and queries."""

from __future__ import annotations

import json
import logging
import re
import sys
import unicodedata
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, NamedTuple, NoReturn

import typer

from evident.settings import log_file

USAGE_ERROR = 2

# Printable ASCII, tab and newline are always safe; any other character is judged by its category.
_MAYBE_UNSAFE = re.compile(r"[^\t\n -~]")
# Characters a terminal acts on or a reader cannot see: controls (C0 but tab and newline, DEL, C1:
# 0x9b is a one-byte CSI on some terminals), format characters (bidi overrides and isolates reorder
# the text around them, so a quote can show other words than it holds; zero-width spaces, the BOM
# and soft hyphens hide inside words), lone surrogates (undecodable argument bytes, unprintable),
# private-use and unassigned code points (no agreed glyph), line and paragraph separators.
_INVISIBLE = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})
# ZWNJ and ZWJ spell words in Persian, Indic scripts and emoji sequences (as in doc_ids._JOINERS);
# between two letters, marks or symbols they stay, anywhere else they are shown escaped.
_JOINERS = frozenset({"\u200c", "\u200d"})
_JOINED = frozenset("LMS")
# Whole ESC sequences: CSI (ESC [ ... final byte), OSC and other strings (ESC ] P X ^ _ ... ST or
# BEL), and two-character escapes; a query loses them entirely rather than keeping their arguments.
_ESCAPE_SEQUENCE = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b[\]PX^_].*?(?:\x07|\x1b\\|$)|\x1b[ -~]", re.DOTALL)
_QUERY_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def safe_text(text: str) -> str:
    """`text` as it may reach a terminal: each control character shown as a visible escape.

    Documents, queries, file names and model output are untrusted; raw, an ESC could recolour,
    retitle or rewrite the terminal (a CSI can move the cursor over earlier lines, an OSC can set
    a clickable link), and a bidi override (U+202E) shows a quote's words in another order than
    the source holds them. Every human-output path of the CLI prints through this. Newlines and
    tabs stay; a CRLF line end becomes a newline; every other invisible character (`_INVISIBLE`;
    ZWJ/ZWNJ inside a word stay) becomes `\\xNN`, `\\uNNNN` or `\\UNNNNNNNN`.
    """
    return _MAYBE_UNSAFE.sub(_visible, text.replace("\r\n", "\n"))


def _hidden(match: re.Match[str]) -> bool:
    """Whether the matched character must not reach a terminal as itself."""
    char = match.group()
    if unicodedata.category(char) not in _INVISIBLE:
        return False
    if char not in _JOINERS:
        return True
    text, at = match.string, match.start()
    around = text[at - 1 : at] + text[at + 1 : at + 2]
    return len(around) < 2 or any(unicodedata.category(c)[0] not in _JOINED for c in around)


def _visible(match: re.Match[str]) -> str:
    if not _hidden(match):
        return match.group()
    code = ord(match.group())
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def _json_visible(match: re.Match[str]) -> str:
    """A JSON `\\u` escape of the matched character if it is hidden (it can only be inside a string)."""
    if not _hidden(match):
        return match.group()
    data = match.group().encode("utf-16-be", "surrogatepass")
    return "".join(f"\\u{int.from_bytes(data[i : i + 2], 'big'):04x}" for i in range(0, len(data), 2))


def span_notation(spans: Iterable[Sequence[int]]) -> str:
    """Character spans as every human output of the CLI writes them: `[start:end]`, comma-separated
    (a Python slice of the document's text, end exclusive)."""
    return ", ".join(f"[{start}:{end}]" for start, end in spans)


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


# Set from `--json` before a command runs (evident/cli.py): a script that asked for JSON reads stdout
# as JSON even when the command fails, so every error is then also a JSON object there.
_errors_as_json = False


def errors_as_json(on: bool) -> None:
    """Whether `fail` (and the CLI's usage errors) also print a JSON error object on stdout."""
    global _errors_as_json
    _errors_as_json = on


def error_object(command: str, message: str) -> dict[str, str]:
    """What `--json` prints for a command that failed: `{"command", "status": "error", "error"}`."""
    return {"command": command, "status": "error", "error": message}


def fail(command: str, message: str, code: int = USAGE_ERROR) -> NoReturn:
    """One line on stderr (and, under `--json`, the error object on stdout), then exit `code`."""
    print(f"evident {command}: {safe_text(message)}", file=sys.stderr)
    if _errors_as_json:
        print_json(error_object(command, message))
    raise typer.Exit(code)


def warn(command: str, message: str) -> None:
    print(f"evident {command}: warning: {safe_text(message)}", file=sys.stderr)


class _TerminalSafeFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return safe_text(super().format(record))


class _Ours(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return record.name == "evident" or record.name.startswith("evident.")


class _Theirs(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not _Ours().filter(record)


def log_warnings_to_stderr() -> None:
    """EvidenT's warnings (skipped files, a rebuilt index) on stderr, one terminal-safe line each; other
    libraries' log records and Python warnings (pypdf's on a malformed PDF) go to `log_file()`, not to the
    terminal: the file's skip warning is EvidenT's, in its words."""
    terminal = logging.StreamHandler()
    terminal.setFormatter(_TerminalSafeFormatter("evident: warning: %(message)s"))
    terminal.addFilter(_Ours())
    handlers: list[logging.Handler] = [terminal]
    path = log_file()
    to_file: logging.Handler
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        to_file = logging.FileHandler(path, encoding="utf-8", delay=True)  # opened at its first record
    except OSError:
        to_file = logging.NullHandler()  # a read-only home: the records are dropped, never printed
    to_file.setFormatter(logging.Formatter("%(asctime)s %(name)s %(levelname)s: %(message)s"))
    to_file.addFilter(_Theirs())
    handlers.append(to_file)
    logging.captureWarnings(True)
    logging.basicConfig(level=logging.WARNING, handlers=handlers)


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


def json_line(data: Any) -> str:
    """`data` as one line of JSON that is safe on a terminal and decodes to `data` unchanged.

    Readable text stays as it is (not `ensure_ascii`: a Japanese answer stays readable), but every
    character `safe_text` would escape is a `\\uNNNN` escape: `json.dumps` writes DEL, C1 controls,
    bidi overrides and lone surrogates (which cannot even be written as UTF-8) raw.
    """
    return _MAYBE_UNSAFE.sub(_json_visible, json.dumps(data, ensure_ascii=False))


def print_json(data: Any) -> None:
    sys.stdout.write(json_line(data) + "\n")
    sys.stdout.flush()
