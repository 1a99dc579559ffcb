"""`evident ask --batch FILE`: one JSON line out per line in, in order; a bad line is that line's error.

Each line is `{"id", "query", "history"?}`; `history` (a conversation's earlier messages,
`[{"role": "user"|"assistant", "content"}]`, as in examples/followups.jsonl) makes the query that
conversation's next message, which the graph first rewrites into a standalone question.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, NamedTuple

from pydantic import TypeAdapter, ValidationError
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from evident.commands.answer import error_json, invoke, result_json
from evident.commands.common import QueryError, clean_query, fail, jsonl_lines, print_json, safe_text, warn
from evident.models import Turn


class BatchLine(NamedTuple):
    line: int
    id: Any
    query: str | None
    problem: str | None  # why the line cannot be asked (then `query` may be None)
    history: tuple[Turn, ...] = ()


def _history(value: Any) -> tuple[Turn, ...]:
    if value is None:
        return ()
    try:
        return tuple(TypeAdapter(list[Turn]).validate_python(value))
    except ValidationError:
        raise QueryError('"history" must be a list of {"role": "user" or "assistant", "content": text}') from None


def read_batch(batch: Path) -> list[BatchLine]:
    """Every non-blank line of `batch`, in order."""
    try:
        raw = batch.read_bytes()
    except OSError as exc:
        fail("ask", f"{batch}: cannot read: {exc}")
    items: list[BatchLine] = []
    for no, obj, error in jsonl_lines(raw):
        if isinstance(error, UnicodeDecodeError):
            items.append(BatchLine(no, None, None, f"{batch}:{no}: not valid UTF-8 text"))
        elif isinstance(error, json.JSONDecodeError):
            items.append(BatchLine(no, None, None, f"{batch}:{no}: invalid JSON ({error.msg})"))
        elif not isinstance(obj, dict):
            items.append(BatchLine(no, None, None, f"{batch}:{no}: expected a JSON object with id and query"))
        elif not isinstance(obj.get("query"), str):
            items.append(BatchLine(no, obj.get("id"), None, f'{batch}:{no}: missing string field "query"'))
        else:
            try:
                query = clean_query(obj["query"])
                # A line without an id is named by its line number, as a string like every id.
                items.append(BatchLine(no, obj.get("id", str(no)), query, None, _history(obj.get("history"))))
            except QueryError as exc:
                items.append(BatchLine(no, obj.get("id"), None, f"{batch}:{no}: {exc}"))
    if not items:
        fail("ask", f"{batch}: no queries (the file is empty)")
    return items


def run_batch(graph: Any, ctx: Any, batch: Path, json_out: bool, principal: dict[str, Any] | None = None) -> int:
    items = read_batch(batch)
    failures = 0
    err = Console(stderr=True)
    with Progress(TextColumn("[bold]answering"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=err, transient=False) as bar:
        task = bar.add_task("batch", total=len(items))
        for item in items:
            if item.problem is not None or item.query is None:
                problem = item.problem or "no query"
                res = error_json(item.query, problem, item.id, line=item.line)
                warn("ask", problem)
            else:
                state = invoke(graph, ctx, item.query, principal, item.history)
                res = result_json(state, item.query, item.id)
            failures += res["status"] == "error"
            if json_out:
                print_json(res)
            else:
                weak = " (weak evidence)" if res["evidence"] == "weak" else ""
                line = f"{item.id} {res['status']}{weak}: {res['answer'] or res.get('error', '')}"
                bar.console.print(safe_text(line), markup=False, highlight=False)
            bar.advance(task)
    if failures:
        warn("ask", f"{failures} of {len(items)} queries failed")
    return 1 if failures else 0
