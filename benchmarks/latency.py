"""End-to-end latency of the EvidenT graph (LLM mode) against the single-call baseline.

    python benchmarks/latency.py [--runs 5] [--scale 0.25] [--ttft 0.25] [--prefill 6000] [--decode 50]

Both sides run for real: the compiled EvidenT graph and, for the baseline, one direct-prompting call
(paper App. C.1) over the same retrieved documents, both through `ChatOpenAI` against the scripted
OpenAI-compatible test server (tests/support/openai_server.py). Only the model is simulated:

- time to first token = `ttft` + prompt tokens / `prefill` (tokens per second);
- then the reply's tokens at `decode` tokens per second.

Two server capacities are measured, because they decide what parallel extraction buys:

- "parallel": every request gets its own prefill capacity (several replicas, or a server with spare
  compute): batches extracted in parallel cost about as much as one short call;
- "shared": one server whose prefill is compute-bound; concurrent prompts queue for it (FIFO), while
  decoding proceeds concurrently (continuous batching). This is the pessimistic case.

Scenarios: "short" (4 documents, about 2.4k tokens, one extraction call) and "long" (8 documents of
about 5k tokens; with the default 8k-token budget they go to 8 parallel extraction calls). Each
extraction call returns 2 verbatim sentences; both answers are about 150 tokens long. Every run
uses freshly generated documents, so alignment never benefits from a warm per-document cache.

"Outside model calls" is the run's wall time minus the union of the intervals during which the
server (in a child process, so it never competes with the pipeline for the GIL) was busy with one of
its requests: the pipeline's own overhead (retrieval, prompt rendering,
token counting, batching, JSON parsing, alignment, verification, post-processing, the client and
LangGraph). Simulated times are multiplied by `--scale` to keep the run short; ratios are
unaffected, overheads are real time. Medians over `--runs` runs after one warm-up run.
Targets (issue 4): overhead under 50 ms per query; on long documents, EvidenT within 10% of the
baseline's latency.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from langchain_core.callbacks import CallbackManagerForRetrieverRun  # noqa: E402
from langchain_core.documents import Document  # noqa: E402
from langchain_core.retrievers import BaseRetriever  # noqa: E402

from tests.support.openai_server import ChatRequest, OpenAIServer, Reply  # noqa: E402

_WORDS = (
    "pipeline route workspace token quota region replica invoice ledger approval policy manager audit "
    "export schedule retention backup gateway consumer publisher schema field record batch window limit "
    "request response header timeout retry credential scope role team quarter report release version "
    "console cluster node queue topic partition offset metric alert threshold incident review owner"
).split()
QUERY = "How are pipeline exports scheduled and which limits apply to them?"
ANSWER_CHARS = 600  # about 150 tokens: the same answer length for EvidenT and the baseline
PASSAGES_PER_CALL = 2  # verbatim sentences each extraction call returns


class Docs(BaseRetriever):
    docs: list[Document]

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        return self.docs


def make_docs(n_docs: int, tokens_each: int, seed: int) -> list[Document]:
    """Documents of plausible enterprise prose (sentences of varied words in paragraphs), fresh per seed."""
    rng = random.Random(seed)
    docs = []
    for d in range(n_docs):
        paras, chars = [], 0
        while chars < tokens_each * 4:
            sentences = []
            for _ in range(rng.randint(3, 6)):
                words = [rng.choice(_WORDS) for _ in range(rng.randint(8, 18))]
                words.insert(rng.randint(0, len(words)), str(rng.randint(2, 900)))
                sentences.append(" ".join(words).capitalize() + ".")
            para = " ".join(sentences)
            paras.append(para)
            chars += len(para) + 2
        docs.append(Document(page_content=f"# Page {seed}-{d}\n\n" + "\n\n".join(paras),
                             metadata={"url": f"https://docs.example/{seed}/{d}", "title": f"Page {d}",
                                       "source_type": "docs"}))
    return docs


# -- the simulated model ----------------------------------------------------------------------------


@dataclass
class Sim:
    ttft: float
    prefill: float
    decode: float
    scale: float
    shared: bool

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._free_at = 0.0

    def latency(self, request: ChatRequest) -> dict[str, float]:
        prefill = request.prompt_tokens / self.prefill * self.scale
        if self.shared:
            with self._lock:  # one compute-bound prefill engine, first come first served
                now = time.monotonic()
                start = max(now, self._free_at)
                self._free_at = start + prefill
                wait = self._free_at - now
        else:
            wait = prefill
        return {"ttft_s": self.ttft * self.scale + wait, "tokens_per_s": self.decode / self.scale}


def responder(sim: Sim) -> Any:
    from tests.support.llm import echo_responder, prompt_documents

    echo = echo_responder(extract_sentences=PASSAGES_PER_CALL)

    def respond(request: ChatRequest) -> Reply:
        timing = sim.latency(request)
        if request.kind == "extract":
            # The evidence for one question is a few passages per call, however many documents it reads.
            found = json.loads(echo(request).content or "{}")["collected_passages"][:PASSAGES_PER_CALL]
            return Reply(content=json.dumps({"collected_passages": found}), **timing)
        if "<passage>" in request.text:  # EvidenT's generation call
            lines = (echo(request).content or "").splitlines()
        else:  # the direct-prompting baseline: first sentences of the documents, numbered citations
            lines = []
            for i, (_, content) in enumerate(prompt_documents(request.text), 1):
                first = next((s.strip() + "." for s in content.split(".") if len(s.split()) > 5), "")
                lines.append(f"{first} [{i}]")
        text, used = "", 0
        for line in lines:
            if used >= ANSWER_CHARS:
                break
            text += line + "\n"
            used += len(line)
        if "<passage>" not in request.text:
            shown = prompt_documents(request.text)
            text += "References:\n" + "".join(f"[{i}] {u}\n" for i, (u, _) in enumerate(shown, 1))
        return Reply(content=text.strip(), **timing)

    return respond


# -- the server, in its own process ------------------------------------------------------------------


def _serve(params: dict[str, Any], urls: Any, stop: Any) -> None:
    with OpenAIServer(responder(Sim(**params))) as server:
        urls.put(server.base_url)
        stop.wait()


class RemoteServer:
    """The test server in a child process, so that its work never competes with the measured
    pipeline for the GIL. Request times come back over `GET /_requests` (CLOCK_MONOTONIC is
    system-wide, so the child's times compare with ours)."""

    def __init__(self, sim: Sim) -> None:
        import multiprocessing

        ctx = multiprocessing.get_context("spawn")
        self._urls, self._stop = ctx.Queue(), ctx.Event()
        params = {k: getattr(sim, k) for k in ("ttft", "prefill", "decode", "scale", "shared")}
        self._proc = ctx.Process(target=_serve, args=(params, self._urls, self._stop), daemon=True)

    def __enter__(self) -> RemoteServer:
        self._proc.start()
        self.base_url: str = self._urls.get(timeout=60)
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._proc.join(timeout=30)

    def requests(self) -> list[dict[str, Any]]:
        import httpx

        root = self.base_url.rsplit("/v1", 1)[0]
        return httpx.get(f"{root}/_requests", timeout=10).json()["requests"]


# -- measurement ------------------------------------------------------------------------------------


def busy(requests: list[dict[str, Any]], start: float, end: float) -> float:
    """Seconds within [start, end] during which the server was answering at least one request."""
    spans = sorted((max(r["started"], start), min(r["finished"] or end, end)) for r in requests
                   if r["started"] < end and (r["finished"] or end) > start)
    total, cur_s, cur_e = 0.0, None, None
    for s, e in spans:
        if cur_e is None or s > cur_e:
            if cur_e is not None:
                total += cur_e - cur_s  # type: ignore[operator]
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    if cur_e is not None:
        total += cur_e - cur_s  # type: ignore[operator]
    return total


def run_evident(server: RemoteServer, docs: list[Document]) -> tuple[float, float, int]:
    from evident.context import EvidentContext
    from evident.graph import build_graph

    graph = build_graph(retriever=Docs(docs=docs))
    ctx = EvidentContext(model="sim", base_url=server.base_url, api_key="k", token_counter="approx", top_n=len(docs))
    t0 = time.monotonic()
    out = graph.invoke({"query": QUERY}, context=ctx)
    t1 = time.monotonic()
    if out["status"] != "answered":
        raise SystemExit(f"EvidenT run did not answer: {out['status']} {out.get('model_errors')}")
    mine = [r for r in server.requests() if t0 <= r["started"] <= t1]
    return t1 - t0, busy(mine, t0, t1), len(mine)


def run_baseline(server: RemoteServer, docs: list[Document]) -> tuple[float, float, int]:
    from langchain_openai import ChatOpenAI

    from evident.connectors.base import to_source_document
    from evident.prompts import DIRECT_PROMPT, render_numbered_documents

    model = ChatOpenAI(model="sim", base_url=server.base_url, api_key="k", temperature=0, max_retries=0)
    retriever = Docs(docs=docs)
    t0 = time.monotonic()
    found = [to_source_document(d) for d in retriever.invoke(QUERY)]
    messages = DIRECT_PROMPT.format_messages(documents=render_numbered_documents(found), query=QUERY)
    model.invoke(messages)
    t1 = time.monotonic()
    mine = [r for r in server.requests() if t0 <= r["started"] <= t1]
    return t1 - t0, busy(mine, t0, t1), len(mine)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--scale", type=float, default=0.25, help="multiply simulated model time by this")
    ap.add_argument("--ttft", type=float, default=0.25, help="fixed part of the time to first token (s)")
    ap.add_argument("--prefill", type=float, default=6000.0, help="prompt tokens per second")
    ap.add_argument("--decode", type=float, default=50.0, help="output tokens per second")
    args = ap.parse_args(argv)

    scenarios = {"short": (4, 600), "long": (8, 5000)}
    rows = []
    seed = 1000
    for capacity in ("parallel", "shared"):
        for name, (n_docs, tokens_each) in scenarios.items():
            sim = Sim(args.ttft, args.prefill, args.decode, args.scale, shared=capacity == "shared")
            with RemoteServer(sim) as server:
                seed += 1
                run_evident(server, make_docs(n_docs, tokens_each, seed))  # warm-up: imports, clients
                run_baseline(server, make_docs(n_docs, tokens_each, seed))
                ev, bl = [], []
                for _ in range(args.runs):
                    seed += 1
                    ev.append(run_evident(server, make_docs(n_docs, tokens_each, seed)))
                    bl.append(run_baseline(server, make_docs(n_docs, tokens_each, seed)))
            e_total = statistics.median(t for t, _, _ in ev)
            b_total = statistics.median(t for t, _, _ in bl)
            e_out = statistics.median(t - m for t, m, _ in ev)
            b_out = statistics.median(t - m for t, m, _ in bl)
            rows.append((capacity, name, f"{n_docs}×{tokens_each}", ev[0][2], e_total, b_total, e_total / b_total,
                         e_out * 1000, b_out * 1000, max(t - m for t, m, _ in ev) * 1000))

    print(f"EvidenT latency: graph (LLM mode) vs one direct-prompting call — medians of {args.runs} runs")
    print(f"simulated model: TTFT {args.ttft:g} s + prompt / {args.prefill:g} tok/s, decode {args.decode:g} tok/s; "
          f"time scale {args.scale:g} (simulated times ×{args.scale:g}; overheads are real time)")
    print(f"machine: {platform.platform()}, {os.cpu_count()} CPUs, Python {platform.python_version()}")
    print()
    header = ("capacity", "scenario", "docs×tokens", "calls", "EvidenT s", "baseline s", "ratio",
              "outside EvidenT ms", "outside baseline ms", "outside max ms")
    widths = [10, 9, 12, 6, 10, 11, 7, 19, 20, 15]
    print(" ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)))
    for r in rows:
        cells = [r[0], r[1], r[2], str(r[3]), f"{r[4]:.3f}", f"{r[5]:.3f}", f"{r[6]:.2f}",
                 f"{r[7]:.1f}", f"{r[8]:.1f}", f"{r[9]:.1f}"]
        print(" ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)))
    print()
    overhead_ok = all(r[7] < 50 for r in rows)
    long_ok = {r[0]: r[6] <= 1.10 for r in rows if r[1] == "long"}
    print(f"target: overhead outside model calls < 50 ms per query: {'met' if overhead_ok else 'NOT met'}")
    for capacity, ok in long_ok.items():
        print(f"target: long documents within 10% of the baseline ({capacity} capacity): {'met' if ok else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
