"""Retrieval quality by words and by words and meaning: recall of a gold page @1, @3 and @8.

    python benchmarks/retrieval_quality.py                       # the example questions
    python benchmarks/retrieval_quality.py --doc2dial tune       # doc2dial-qa first questions, tune part
    python benchmarks/retrieval_quality.py --doc2dial holdout --followups     # follow-up turns
    python benchmarks/retrieval_quality.py --doc2dial tune --weights 0.2 0.3 0.4 0.5 0.6   # the weight's sweep
    PG_DSN=postgresql://… python benchmarks/retrieval_quality.py --doc2dial tune --postgres PG_DSN   # vs PostgreSQL

Both rankings run in one process over one index, through the retrieval the graph uses
(`FederatedRetriever.search`, with the query's `QueryMeaning` for the hybrid one, `prepare_meaning`):
the reference is the words-only search of the same question. A follow-up turn is searched as the
offline rewrite's standalone question (`evident.conversation.rule.condense`), as `evident ask` does.
With `--postgres ENV` (the environment variable holding a connection string) the same corpus is also loaded
into a PostgreSQL source (schema `retrieval_quality`, replaced) and ranked by words and by the same hybrids,
each compared with the embedded index's words-only ranking.
A page counts as gold when it is in `gold_urls` or `alt_urls`; unanswerable questions are left out.
Each recall has a 95% interval (Wilson), and the difference a paired sign test (exact binomial) over
the questions where exactly one ranking finds a gold page in its first k.

The development set is read from ../shared/data/doc2dial-qa (never copied here); holdout is every fifth
line, tune the rest. The first run embeds the index (the doc2dial pages: a few minutes on 2 cores).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from machine_info import describe  # noqa: E402  (benchmarks/ is on sys.path when run as a script)

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
DOC2DIAL = ROOT.parent / "shared" / "data" / "doc2dial-qa"
DEPTHS = (1, 3, 8)


def wilson(hits: int, n: int, z: float = 1.96) -> tuple[float, float]:
    if n == 0:
        return 0.0, 0.0
    p = hits / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return centre - half, centre + half


def sign_test(wins: int, losses: int) -> float:
    """Two-sided exact binomial p of `wins` against `losses` (ties left out)."""
    n = wins + losses
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(0, min(wins, losses) + 1)) / 2**n
    return min(1.0, 2 * tail)


def load(args: argparse.Namespace) -> tuple[str, Path, list[dict[str, Any]]]:
    if args.doc2dial is None:
        lines = (ROOT / "examples" / ("followups.jsonl" if args.followups else "questions.jsonl")).read_text(
            encoding="utf-8").splitlines()
        return "examples", ROOT / "examples" / "corpus", [json.loads(x) for x in lines if x.strip()]
    name = "followups.jsonl" if args.followups else "questions.jsonl"
    rows = [json.loads(x) for x in (DOC2DIAL / name).read_text(encoding="utf-8").splitlines() if x.strip()]
    part = [q for i, q in enumerate(rows) if args.doc2dial == "all" or (i % 5 == 4) == (args.doc2dial == "holdout")]
    return f"doc2dial-qa {name} {args.doc2dial}", DOC2DIAL / "corpus.jsonl", part


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--doc2dial", choices=["tune", "holdout", "all"], default=None)
    ap.add_argument("--followups", action="store_true", help="follow-up turns, searched as their standalone question")
    ap.add_argument("--weights", type=float, nargs="+", default=None,
                    help="semantic_weight values to compare (default: the context's, 0.4)")
    ap.add_argument("--postgres", metavar="ENV", default=None,
                    help="also rank with a PostgreSQL source whose connection string is in this environment variable")
    args = ap.parse_args(argv)

    from evident.connectors.federated import FederatedRetriever
    from evident.connectors.index.retriever import LocalCorpusRetriever
    from evident.connectors.query_meaning import prepare_meaning
    from evident.context import EvidentContext
    from evident.conversation.rule import condense
    from evident.embeddings import resolve_embeddings
    from evident.embeddings.meaning import QueryMeaning
    from evident.models import Turn

    label, corpus, rows = load(args)
    ctx = EvidentContext(embeddings="local")
    weights = args.weights or [ctx.semantic_weight]
    if any(not 0 < w <= 1 for w in weights):
        print("--weights: each must be in (0, 1]")
        return 2
    resolved = resolve_embeddings(ctx)
    if not resolved.on:
        print(f"embeddings are off: {resolved.reason}")
        return 1
    questions = [q for q in rows if q.get("answerable", True) and (q.get("gold_urls") or q.get("alt_urls"))]
    print(describe(f"retrieval quality, {label}, {len(questions)} answerable questions, "
                   f"semantic_weight {', '.join(map(str, weights))}"))
    names = {w: f"hybrid {w:g}" for w in weights}
    # Per ranking and question: the rank of the first gold page (0: none in the top_n).
    found: dict[str, list[int]] = {"words": [], **{name: [] for name in names.values()}}
    with tempfile.TemporaryDirectory() as tmp:
        local = LocalCorpusRetriever.from_corpus([corpus], index_path=Path(tmp) / "q.sqlite3", k=ctx.k)
        federated = FederatedRetriever.wrap(local, name="local", timeout_s=600.0, top_n=ctx.top_n)
        start = time.perf_counter()
        prepare_meaning(federated, resolved, "warm-up", ctx.semantic_weight)  # embeds the index once
        print(f"index built and embedded in {time.perf_counter() - start:.0f} s")
        searches = [("", federated)]
        if args.postgres:
            searches.append(("postgres ", _postgres_source(args.postgres, corpus, ctx, resolved)))
            found.update({f"postgres {name}": [] for name in ["words", *names.values()]})
        for q in questions:
            text = q["query"]
            if q.get("history"):
                text = condense(text, [Turn(role=m["role"], content=m["content"]) for m in q["history"]])[0]
            gold = set(q.get("gold_urls") or []) | set(q.get("alt_urls") or [])
            vector = prepare_meaning(federated, resolved, text, ctx.semantic_weight).meaning
            assert vector is not None, "the query could not be embedded"
            rankings: list[tuple[str, QueryMeaning | None]] = [("words", None)]
            rankings += [(names[w], QueryMeaning(vector.scorer, vector.vector, w)) for w in weights]
            for prefix, search in searches:
                for name, meaning in rankings:
                    urls = [d.url for d in search.search(text, meaning=meaning).documents]
                    found[prefix + name].append(next((i + 1 for i, u in enumerate(urls) if u in gold), 0))

    n = len(questions)
    print("\n| ranking | " + " | ".join(f"recall @{k}" for k in DEPTHS) + " | better / worse than words @3 (sign p) |")
    print("|---|" + "---|" * (len(DEPTHS) + 1))
    for name, ranks in found.items():
        cells = []
        for k in DEPTHS:
            h = sum(0 < r <= k for r in ranks)
            lo, hi = wilson(h, n)
            cells.append(f"{h / n:.3f} [{lo:.3f}, {hi:.3f}]")
        words = [0 < r <= 3 for r in found["words"]]
        mine = [0 < r <= 3 for r in ranks]
        wins = sum(b and not a for a, b in zip(words, mine, strict=True))
        losses = sum(a and not b for a, b in zip(words, mine, strict=True))
        versus = "reference" if name == "words" else f"{wins} / {losses} (p {sign_test(wins, losses):.3g})"
        print(f"| {name} | " + " | ".join(cells) + f" | {versus} |")
    return 0


def _postgres_source(env: str, corpus: Path, ctx: Any, resolved: Any) -> Any:
    """The corpus in a PostgreSQL source (schema `retrieval_quality`, emptied first), embedded, behind a
    federation of one as the embedded index is."""
    import psycopg
    from psycopg import sql

    from evident.connectors.federated import FederatedRetriever
    from evident.connectors.index.loaders import DEFAULT_LIMITS
    from evident.connectors.postgres.connections import Connections
    from evident.connectors.postgres.dsn import resolve_dsn
    from evident.connectors.postgres.refresh import embed_missing, refresh
    from evident.connectors.postgres.retriever import build_retriever

    dsn = resolve_dsn("postgres", None, env)
    with psycopg.connect(dsn.value(), autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier("retrieval_quality")))
    connections = Connections(dsn, connect_timeout_s=10, statement_timeout_ms=None)
    start = time.perf_counter()
    refresh(connections, "retrieval_quality", "english", [corpus], limits=DEFAULT_LIMITS)
    embed_missing(connections, "retrieval_quality", resolved.scorer)
    print(f"PostgreSQL source loaded and embedded in {time.perf_counter() - start:.0f} s")
    retriever = build_retriever(dsn, schema="retrieval_quality", config="english", k=ctx.k, source_name="postgres",
                                timeout_s=600.0, statement_timeout_ms=None)  # fmt: skip
    return FederatedRetriever.wrap(retriever, name="postgres", timeout_s=600.0, top_n=ctx.top_n)


if __name__ == "__main__":
    raise SystemExit(main())
