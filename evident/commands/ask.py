"""`evident ask`: answer one question from the configured documents (a JSONL batch: `ask_batch`;
streamed: `ask_stream`), and the `ask --json` shape all three print."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evident.commands.common import (
    QueryError,
    clean_query,
    fail,
    log_warnings_to_stderr,
    print_json,
    safe_text,
    span_notation,
)

if TYPE_CHECKING:
    from evident.conversation.rule import Turn

ERROR_EXIT = 2


def result_json(state: dict[str, Any], query: str, qid: Any = None) -> dict[str, Any]:
    """The `ask --json` shape of DESIGN §4, from a final graph state."""

    def dump(items: Any) -> list[Any]:
        return [i.model_dump(mode="json") if hasattr(i, "model_dump") else i for i in items or []]

    out: dict[str, Any] = {} if qid is None else {"id": qid}
    out.update(
        query=query,
        standalone_query=state.get("standalone_query") or query,
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
    out.update(query=query if isinstance(query, str) else None, standalone_query="", status="error", answer="",
               citations=[], retrieved=[], passages=[], alignment=[], source_errors=[],
               model_errors=[], extraction_notes=[], generated_by="", timings_ms={}, error=message)
    return out


def _context(corpus: list[Path] | None, config: Path | None, index: Path | None) -> Any:
    from evident.context import ConfigError, EvidentContext

    for path in corpus or []:
        if not path.exists():
            fail("ask", f"{path}: corpus path does not exist")
    try:
        ctx = EvidentContext.from_env(
            config, corpus=[str(p) for p in corpus] if corpus else None,
            index_path=str(index) if index else None,
        )
    except ConfigError as exc:
        fail("ask", str(exc))
    if not ctx.corpus and not ctx.sources and ctx.corpus_paths():
        print(f"evident ask: no --corpus: answering from the bundled examples ({ctx.corpus_paths()[0]}, a "
              "fictional company); pass --corpus PATH or --config evident.toml for your documents", file=sys.stderr)
    return ctx


def graph_inputs(query: str, principal: dict[str, Any] | None, history: Sequence[Turn] = ()) -> dict[str, Any]:
    """The graph's input for one question, asked as `principal` when one is given. With `history`
    (a conversation's earlier messages) the question is that conversation's next message."""
    inputs: dict[str, Any] = {"query": query}
    if history:
        turns = [{"role": t.role, "content": t.content} for t in history]
        inputs = {"messages": [*turns, {"role": "user", "content": query}]}
    if principal is not None:
        inputs["principal"] = principal
    return inputs


def failed_state(exc: Exception) -> dict[str, Any]:
    """The final state of a query the graph raised on: one line for the user, never a traceback."""
    return {"status": "error", "error": f"{type(exc).__name__}: {exc}"}


def exit_code(res: dict[str, Any]) -> int:
    return ERROR_EXIT if res["status"] == "error" else 0


def print_warnings(console: Any, res: dict[str, Any]) -> None:
    """Each failing source or model of a result, one terminal-safe line each."""
    from rich.markup import escape

    for e in res["source_errors"] + res["model_errors"]:
        console.print(f"[yellow]warning:[/] {escape(safe_text(e['source']))}: {escape(safe_text(e['message']))}")


def invoke(
    graph: Any, ctx: Any, query: str, principal: dict[str, Any] | None = None, history: Sequence[Turn] = ()
) -> dict[str, Any]:
    """The final state of one question (an error state, never an exception)."""
    try:
        return dict(graph.invoke(graph_inputs(query, principal, history), context=ctx))
    except Exception as exc:  # one failing query must not take the batch (or a traceback) with it
        return failed_state(exc)


def citations_table(citations: list[dict[str, Any]]) -> Any:
    """Each citation's URL, character spans and the exact source text (markup and control characters escaped)."""
    from rich.markup import escape
    from rich.table import Table

    table = Table(title="Citations", show_lines=True, expand=False)
    for col in ("#", "url", "spans", "source text"):
        table.add_column(col, overflow="fold")
    for i, c in enumerate(citations, 1):
        spans = span_notation(c["spans"])
        if c.get("span_base") == "chunk":  # a chunked retriever gave no position in the document
            spans += " in chunk"
        table.add_row(str(i), escape(safe_text(c["url"])), escape(spans), escape(safe_text(c["quote"])))
    return table


def _print_human(res: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.markup import escape

    out = Console(highlight=False, soft_wrap=True)
    out.print(f"[bold]Q:[/] {escape(safe_text(res['query']))}")
    out.print(f"[bold]Status:[/] {escape(safe_text(res['status']))}")
    print_warnings(out, res)
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
        res = result_json(invoke(graph, ctx, question, principal), question)
        if json_out:
            print_json(res)
        elif res["status"] == "error":
            fail("ask", res.get("error", "the query failed"))
        else:
            _print_human(res)
        return exit_code(res)
    from evident.commands.ask_batch import run_batch

    return run_batch(graph, ctx, batch, json_out, principal)
