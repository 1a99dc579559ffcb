"""`evident ask --stream`: each step as it finishes (stderr), then the verified answer (stdout).

The graph is streamed with `stream_mode=["updates", "messages", "values"]`:

- "updates": one line per finished step, from the same summaries the traces carry (evident/graph/tracing.py);
- "messages": the verified answer, whole, as `postprocess` adds it to the conversation. Model calls are
  tagged `nostream` (extraction, rewrite, and generation: its reply is a draft `verify` may still change),
  so no unverified text is ever printed;
- "values": the state each step read (for its summary) and, at the end, the final state.

With `--json`, stdout carries one JSON object per event: `{"event": "step", "node", "summary"}`,
`{"event": "answer", "text"}` (the verified answer) and finally `{"event": "result", ...}` with the
`ask --json` fields.
"""

from __future__ import annotations

import sys
from typing import Any

from langchain_core.messages import AIMessage
from rich.console import Console
from rich.markup import escape

from evident.commands.answer import (
    citations_table,
    exit_code,
    failed_state,
    graph_inputs,
    print_warnings,
    result_json,
    status_line,
)
from evident.commands.common import print_json, safe_text
from evident.graph.tracing import describe, summarize
from evident.llm.replies import text_of
from evident.nodes.names import POSTPROCESS


def _verified_answer(item: Any) -> str | None:
    """The text of the graph's answer message (what `postprocess` adds to `messages`), else None."""
    message, meta = item
    if not isinstance(message, AIMessage) or (meta or {}).get("langgraph_node") != POSTPROCESS:
        return None
    return text_of(message) if (message.additional_kwargs or {}).get("status") != "error" else None


def run_stream(graph: Any, ctx: Any, question: str, principal: dict[str, Any] | None, json_out: bool) -> int:
    inputs = graph_inputs(question, principal)
    model = ctx.model if ctx.resolved_mode == "llm" else None
    state: dict[str, Any] = {}
    shown = ""
    final: dict[str, Any] = {}
    try:
        for mode, item in graph.stream(inputs, context=ctx, stream_mode=["updates", "messages", "values"]):
            if mode == "values":
                state = final = dict(item)
            elif mode == "updates":
                for node, update in item.items():
                    summary = summarize(node, update, state=state, settings=ctx, model=model)
                    if json_out:
                        print_json({"event": "step", "node": node, "summary": summary})
                    else:
                        print(f"· {safe_text(describe(node, summary))}", file=sys.stderr, flush=True)
            elif mode == "messages" and (text := _verified_answer(item)):
                shown = text
                if json_out:
                    print_json({"event": "answer", "text": text})
                else:
                    Console(highlight=False, soft_wrap=True).print(escape(safe_text(text)))
    except Exception as exc:  # one clear line, as `ask` does, never a traceback
        final = failed_state(exc)
    res = result_json(final, question)
    if json_out:
        print_json({"event": "result", **res})
    else:
        _print_final(res, shown)
    return exit_code(res)


def _print_final(res: dict[str, Any], shown: str) -> None:
    err = Console(stderr=True, highlight=False, soft_wrap=True)
    out = Console(highlight=False, soft_wrap=True)
    if res["status"] == "error":
        err.print(f"evident ask: {escape(safe_text(res.get('error') or 'the query failed'))}")
        return
    if shown != res["answer"]:  # not printed yet: the run ended before its answer message
        out.print(escape(safe_text(res["answer"])))
    err.print(status_line(res))
    if res.get("acl_dropped"):
        err.print(f"[dim]{res['acl_dropped']} retrieved document(s) hidden: you may not see them[/]")
    print_warnings(err, res)
    if res["citations"]:
        out.print(citations_table(res["citations"]))
