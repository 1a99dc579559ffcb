"""Follow-up questions over the example corpus: groundedness against the single-turn questions.

    python benchmarks/followups.py [--followups examples/followups.jsonl] [--questions examples/questions.jsonl]
                                   [--corpus examples/corpus] [--show-misses]

Each line of `--followups` is a question asked after a `history` of earlier turns ({role, content});
it goes to the default graph (offline, default settings) as `{"messages": [*history, question]}`, so
the `rewrite` step turns it into a standalone question first. The single-turn questions (the
answerable ones of `--questions`) go in as `{"query": ...}`. Groundedness is measured exactly as
benchmarks/quality.py does: an answer is grounded when a page it cites is gold (paper Eq. 3), with
the binomial 95% interval of Eq. 4. Also printed: the same follow-ups asked without their history
(what the graph did before conversations), how often the rewrite changed the question, citations
outside the retrieved documents, and quotes equal to the source at their spans.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from quality import ci, norm  # noqa: E402  (the measures of benchmarks/quality.py)


def read(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]


def run(graph: Any, ctx: Any, inputs: dict[str, Any], q: dict[str, Any]) -> dict[str, Any]:
    from evident.models import Citation

    out = graph.invoke(inputs, context=ctx)
    # The graph returns JSON: its citations read back as models.
    out = {**out, "citations": [Citation.model_validate(c) for c in out.get("citations", [])]}
    docs = {d["url"]: d["content"] for d in out.get("documents", [])}
    return {"q": q, "out": out, "docs": docs, "gold": set(q.get("gold_urls") or []) | set(q.get("alt_urls") or []),
            "retrieved": {r["url"] for r in out.get("retrieved", [])}}


def measure(name: str, rows: list[dict[str, Any]]) -> tuple[int, int]:
    grounded = sum(bool({c.url for c in r["out"]["citations"]} & r["gold"]) for r in rows)
    outside = sum(any(c.url not in r["retrieved"] for c in r["out"]["citations"]) for r in rows)
    cites = [(c, r) for r in rows for c in r["out"]["citations"]]
    exact = sum(c.quote.replace(" … ", "") == "".join(r["docs"].get(c.url, "")[s:e] for s, e in c.spans)
                for c, r in cites)
    with_evidence = [r for r in rows if r["q"].get("gold_evidence")]
    found = sum(any(norm(e) in norm(" ".join(c.quote for c in r["out"]["citations"])) for e in r["q"]["gold_evidence"])
                for r in with_evidence)
    print(f"{name}")
    print(f"  {'groundedness: a cited page is gold':<48} {ci(grounded, len(rows))}")
    print(f"  {'evidence recall (gold evidence in cited quotes)':<48} {ci(found, len(with_evidence))}")
    print(f"  {'answers citing outside the retrieved documents':<48} {ci(outside, len(rows))}")
    print(f"  {'quotes equal to the source at their spans':<48} {ci(exact, len(cites))}")
    return grounded, len(rows)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--followups", type=Path, default=ROOT / "examples" / "followups.jsonl")
    ap.add_argument("--questions", type=Path, default=ROOT / "examples" / "questions.jsonl")
    ap.add_argument("--corpus", type=Path, default=ROOT / "examples" / "corpus")
    ap.add_argument("--show-misses", action="store_true", help="list follow-ups whose answer cites no gold page")
    args = ap.parse_args(argv)

    from evident.connectors.index.retriever import LocalCorpusRetriever
    from evident.context import EvidentContext
    from evident.graph import build_graph

    followups = read(args.followups)
    singles = [q for q in read(args.questions) if q.get("answerable", True)]
    with tempfile.TemporaryDirectory() as tmp:
        retriever = LocalCorpusRetriever.from_corpus([args.corpus], index_path=Path(tmp) / "f.sqlite3")
        graph = build_graph(retriever=retriever)
        ctx = EvidentContext()
        single = [run(graph, ctx, {"query": q["query"]}, q) for q in singles]
        chat = [run(graph, ctx, {"messages": [*q["history"], {"role": "user", "content": q["query"]}]}, q)
                for q in followups]
        bare = [run(graph, ctx, {"query": q["query"]}, q) for q in followups]

    print(f"EvidenT offline, {args.corpus.name}: {len(followups)} follow-ups ({args.followups.name}), "
          f"{len(singles)} answerable single-turn questions ({args.questions.name})\n")
    g1, n1 = measure("single-turn questions", single)
    g2, n2 = measure("follow-ups with their history (rewritten)", chat)
    measure("follow-ups without their history (as before conversations)", bare)
    rewritten = sum(r["out"]["rewrite"]["rewritten_by"] == "rule" for r in chat)  # the JSON state
    print(f"\n{'follow-ups the rule rewrote':<50} {ci(rewritten, len(chat))}")
    print(f"{'groundedness, follow-ups minus single-turn':<50} {100 * (g2 / n2 - g1 / n1):+.1f} points")
    if args.show_misses:
        for r in chat:
            if not {c.url for c in r["out"]["citations"]} & r["gold"]:
                cited = sorted({c.url for c in r["out"]["citations"]})
                print(f"- {r['q']['id']}: {r['out']['query']!r}\n    cited {cited}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
