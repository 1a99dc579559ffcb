"""Answer quality of the offline EvidenT graph: the bundled example questions, or the development set.

    python benchmarks/quality.py [--questions examples/questions.jsonl] [--corpus examples/corpus]
    python benchmarks/quality.py --questions ../shared/data/doc2dial-qa/questions.jsonl \\
        --corpus ../shared/data/doc2dial-qa/corpus.jsonl --part tune      # or holdout (every fifth), all

Every question runs through the default graph (offline, default settings) over the embedded index.
A page counts as gold when it is in `gold_urls` or `alt_urls` (pages holding the same evidence).
Printed, with 95% confidence intervals by the binomial approximation the paper uses (Eq. 4):
- hallucinated citations: share of answers citing a URL that was not retrieved (paper Eq. 2);
- quotes equal to the source text at their spans (the alignment guarantee, checked here again);
- groundedness (a cited page is gold, paper Eq. 3) and first-citation precision (the first cited page
  is gold), against BM25 top-1 (the index's first hit is gold) and retrieval recall@1/@3/@top_n;
- evidence recall: a gold evidence string inside the cited quotes (case and spacing folded), and the
  share of those answers whose first cited sentence holds it ("the first sentence is the best evidence"),
  and whose first cited sentence holds it or is the opening of a gold string of several sentences;
- shape: median cited sentences, and off-topic sentences (sharing no content word with the question
  without continuing the sentence before them in the same source);
- abstention on unanswerable questions and false abstention on answerable ones;
- pipeline time per query (offline: no model calls), median and 95th percentile.
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
sys.path.insert(0, str(ROOT))


def ci(hits: int, n: int) -> str:
    if n == 0:
        return "n/a"
    p = hits / n
    half = 1.96 * math.sqrt(p * (1 - p) / n)
    return f"{100 * p:5.1f}% ± {100 * half:4.1f}  ({hits}/{n})"


def norm(text: str) -> str:
    return " ".join(text.casefold().split())


def select(questions: list[dict[str, Any]], part: str) -> list[dict[str, Any]]:
    """`holdout` is every fifth question (index % 5 == 4), `tune` the rest, `all` everything."""
    return [q for i, q in enumerate(questions) if part == "all" or (i % 5 == 4) == (part == "holdout")]


def off_topic(citations: list[Any], query: str, docs: dict[str, str]) -> int:
    """Answer sentences sharing no content word with the query that do not continue the sentence
    cited right before them (the next text of the same document: only spacing or markup between)."""
    from evident.offline.terms import query_weights, unit_terms

    asked = set(query_weights(query))
    count = 0
    previous: Any = None
    seen: set[str] = set()
    for c in citations:
        if c.sentence in seen:
            continue
        seen.add(c.sentence)
        shares = bool(asked & set(unit_terms(c.sentence)))
        continues = (
            previous is not None and previous.url == c.url and bool(previous.spans) and bool(c.spans)
            and previous.spans[-1][1] <= c.spans[0][0]
            and not any(ch.isalnum() for ch in docs.get(c.url, "")[previous.spans[-1][1] : c.spans[0][0]])
        )
        count += not shares and not continues
        previous = c
    return count


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--questions", type=Path, default=ROOT / "examples" / "questions.jsonl")
    ap.add_argument("--corpus", type=Path, default=ROOT / "examples" / "corpus")
    ap.add_argument("--part", default="all", choices=["tune", "holdout", "all"])
    ap.add_argument("--show-misses", action="store_true",
                    help="list questions whose answer missed, and answers with an off-topic sentence")
    args = ap.parse_args(argv)

    from evident.connectors.index.retriever import LocalCorpusRetriever
    from evident.context import EvidentContext
    from evident.graph import build_graph
    from evident.models import INSUFFICIENT_ANSWER, Citation

    lines = args.questions.read_text(encoding="utf-8").splitlines()
    questions = select([json.loads(x) for x in lines if x.strip()], args.part)
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        retriever = LocalCorpusRetriever.from_corpus([args.corpus], index_path=Path(tmp) / "q.sqlite3")
        graph = build_graph(retriever=retriever)
        ctx = EvidentContext()
        for q in questions:
            start = time.perf_counter()
            out = graph.invoke({"query": q["query"]}, context=ctx)
            ms = (time.perf_counter() - start) * 1000
            top1 = retriever.invoke(q["query"])[:1]
            # The graph returns JSON: its citations read back as models.
            docs = {d["url"]: d["content"] for d in out.get("documents", [])}
            rows.append({
                "q": q, "ms": ms, "answer": out.get("answer", ""),
                "citations": [Citation.model_validate(c) for c in out.get("citations", [])],
                "retrieved": [r["url"] for r in out.get("retrieved", [])], "docs": docs,
                "gold": set(q.get("gold_urls") or []) | set(q.get("alt_urls") or []),
                "top1": top1[0].metadata["url"] if top1 else None,
            })

    answerable = [r for r in rows if r["q"]["answerable"]]
    unanswerable = [r for r in rows if not r["q"]["answerable"]]
    answered = [r for r in answerable if r["answer"] != INSUFFICIENT_ANSWER]

    def holds(text: str, q: dict[str, Any]) -> bool:
        flat = norm(text)
        return any(norm(e) in flat for e in q["gold_evidence"])

    def quotes(r: dict[str, Any]) -> str:
        return " ".join(c.quote for c in r["citations"])

    halluc = sum(any(c.url not in r["retrieved"] for c in r["citations"]) for r in rows)
    all_cites = [(c, r) for r in rows for c in r["citations"]]
    exact = sum(c.quote.replace(" … ", "") == "".join(r["docs"].get(c.url, "")[s:e] for s, e in c.spans)
                for c, r in all_cites)
    grounded = sum(bool({c.url for c in r["citations"]} & r["gold"]) for r in answerable)
    first = sum(bool(r["citations"]) and r["citations"][0].url in r["gold"] for r in answerable)
    bm25 = sum(r["top1"] in r["gold"] for r in answerable)
    r1 = sum(bool(r["retrieved"][:1]) and r["retrieved"][0] in r["gold"] for r in answerable)
    r3 = sum(bool(set(r["retrieved"][:3]) & r["gold"]) for r in answerable)
    rn = sum(bool(set(r["retrieved"]) & r["gold"]) for r in answerable)
    evidence = [r for r in answerable if holds(quotes(r), r["q"])]
    first_best = sum(holds(r["citations"][0].quote, r["q"]) for r in evidence)

    def opens(r: dict[str, Any]) -> bool:
        # A gold of 2-3 sentences cannot be in one: the first cited sentence holds a gold string the
        # answer quotes, or is its opening.
        head, flat = norm(r["citations"][0].quote), norm(quotes(r))
        return any(g and g in flat and (g in head or (head and g.startswith(head) and g[len(head)] == " "))
                   for g in map(norm, r["q"]["gold_evidence"]))

    first_opens = sum(opens(r) for r in evidence)
    sentences = [len({c.sentence for c in r["citations"]}) for r in answered]
    stray = [off_topic(r["citations"], r["q"]["query"], r["docs"]) for r in answered]
    abstain = sum(r["answer"] == INSUFFICIENT_ANSWER for r in unanswerable)
    false_abstain = len(answerable) - len(answered)
    times = sorted(r["ms"] for r in rows)

    print(f"EvidenT offline quality on {args.questions.name} ({args.part}): {len(rows)} questions "
          f"({len(answerable)} answerable, {len(unanswerable)} unanswerable)")
    print(f"machine: {platform.machine()}, Python {platform.python_version()}")
    print()
    rows_out = [
        ("citations outside retrieved docs (answers)", ci(halluc, len(rows))),
        ("quotes equal to the source at their spans", ci(exact, len(all_cites))),
        ("groundedness: a cited page is gold", ci(grounded, len(answerable))),
        ("first-citation precision", ci(first, len(answerable))),
        ("BM25 top-1 is gold", ci(bm25, len(answerable))),
        ("retrieval recall@1", ci(r1, len(answerable))),
        ("retrieval recall@3", ci(r3, len(answerable))),
        ("retrieval recall@top_n", ci(rn, len(answerable))),
        ("evidence recall (gold evidence in cited quotes)", ci(len(evidence), len(answerable))),
        ("... first cited sentence holds it", ci(first_best, len(evidence))),
        ("... first cited sentence holds it or opens it", ci(first_opens, len(evidence))),
        ("abstained on unanswerable", ci(abstain, len(unanswerable))),
        ("abstained on answerable (false abstention)", ci(false_abstain, len(answerable))),
        ("answers with an off-topic sentence", ci(sum(x > 0 for x in stray), len(answered))),
    ]
    for name, value in rows_out:
        print(f"{name:<50} {value}")
    print(f"{'cited sentences per answer (median)':<50} {statistics.median(sentences) if sentences else 0}")
    print(f"{'pipeline time per query p50 / p95':<50} {statistics.median(times):.1f} ms / "
          f"{times[min(len(times) - 1, round(0.95 * (len(times) - 1)))]:.1f} ms")
    if args.show_misses:
        print()
        for r in answerable:
            if r not in evidence:
                print(f"- {r['q']['id']}: {r['q']['query']}\n    gold {sorted(r['gold'])}\n"
                      f"    cited {sorted({c.url for c in r['citations']})}")
        for r in unanswerable:
            if r["answer"] != INSUFFICIENT_ANSWER:
                print(f"- {r['q']['id']} (unanswerable) answered: {r['answer'][:160]!r}")
        for r, n in zip(answered, stray, strict=True):
            if n:
                print(f"- {r['q']['id']} ({n} off-topic): {r['answer'][:400]!r}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
