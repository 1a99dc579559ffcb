"""Retrieval performance: the embedded index at scale, and the cost of federating sources.

    python benchmarks/retrieval.py          # 10,000 and 100,000 documents + federated overhead (~1.5 min on 2 cores)
    python benchmarks/retrieval.py --quick  # 10,000 documents only (~15 s)
    python benchmarks/retrieval.py --sizes 2000 --federated-runs 50 --queries 20     # any sizes

Embedded index (SQLite documents, Tantivy BM25): documents are generated from the bundled example corpus with
variation (random runs of a page's paragraphs, numbers and names changed, a distinct title), written
as JSONL and indexed with `LocalIndex.add_corpus`, exactly what `evident index` does. Reported:
build time, documents per second, index size on disk, and search latency p50/p95 over the example
questions (warm: each question is asked `--rounds` times), both for `LocalIndex.search` and through
the LangChain retriever.

Federated overhead: 5 sources with known latencies (5, 10, 20, 30 and 40 ms of sleep, 8 documents
each) behind one `FederatedRetriever`; the overhead of a query is its wall time minus the latency of
its slowest source, i.e. what threads/tasks, permission filtering, fusion and deduplication cost.

Targets (issue 5): search p50 < 20 ms at 100,000 documents; federated overhead < 10 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import re
import sqlite3
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from machine_info import describe  # noqa: E402  (benchmarks/ is on sys.path when run as a script)

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

NAMES = ["Tessellate", "Ledgerly", "Peoplebase", "Flow", "Edge", "Atlas", "Quarry", "Harbor", "Signal", "Lumen",
         "Berlin", "Austin", "Lisbon", "Osaka", "Toronto", "platform", "finance", "support", "security", "data"]
_NUMBER = re.compile(r"\b\d{1,4}\b")
_NAME = re.compile(r"\b(" + "|".join(NAMES) + r")\b")


def machine() -> str:
    return describe(f"SQLite {sqlite3.sqlite_version}")


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


def generate(count: int, path: Path, seed: int = 7) -> int:
    """`count` documents derived from the example corpus into a JSONL file; returns its size in bytes."""
    from evident.connectors.index.loaders import load_corpus

    rng = random.Random(seed)
    bases = [d for d in load_corpus(ROOT / "examples" / "corpus", on_skip=lambda *_: None)]
    paragraphs = [[p for p in d.content.split("\n\n") if p.strip()] for d in bases]
    with path.open("w", encoding="utf-8") as out:
        for i in range(count):
            b = i % len(bases)
            paras = paragraphs[b]
            length = rng.randint(3, 12)
            start = rng.randrange(max(1, len(paras) - length + 1))
            chosen = paras[start : start + length]
            swap = {n: rng.choice(NAMES) for n in rng.sample(NAMES, 3)}
            text = "\n\n".join(chosen)
            text = _NUMBER.sub(lambda m: str(int(m.group()) + rng.randint(0, 9)), text)
            text = _NAME.sub(lambda m, swap=swap: swap.get(m.group(), m.group()), text)
            title = f"{bases[b].title} ({rng.choice(NAMES)} {i})"
            record = {"url": f"{bases[b].url}/v/{i}", "title": title, "text": f"{title}\n\n{text}",
                      "source_type": bases[b].source_type,
                      # A quarter for the board only: the caller's search (`search_filtered`) skips them.
                      "metadata": {"team": rng.choice(NAMES), **({"acl": "group:board"} if i % 4 == 0 else {})}}
            out.write(json.dumps(record, ensure_ascii=False) + "\n")
    return path.stat().st_size


def index_size(path: Path) -> int:
    # The SQLite file, its WAL, and the Tantivy directory beside it (`<index>.tantivy/`).
    return sum(p.stat().st_size for p in path.parent.glob(path.name + "*") if p.is_file()) + sum(
        p.stat().st_size for p in path.parent.glob(path.name + "*/**/*") if p.is_file())


def build_local_index(corpus: Path, target: Path) -> tuple[int, float]:
    """The embedded index of `corpus` built at `target`: its sections and the seconds the build took."""
    from evident.connectors.index.embedded import LocalIndex

    start = time.perf_counter()
    with LocalIndex(target) as index:
        index.add_corpus(corpus, on_skip=lambda *_: None)
        sections = index.count()
    return sections, time.perf_counter() - start


def latencies(search: Callable[[str], object], questions: list[str], rounds: int) -> list[float]:
    """Milliseconds of each `search` over `rounds` rounds of `questions`, after one warm-up round
    (caches, query plans, pages)."""
    for q in questions:
        search(q)
    times = []
    for _ in range(rounds):
        for q in questions:
            start = time.perf_counter()
            search(q)
            times.append((time.perf_counter() - start) * 1000)
    return times


def bench_index(count: int, queries: list[str], rounds: int, workdir: Path) -> dict[str, Any]:
    from evident.connectors.index.embedded import LocalIndex
    from evident.connectors.index.retriever import LocalCorpusRetriever
    from evident.connectors.visibility import AclPolicy, principal_tokens
    from evident.models import Principal

    corpus = workdir / f"corpus-{count}.jsonl"
    corpus_bytes = generate(count, corpus)
    target = workdir / f"index-{count}.sqlite3"
    documents, build_s = build_local_index(corpus, target)
    with sqlite3.connect(target) as conn:  # fold the WAL in, so the size is the index's own
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    size = index_size(target)

    with LocalIndex(target, read_only=True) as index:
        search_ms = latencies(lambda q: index.search(q, k=8), queries, rounds)
        # Permissions inside the search: a staff member's visibility tokens, counted statistics.
        visible = principal_tokens(Principal(user="bench", groups=["staff"]), AclPolicy())
        filtered_ms: list[float] = []
        for _ in range(rounds):
            for q in queries:
                t = time.perf_counter()
                index.search(q, k=8, visible=visible)
                filtered_ms.append((time.perf_counter() - t) * 1000)
    retriever = LocalCorpusRetriever(index_path=target, k=8)
    retriever.invoke(queries[0])
    invoke_ms: list[float] = []
    for q in queries:
        t = time.perf_counter()
        retriever.invoke(q)
        invoke_ms.append((time.perf_counter() - t) * 1000)
    retriever.close()
    return {
        "documents": documents, "corpus_mb": corpus_bytes / 1e6, "build_s": build_s, "docs_per_s": documents / build_s,
        "index_mb": size / 1e6, "p50": percentile(search_ms, 50), "p95": percentile(search_ms, 95),
        "invoke_p50": percentile(invoke_ms, 50), "invoke_p95": percentile(invoke_ms, 95),
        "filtered_p50": percentile(filtered_ms, 50), "filtered_p95": percentile(filtered_ms, 95),
    }


def bench_federated(runs: int) -> dict[str, dict[str, float]]:
    from langchain_core.callbacks import AsyncCallbackManagerForRetrieverRun, CallbackManagerForRetrieverRun
    from langchain_core.documents import Document
    from langchain_core.retrievers import BaseRetriever

    from evident.connectors.federated import FederatedRetriever
    from evident.connectors.source import Source

    class Sleepy(BaseRetriever):
        delay_s: float
        name_: str

        def _docs(self) -> list[Document]:
            return [Document(page_content=f"{self.name_} document {i}: " + "lorem ipsum dolor sit amet " * 40,
                             metadata={"url": f"https://{self.name_}.example/{i}", "title": f"{self.name_} {i}",
                                       "acl": "group:staff" if i % 4 == 0 else None})
                    for i in range(8)]

        def _get_relevant_documents(
            self, query: str, *, run_manager: CallbackManagerForRetrieverRun
        ) -> list[Document]:
            time.sleep(self.delay_s)
            return self._docs()

        async def _aget_relevant_documents(
            self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun
        ) -> list[Document]:
            await asyncio.sleep(self.delay_s)
            return self._docs()

    latencies = [0.005, 0.010, 0.020, 0.030, 0.040]
    federation = FederatedRetriever(
        sources=[Source(name=f"s{i}", retriever=Sleepy(delay_s=d, name_=f"s{i}"), timeout_s=5)
                 for i, d in enumerate(latencies)],
        top_n=8,
    )
    principal = {"user": "bench", "groups": ["staff"]}
    out: dict[str, dict[str, float]] = {}

    def overhead(result: Any, wall_ms: float) -> float:
        return wall_ms - max(r.latency_ms for r in result.runs)

    sync: list[float] = []
    walls: list[float] = []
    federation.search("warm up", principal=principal)
    for _ in range(runs):
        t = time.perf_counter()
        result = federation.search("query", principal=principal)
        wall = (time.perf_counter() - t) * 1000
        walls.append(wall)
        sync.append(overhead(result, wall))
    out["threads (invoke)"] = {"wall_p50": percentile(walls, 50),
                               "p50": percentile(sync, 50), "p95": percentile(sync, 95)}

    async def run_async() -> tuple[list[float], list[float]]:
        over, wall_list = [], []
        await federation.asearch("warm up", principal=principal)
        for _ in range(runs):
            t = time.perf_counter()
            result = await federation.asearch("query", principal=principal)
            wall = (time.perf_counter() - t) * 1000
            wall_list.append(wall)
            over.append(overhead(result, wall))
        return over, wall_list

    over, walls = asyncio.run(run_async())
    out["asyncio (ainvoke)"] = {"wall_p50": percentile(walls, 50),
                                "p50": percentile(over, 50), "p95": percentile(over, 95)}
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=None, help="index sizes (default: 10000 100000)")
    ap.add_argument("--quick", action="store_true", help="skip the 100,000-document index")
    ap.add_argument("--rounds", type=int, default=5, help="times each question is searched")
    ap.add_argument("--queries", type=int, default=70, help="how many example questions to use")
    ap.add_argument("--federated-runs", type=int, default=200)
    ap.add_argument("--workdir", type=Path, default=None, help="keep generated corpora and indexes here")
    args = ap.parse_args(argv)
    sizes = args.sizes or ([10_000] if args.quick else [10_000, 100_000])

    lines = (ROOT / "examples" / "questions.jsonl").read_text().splitlines()
    questions = [json.loads(line)["query"] for line in lines if line.strip()]
    questions = questions[: args.queries]
    print(f"machine: {machine()}")
    print(f"queries: {len(questions)} example questions x {args.rounds} rounds, k=8\n")

    with tempfile.TemporaryDirectory(dir=args.workdir) as tmp:
        rows = [bench_index(n, questions, args.rounds, Path(tmp)) for n in sizes]
    header = (f"{'documents':>10} {'corpus MB':>9} {'build s':>8} {'docs/s':>8} {'index MB':>9} "
              f"{'search p50 ms':>13} {'search p95 ms':>13} {'invoke p50 ms':>13} {'invoke p95 ms':>13}")
    print("Embedded index (SQLite + Tantivy BM25)")
    print(header)
    print("-" * len(header))
    for r in rows:
        print(f"{r['documents']:>10,} {r['corpus_mb']:>9.1f} {r['build_s']:>8.1f} {r['docs_per_s']:>8,.0f} "
              f"{r['index_mb']:>9.1f} {r['p50']:>13.2f} {r['p95']:>13.2f} "
              f"{r['invoke_p50']:>13.2f} {r['invoke_p95']:>13.2f}")
    for r in rows:  # the same questions as a staff member: permissions inside the search
        print(f"{r['documents']:>10,} filtered search p50 {r['filtered_p50']:.2f} ms, p95 {r['filtered_p95']:.2f} ms")
    worst = max(rows, key=lambda r: r["documents"])
    verdict = "met" if worst["p50"] < 20 else "NOT met"
    print(f"target search p50 < 20 ms at 100,000 documents: {verdict} at {worst['documents']:,} documents "
          f"({worst['p50']:.2f} ms)\n")

    fed = bench_federated(args.federated_runs)
    header = (f"{'federated, 5 sources (5-40 ms)':<32} {'wall p50 ms':>11} "
              f"{'overhead p50 ms':>15} {'overhead p95 ms':>15}")
    print(header)
    print("-" * len(header))
    for mode, r in fed.items():
        print(f"{mode:<32} {r['wall_p50']:>11.2f} {r['p50']:>15.2f} {r['p95']:>15.2f}")
    ok = all(r["p50"] < 10 for r in fed.values())
    print(f"target federated overhead < 10 ms: {'met' if ok else 'NOT met'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
