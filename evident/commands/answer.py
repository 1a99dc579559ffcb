"""One answer as the commands print it: the `ask --json` shape (DESIGN §4) that `ask`, `ask --batch` and
`ask --stream` all print, the citations table, the exit code, and one question asked of the graph."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from rich.markup import escape
from rich.table import Table

from evident.alignment.outline import show_path
from evident.commands.common import safe_text, span_notation

if TYPE_CHECKING:
    from evident.models import Turn

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
        evidence=state.get("evidence") or "none",
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
    out.update(query=query if isinstance(query, str) else None, standalone_query="", status="error",
               evidence="none", answer="", citations=[], retrieved=[], passages=[], alignment=[], source_errors=[],
               model_errors=[], extraction_notes=[], generated_by="", timings_ms={}, error=message)
    return out


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


def status_line(res: dict[str, Any]) -> str:
    """The `Status:` line of a printed answer; a hedged answer says its evidence is weak."""
    weak = " (weak evidence: the documentation does not state it explicitly)" if res.get("evidence") == "weak" else ""
    return f"[bold]Status:[/] {escape(safe_text(res['status']))}{weak}"


def exit_code(res: dict[str, Any]) -> int:
    return ERROR_EXIT if res["status"] == "error" else 0


def print_warnings(console: Any, res: dict[str, Any]) -> None:
    """Each failing source or model of a result, one terminal-safe line each."""
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
    """Each citation's URL, character spans and the exact source text (markup and control characters escaped),
    under the heading path it sits in (dimmed: context, not part of the quote)."""
    table = Table(title="Citations", show_lines=True, expand=False)
    for col in ("#", "url", "spans", "source text"):
        table.add_column(col, overflow="fold")
    for i, c in enumerate(citations, 1):
        spans = span_notation(c["spans"])
        if c.get("span_base") == "chunk":  # a chunked retriever gave no position in the document
            spans += " in chunk"
        quote = escape(safe_text(c["quote"]))
        if c.get("heading_path"):
            quote = f"[dim]{escape(safe_text(show_path(c['heading_path'])))}[/dim]\n{quote}"
        table.add_row(str(i), escape(safe_text(c["url"])), escape(spans), quote)
    return table
