"""`evident ask`: answer one question from the configured documents (a JSONL batch: `ask_batch`;
streamed: `ask_stream`; what all three print: `answer`)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from evident.commands.answer import citations_table, exit_code, invoke, print_warnings, result_json, status_line
from evident.commands.common import (
    QueryError,
    clean_query,
    fail,
    log_warnings_to_stderr,
    print_json,
    safe_text,
)
from evident.context import EvidentContext
from evident.embeddings.prefetch import embed_ahead
from evident.settings import ConfigError, environment_value, export_environment


def _one_blas_thread() -> None:
    # OpenBLAS starts a thread per core when numpy loads, about 0.1 s of a cold `ask` on 2 cores; an
    # answer needs a few small vector products, as fast on one thread. A value the user set stays.
    if environment_value("OPENBLAS_NUM_THREADS") is None:
        export_environment("OPENBLAS_NUM_THREADS", "1")


def _context(corpus: list[Path] | None, config: Path | None, index: Path | None) -> Any:
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


def _print_human(res: dict[str, Any]) -> None:
    out = Console(highlight=False, soft_wrap=True)
    out.print(f"[bold]Q:[/] {escape(safe_text(res['query']))}")
    out.print(status_line(res))
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
    _one_blas_thread()  # before anything imports numpy
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
    # The question's vector is made on another core while LangGraph loads (evident/embeddings/prefetch.py).
    ahead = embed_ahead(ctx, question) if question is not None and batch is None else None
    # start-up order: after _one_blas_thread (numpy loads with the graph) and after bad input has failed fast
    from evident.graph import graph

    if ahead is not None:
        ahead.collect()  # the vector, into the cache the retrieve step reads; else that step embeds it

    if batch is None and stream:
        # The batch and streaming drivers are imported when asked for: a single question does not pay for them.
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
    # start-up time: a single question does not load the batch driver
    from evident.commands.ask_batch import run_batch

    return run_batch(graph, ctx, batch, json_out, principal)
