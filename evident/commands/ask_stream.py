"""`evident ask --stream`: each step as it finishes (stderr) and the answer's tokens as they come (stdout).

The graph is streamed with `stream_mode=["updates", "messages", "values"]`:

- "updates": one line per finished step, from the same summaries the traces carry (evident/graph/tracing.py);
- "messages": the tokens of the generation call (LLM mode only: extraction calls are tagged
  `nostream`, and offline mode has no model, so no tokens: its answer is printed when it is final);
- "values": the state each step read (for its summary) and, at the end, the final state.

Tokens are the model's draft, before `verify` checks it. When verification changed the draft (a
sentence removed or flagged, a citation repaired), stderr says so and the verified answer follows on
stdout: the verified answer is always the last thing printed. With `--json`, stdout carries one
JSON object per event: `{"event": "step", "node", "summary"}`, `{"event": "token", "text"}`, and
finally `{"event": "result", ...}` with the `ask --json` fields.
"""

from __future__ import annotations

import sys
from typing import Any

from langchain_core.messages import AIMessage, AIMessageChunk
from rich.console import Console
from rich.markup import escape

from evident.commands.answer import citations_table, exit_code, failed_state, graph_inputs, print_warnings, result_json
from evident.commands.common import print_json, safe_text
from evident.graph.tracing import describe, summarize
from evident.llm.replies import text_of
from evident.nodes.names import GENERATE


def _is_answer_token(item: Any) -> bool:
    message, meta = item
    return isinstance(message, (AIMessage, AIMessageChunk)) and (meta or {}).get("langgraph_node") == GENERATE


def _same(a: str, b: str) -> bool:
    return " ".join(a.split()) == " ".join(b.split())


def run_stream(graph: Any, ctx: Any, question: str, principal: dict[str, Any] | None, json_out: bool) -> int:
    inputs = graph_inputs(question, principal)
    model = ctx.model if ctx.resolved_mode == "llm" else None
    state: dict[str, Any] = {}
    streamed: list[str] = []
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
            elif mode == "messages" and _is_answer_token(item):
                text = text_of(item[0])
                if not text:
                    continue
                streamed.append(text)
                if json_out:
                    print_json({"event": "token", "text": text})
                else:
                    sys.stdout.write(safe_text(text))
                    sys.stdout.flush()
    except Exception as exc:  # one clear line, as `ask` does, never a traceback
        final = failed_state(exc)
    res = result_json(final, question)
    if json_out:
        print_json({"event": "result", **res})
    else:
        _print_final(res, "".join(streamed))
    return exit_code(res)


def _print_final(res: dict[str, Any], draft: str) -> None:
    err = Console(stderr=True, highlight=False, soft_wrap=True)
    out = Console(highlight=False, soft_wrap=True)
    if draft:
        sys.stdout.write("\n")
    if res["status"] == "error":
        err.print(f"evident ask: {escape(safe_text(res.get('error') or 'the query failed'))}")
        return
    if draft and not _same(draft, res["answer"]):
        if res.get("generated_by") == "offline":
            # The streamed tokens were the model's draft; none of it stood, so the composer wrote this.
            err.print("[dim]· the model's draft was not used (nothing in it is supported by the verified "
                      "passages); the answer, composed from the passages:[/]")
        else:
            err.print("[dim]· verify changed the draft; the verified answer:[/]")
    if not draft or not _same(draft, res["answer"]):
        out.print(escape(safe_text(res["answer"])))
    err.print(f"[bold]Status:[/] {escape(safe_text(res['status']))}")
    if res.get("acl_dropped"):
        err.print(f"[dim]{res['acl_dropped']} retrieved document(s) hidden: you may not see them[/]")
    print_warnings(err, res)
    if res["citations"]:
        out.print(citations_table(res["citations"]))
