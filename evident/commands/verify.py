"""`evident verify --docs DOCS.jsonl --passages PASSAGES.jsonl`: alignment on its own.

Reads retrieved documents (`{url, content}`, `text` accepted for `content`) and extracted passages
(`{passage_id, url, content}`), runs `evident.alignment.align` and prints one decision per passage:
a table for people, `{"decisions": [...]}` with `--json`.

Bad input never produces a traceback: one line on stderr naming the file and line, exit code 2.
This module imports only the alignment package (and `rich` for the table), never LangChain or
LangGraph, so the command starts fast.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

from evident.alignment import align
from evident.alignment.models import AlignmentDecision
from evident.commands.common import error_object, jsonl_lines, print_json, safe_text, span_notation

COMMAND = "verify"
USAGE_ERROR = 2
DRIFT_MODES = ("extended", "paper")
QUOTE_WIDTH = 90


class InputError(Exception):
    """Bad input: the message is the whole user-facing line (after "evident verify: ")."""


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"


def read_jsonl(path: Path) -> list[tuple[int, dict[str, Any]]]:
    """(line number, object) for each non-blank line of a JSONL file; `InputError` names the first
    bad line (not UTF-8, not JSON, not an object)."""
    if not path.exists():
        raise InputError(f"{path}: no such file")
    if path.is_dir():
        raise InputError(f"{path}: is a directory, expected a JSONL file")
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise InputError(f"{path}: cannot read: {exc.strerror or exc}") from None
    out: list[tuple[int, dict[str, Any]]] = []
    for number, value, error in jsonl_lines(raw):
        if isinstance(error, UnicodeDecodeError):
            raise InputError(f"{path}:{number}: not valid UTF-8")
        if isinstance(error, json.JSONDecodeError):
            raise InputError(f"{path}:{number}: invalid JSON: {error.msg} (column {error.colno})")
        if not isinstance(value, dict):
            raise InputError(f"{path}:{number}: expected a JSON object, got {_json_type(value)}")
        out.append((number, value))
    return out


def _field(path: Path, number: int, obj: dict[str, Any], names: tuple[str, ...], *,
           allow_int: bool = False, allow_empty: bool = True) -> str:
    """The first present of `names` (synonyms), checked to be a string."""
    for name in names:
        if name in obj:
            value = obj[name]
            if allow_int and isinstance(value, int) and not isinstance(value, bool):
                value = str(value)
            if not isinstance(value, str):
                kind = "a string or an integer" if allow_int else "a string"
                raise InputError(
                    f'{path}:{number}: field "{name}" must be {kind}, got {_json_type(value)}'
                )
            if not allow_empty and not value.strip():
                raise InputError(f'{path}:{number}: field "{name}" is empty')
            return value
    shown = f'"{names[0]}"' + "".join(f' (or "{alt}")' for alt in names[1:])
    raise InputError(f"{path}:{number}: missing field {shown}")


def load_documents(path: Path) -> list[dict[str, str]]:
    docs = []
    for number, obj in read_jsonl(path):
        url = _field(path, number, obj, ("url",), allow_empty=False)
        content = _field(path, number, obj, ("content", "text"))
        docs.append({"url": url, "content": content})
    if not docs:
        raise InputError(f"{path}: no documents (the file is empty)")
    return docs


def load_passages(path: Path) -> list[dict[str, str]]:
    passages = []
    for number, obj in read_jsonl(path):
        pid = _field(path, number, obj, ("passage_id",), allow_int=True, allow_empty=False)
        url = _field(path, number, obj, ("url",))
        content = _field(path, number, obj, ("content", "passage"))
        passages.append({"passage_id": pid, "url": url, "content": content})
    if not passages:
        raise InputError(f"{path}: no passages (the file is empty)")
    return passages


def _check_options(n: int, threshold: float, drift: str) -> None:
    if n < 1:
        raise InputError(f"--n must be at least 1 (got {n})")
    if math.isnan(threshold) or not 0.0 <= threshold <= 1.0:
        raise InputError(f"--threshold must be within [0, 1] (got {threshold})")
    if drift not in DRIFT_MODES:
        raise InputError(f"--drift must be 'extended' or 'paper' (got {drift!r})")


def _short(text: str, width: int = QUOTE_WIDTH) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1].rstrip() + "…"


_STYLE = {"kept": "green", "corrected": "magenta", "truncated": "yellow", "relinked": "cyan", "dropped": "red"}


def _print_table(decisions: list[AlignmentDecision]) -> None:
    # start-up time: rich (~30 ms) loads only for the table; --json output does without it
    from rich.console import Console
    from rich.markup import escape as escape_markup
    from rich.table import Table


    def escape(text: str) -> str:  # document text: neither rich markup nor terminal control codes
        return escape_markup(safe_text(text))

    table = Table(show_lines=False, header_style="bold")
    table.add_column("passage", overflow="fold", max_width=16)
    table.add_column("action", no_wrap=True)
    table.add_column("overlap", justify="right", no_wrap=True)
    table.add_column("url", overflow="fold", max_width=36)
    table.add_column("spans", overflow="fold", max_width=16)
    table.add_column("quote", overflow="fold")
    table.add_column("reason", overflow="fold", max_width=40)
    for d in decisions:
        overlap = f"{d.overlap:.2f}"
        if d.action == "relinked":
            overlap += f" → {d.final_overlap:.2f}"
        if d.action == "dropped":
            url = f"[dim](cited {escape(d.original_url) or 'no url'})[/]"
        elif d.action == "relinked":
            url = f"{escape(d.url)}\n[dim](cited {escape(d.original_url) or 'no url'})[/]"
        else:
            url = escape(d.url)
        spans = escape(span_notation(d.spans)) or "—"
        quote = escape(_short(d.quote)) if d.quote else "[dim]—[/]"
        # What the passage said where the source says otherwise: the quote shows the source.
        for sub in d.substitutions:
            quote += f"\n[dim]passage: {escape(sub.passage) or '—'} → source: {escape(sub.source) or '—'}[/]"
        table.add_row(escape(d.passage_id), f"[{_STYLE[d.action]}]{d.action}[/]", overlap, url, spans, quote,
                      escape(d.reason) or "—")
    console = Console()
    console.print(table)
    counts = {a: sum(d.action == a for d in decisions) for a in _STYLE}
    summary = ", ".join(f"{c} {a}" for a, c in counts.items() if c)
    console.print(f"{len(decisions)} passage{'s' if len(decisions) != 1 else ''}: {summary}",
                  highlight=False)


def run(docs: Path, passages: Path, *, n: int = 5, threshold: float = 0.7, drift: str = "extended",
        json_out: bool = False) -> int:
    """Run the command; returns the exit code (0, or 2 on bad input)."""
    try:
        _check_options(n, threshold, drift)
        documents = load_documents(Path(docs))
        items = load_passages(Path(passages))
    except InputError as exc:
        print(f"evident {COMMAND}: {safe_text(str(exc))}", file=sys.stderr)
        if json_out:
            print_json(error_object(COMMAND, str(exc)))
        return USAGE_ERROR

    decisions = align(items, documents, n=n, threshold=threshold, drift=drift)  # type: ignore[arg-type]
    if json_out:
        payload = {"decisions": [d.model_dump(mode="json") for d in decisions]}
        print_json(payload)
    else:
        _print_table(decisions)
    return 0
