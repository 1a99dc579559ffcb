"""Answer quality of the offline EvidenT graph on the bundled example questions.

    python benchmarks/quality.py [--questions examples/questions.jsonl] [--corpus examples/corpus]

Prints, for EvidenT (offline) and for plain BM25 top-1 as a reference:
- hallucinated citations: share of answers citing a URL that was not retrieved (paper Eq. 2);
- gold-URL hit (groundedness, paper Eq. 3) over answerable questions;
- gold evidence: share of answerable questions whose answer contains a gold evidence sentence
  (for BM25 top-1, whether the top page contains one: a page, not an answer);
- abstention: share of unanswerable questions answered "Not sufficient information to answer.";
with 95% confidence intervals by the binomial approximation the paper uses (Eq. 4).
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def ci(hits: int, n: int) -> str:
    if n == 0:
        return "n/a"
    p = hits / n
    half = 1.96 * math.sqrt(p * (1 - p) / n)
    return f"{100 * p:5.1f}% ± {100 * half:4.1f}  ({hits}/{n})"


def squash(text: str) -> str:
    from evident.alignment.tokenize import token_string, words

    return token_string(words(text))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--questions", type=Path, default=ROOT / "examples" / "questions.jsonl")
    ap.add_argument("--corpus", type=Path, default=ROOT / "examples" / "corpus")
    ap.add_argument("--show-misses", action="store_true", help="list questions whose answer missed")
    args = ap.parse_args(argv)

    from evident.answer import parse_answer
    from evident.connectors.local import LocalCorpusRetriever
    from evident.context import EvidentContext
    from evident.graph import build_graph
    from evident.models import INSUFFICIENT_ANSWER

    questions = [json.loads(x) for x in args.questions.read_text(encoding="utf-8").splitlines() if x.strip()]
    with tempfile.TemporaryDirectory() as tmp:
        retriever = LocalCorpusRetriever.from_corpus([args.corpus], index_path=Path(tmp) / "q.sqlite3")
        graph = build_graph(retriever=retriever)
        ctx = EvidentContext()
        rows: list[dict[str, Any]] = []
        for q in questions:
            start = time.perf_counter()
            out = graph.invoke({"query": q["query"]}, context=ctx)
            ms = (time.perf_counter() - start) * 1000
            retrieved = [r.url for r in out.get("retrieved", [])]
            cited = {c.url for c in out.get("citations", [])}
            top1 = retriever.invoke(q["query"])[:1]
            rows.append({
                "q": q, "ms": ms, "answer": out.get("answer", ""), "cited": cited, "retrieved": set(retrieved),
                "top1_url": top1[0].metadata["url"] if top1 else None,
                "top1_text": top1[0].page_content if top1 else "",
            })

    answerable = [r for r in rows if r["q"]["answerable"]]
    unanswerable = [r for r in rows if not r["q"]["answerable"]]

    def first_cited(answer: str) -> str:
        return next((u.text for line in parse_answer(answer) for u in line.units if u.urls), "")

    def has_evidence(text: str, q: dict[str, Any]) -> bool:
        flat = squash(text)
        return any(squash(e) in flat for e in q["gold_evidence"])

    halluc = sum(bool(r["cited"] - r["retrieved"]) for r in rows)
    gold_hit = sum(bool(r["cited"] & set(r["q"]["gold_urls"])) for r in answerable)
    evid = sum(has_evidence(r["answer"], r["q"]) for r in answerable)
    first = sum(has_evidence(first_cited(r["answer"]), r["q"]) for r in answerable)
    sentences = [sum(1 for line in parse_answer(r["answer"]) for u in line.units if u.urls) for r in answerable]
    abstain = sum(r["answer"] == INSUFFICIENT_ANSWER for r in unanswerable)
    false_abstain = sum(r["answer"] == INSUFFICIENT_ANSWER for r in answerable)
    bm25_hit = sum(r["top1_url"] in r["q"]["gold_urls"] for r in answerable)
    bm25_evid = sum(has_evidence(r["top1_text"], r["q"]) for r in answerable)
    retrieval_recall = sum(bool(r["retrieved"] & set(r["q"]["gold_urls"])) for r in answerable)

    print(f"EvidenT offline quality on {args.questions.name}: {len(rows)} questions "
          f"({len(answerable)} answerable, {len(unanswerable)} unanswerable)")
    print(f"machine: {platform.machine()}, Python {platform.python_version()}")
    print()
    print(f"{'metric':<44} {'EvidenT (offline)':<28} {'BM25 top-1':<28}")
    print("-" * 100)
    print(f"{'citations outside retrieved docs (answers)':<44} {ci(halluc, len(rows)):<28} {'0 by construction':<28}")
    print(f"{'gold URL cited (answerable)':<44} {ci(gold_hit, len(answerable)):<28} {ci(bm25_hit, len(answerable)):<28}")
    print(f"{'gold evidence sentence in answer':<44} {ci(evid, len(answerable)):<28} {ci(bm25_evid, len(answerable)) + ' *':<28}")
    print(f"{'... in the first cited sentence':<44} {ci(first, len(answerable)):<28} {'-':<28}")
    print(f"{'cited sentences per answer (median)':<44} {statistics.median(sentences) if sentences else 0:<28} {'-':<28}")
    print(f"{'abstained on unanswerable':<44} {ci(abstain, len(unanswerable)):<28} {'never abstains':<28}")
    print(f"{'abstained on answerable':<44} {ci(false_abstain, len(answerable)):<28} {'-':<28}")
    print(f"{'gold URL among retrieved (recall@top_n)':<44} {ci(retrieval_recall, len(answerable)):<28} {'-':<28}")
    print(f"{'median latency per query':<44} {statistics.median(r['ms'] for r in rows):.1f} ms")
    print("* BM25 top-1 'evidence' is whether the whole top page contains a gold sentence (a page, not an answer).")
    if args.show_misses:
        print()
        for r in answerable:
            if not has_evidence(r["answer"], r["q"]):
                print(f"- {r['q']['id']}: {r['q']['query']}\n    gold {r['q']['gold_urls']}\n    cited {sorted(r['cited'])}")
        for r in unanswerable:
            if r["answer"] != INSUFFICIENT_ANSWER:
                print(f"- {r['q']['id']} (unanswerable) answered: {r['answer'][:160]!r}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
