"""`evident ask`: answer one question, or a JSONL batch, from the configured documents."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from evident.commands.common import QueryError, clean_query, fail, log_warnings_to_stderr, print_json, safe_text, warn

ERROR_EXIT = 2


def result_json(state: dict[str, Any], query: str, qid: Any = None) -> dict[str, Any]:
    """The `ask --json` shape of DESIGN §4, from a final graph state."""

    def dump(items: Any) -> list[Any]:
        return [i.model_dump(mode="json") if hasattr(i, "model_dump") else i for i in items or []]

    out: dict[str, Any] = {} if qid is None else {"id": qid}
    out.update(
        query=query,
        status=state.get("status", "error"),
        answer=state.get("answer", ""),
        citations=dump(state.get("citations")),
        retrieved=dump(state.get("retrieved")),
        passages=dump(state.get("passages")),
        alignment=dump(state.get("alignment")),
        source_errors=dump(state.get("source_errors")),
        source_runs=dump(state.get("source_runs")),
        model_errors=dump(state.get("model_errors")),
        extraction_notes=list(state.get("extraction_notes") or []),
        generated_by=state.get("generated_by", ""),
        timings_ms=state.get("timings_ms", {}),
    )
    if state.get("error"):
        out["error"] = state["error"]
    return out


def error_json(query: Any, message: str, qid: Any = None, line: int | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {} if qid is None else {"id": qid}
    if line is not None:
        out["line"] = line
    out.update(query=query if isinstance(query, str) else None, status="error", answer="",
               citations=[], retrieved=[], passages=[], alignment=[], source_errors=[],
               model_errors=[], extraction_notes=[], generated_by="", timings_ms={}, error=message)
    return out


def _context(corpus: list[Path] | None, config: Path | None, index: Path | None) -> Any:
    from evident.context import ConfigError, EvidentContext

    for path in corpus or []:
        if not path.exists():
            fail("ask", f"{path}: corpus path does not exist")
    try:
        return EvidentContext.from_env(
            config, corpus=[str(p) for p in corpus] if corpus else None,
            index_path=str(index) if index else None,
        )
    except ConfigError as exc:
        fail("ask", str(exc))


def _invoke(graph: Any, ctx: Any, query: str, principal: dict[str, Any] | None = None) -> dict[str, Any]:
    inputs: dict[str, Any] = {"query": query} if principal is None else {"query": query, "principal": principal}
    try:
        return dict(graph.invoke(inputs, context=ctx))
    except Exception as exc:  # one failing query must not take the batch (or a traceback) with it
        return {"status": "error", "error": f"{type(exc).__name__}: {exc}"}


def citations_table(citations: list[dict[str, Any]]) -> Any:
    """Each citation's URL, character spans and the exact source text (markup and control characters escaped)."""
    from rich.markup import escape
    from rich.table import Table

    table = Table(title="Citations", show_lines=True, expand=False)
    for col in ("#", "url", "spans", "source text"):
        table.add_column(col, overflow="fold")
    for i, c in enumerate(citations, 1):
        spans = ", ".join(f"[{s}:{e}]" for s, e in c["spans"])
        table.add_row(str(i), escape(safe_text(c["url"])), escape(spans), escape(safe_text(c["quote"])))
    return table


def _print_human(res: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.markup import escape

    out = Console(highlight=False, soft_wrap=True)
    out.print(f"[bold]Q:[/] {escape(safe_text(res['query']))}")
    out.print(f"[bold]Status:[/] {escape(safe_text(res['status']))}")
    for e in res["source_errors"] + res["model_errors"]:
        out.print(f"[yellow]warning:[/] {escape(safe_text(e['source']))}: {escape(safe_text(e['message']))}")
    out.print()
    out.print(escape(safe_text(res["answer"])))
    if res["citations"]:
        out.print()
        out.print(citations_table(res["citations"]))
    times = res.get("timings_ms") or {}
    if times:
        out.print(f"[dim]{' · '.join(f'{k} {v:.0f} ms' for k, v in times.items())}[/]")


def run(
    question: str | None,
    *,
    corpus: list[Path] | None,
    config: Path | None,
    index: Path | None,
    batch: Path | None,
    json_out: bool,
    principal: dict[str, Any] | None = None,
    stream: bool = False,
) -> int:
    log_warnings_to_stderr()
    if batch is not None and question is not None:
        fail("ask", "give either a QUESTION or --batch FILE, not both")
    if stream and batch is not None:
        fail("ask", "--stream answers one QUESTION; it cannot be combined with --batch")
    if batch is None and question is None:
        fail("ask", 'missing QUESTION (evident ask "How do I …?") or --batch FILE')
    if batch is not None and not batch.is_file():
        fail("ask", f"{batch}: no such file")
    if question is not None:
        try:
            question = clean_query(question)
        except QueryError as exc:
            fail("ask", str(exc))
    ctx = _context(corpus, config, index)
    from evident.graph import graph

    if batch is None and stream:
        from evident.commands.ask_stream import run_stream

        assert question is not None
        return run_stream(graph, ctx, question, principal, json_out)
    if batch is None:
        assert question is not None
        res = result_json(_invoke(graph, ctx, question, principal), question)
        if json_out:
            print_json(res)
        elif res["status"] == "error":
            fail("ask", res.get("error", "the query failed"))
        else:
            _print_human(res)
        return ERROR_EXIT if res["status"] == "error" else 0
    return _run_batch(graph, ctx, batch, json_out, principal)


def _read_batch(batch: Path) -> list[tuple[int, Any, Any, str | None]]:
    """(line number, id, query, problem) for every non-blank line."""
    try:
        raw = batch.read_bytes()
    except OSError as exc:
        fail("ask", f"{batch}: cannot read: {exc}")
    items: list[tuple[int, Any, Any, str | None]] = []
    # Lines are split as bytes and decoded one by one: one undecodable line is that line's error.
    for no, data in enumerate(raw.removeprefix(b"\xef\xbb\xbf").splitlines(), 1):
        try:
            line = data.decode("utf-8")
        except UnicodeDecodeError:
            items.append((no, None, None, f"{batch}:{no}: not valid UTF-8 text"))
            continue
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            items.append((no, None, None, f"{batch}:{no}: invalid JSON ({exc.msg})"))
            continue
        if not isinstance(obj, dict):
            items.append((no, None, None, f"{batch}:{no}: expected a JSON object with id and query"))
        elif not isinstance(obj.get("query"), str):
            items.append((no, obj.get("id"), None, f'{batch}:{no}: missing string field "query"'))
        else:
            try:
                items.append((no, obj.get("id", no), clean_query(obj["query"]), None))
            except QueryError as exc:
                items.append((no, obj.get("id"), None, f"{batch}:{no}: {exc}"))
    if not items:
        fail("ask", f"{batch}: no queries (the file is empty)")
    return items


def _run_batch(graph: Any, ctx: Any, batch: Path, json_out: bool, principal: dict[str, Any] | None = None) -> int:
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    items = _read_batch(batch)
    failures = 0
    err = Console(stderr=True)
    with Progress(TextColumn("[bold]answering"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=err, transient=False) as bar:
        task = bar.add_task("batch", total=len(items))
        for no, qid, query, problem in items:
            if problem is not None:
                res = error_json(query, problem, qid, line=no)
                warn("ask", problem)
            else:
                res = result_json(_invoke(graph, ctx, query, principal), query, qid)
            failures += res["status"] == "error"
            if json_out:
                print_json(res)
            else:
                line = f"{qid} {res['status']}: {res['answer'] or res.get('error', '')}"
                bar.console.print(safe_text(line), markup=False, highlight=False)
            bar.advance(task)
    if failures:
        warn("ask", f"{failures} of {len(items)} queries failed")
    return 1 if failures else 0
