"""The embedded index and a PostgreSQL source at scale: build throughput, size, query latency and memory.

    python benchmarks/scale.py                              # 10,000 and 100,000 sections
    python benchmarks/scale.py --sizes 10000 100000 1000000 # and a million (long: about 20 minutes a build on 2 cores)
    PG_DSN=postgresql://… python benchmarks/scale.py --dsn-env PG_DSN       # an existing server

Sections are generated from the example corpus as in benchmarks/retrieval.py (`generate`: runs of a page's
paragraphs with numbers and names varied, about 1.5 kB each, a quarter visible to the board only),
deterministically. Each engine and size runs in a process of its own, so its peak memory (`ru_maxrss`) is its
own: the build (`LocalIndex.add_corpus`; `postgres.refresh.refresh`, one transaction) and then the example
questions as a staff member (permissions inside the search), `--rounds` times each, k = 8, by words.
PostgreSQL's size is its tables with their indexes and TOAST; its server's memory is not in the client's figure.
Without `--dsn-env`, a throwaway PostgreSQL 15 cluster is started in a temporary folder (tests/support/postgres.py).

`--keep DIR` keeps the embedded indexes in DIR (`sections-<size>.sqlite3`) and the throwaway PostgreSQL cluster in
DIR/postgres (a schema `scale_sections_<size>` per size); an index or schema already there is reused, not rebuilt.
`--side-by-side` then asks the questions of every size in one process, interleaved (each question on each
size's index or schema in turn, every round), and prints each size's p50 / p95 with its ratio to the size
before: a busier or quieter machine weighs on all sizes alike, which two runs minutes apart do not guarantee.

Both engines rank a bounded pool of candidates (their `candidate_pool` settings, docs/postgres.md#scale); up to
`--agreement-up-to` sections, each question is also asked with no bound (the exact ranking, linear in the
corpus), and "same top 8" counts the questions whose 8 results and scores are the same both ways.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from machine_info import describe  # noqa: E402  (benchmarks/ is on sys.path when run as a script)
from retrieval import build_local_index, generate, index_size, latencies, percentile  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def _questions(count: int) -> list[str]:
    lines = (ROOT / "examples" / "questions.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line)["query"] for line in lines if line.strip()][:count]


def _agreement(bounded: list[list[tuple[str, float]]], exact: list[list[tuple[str, float]]]) -> int:
    return sum(b == e for b, e in zip(bounded, exact, strict=True))


def _staff() -> list[str]:
    from evident.connectors.visibility import AclPolicy, principal_tokens
    from evident.models import Principal

    return list(principal_tokens(Principal(user="bench", groups=["staff"]), AclPolicy()))


def embedded(corpus: Path, workdir: Path, questions: list[str], rounds: int, agreement: bool) -> dict[str, Any]:
    from evident.connectors.index.embedded import LocalIndex

    target = workdir / f"{corpus.stem}.sqlite3"
    build_s: float | None
    if target.exists():  # kept by an earlier run (--keep): its build is not measured again
        with LocalIndex(target, read_only=True) as index:
            sections, build_s = index.count(), None
    else:
        sections, build_s = build_local_index(corpus, target)
    visible = _staff()
    with LocalIndex(target, read_only=True) as index:
        times = latencies(lambda q: index.search(q, k=8, visible=visible), questions, rounds)
        bounded = [[(d.url, s) for d, s in index.search(q, k=8, visible=visible)] for q in questions]
    same = None
    if agreement:
        with LocalIndex(target, read_only=True, candidate_pool=0) as exact:
            same = _agreement(bounded, [[(d.url, s) for d, s in exact.search(q, k=8, visible=visible)]
                                        for q in questions])  # fmt: skip
    return {"sections": sections, "build_s": build_s, "size_mb": index_size(target) / 1e6, "times": times,
            "same": same}


def _schema(size: int) -> str:
    return f"scale_sections_{size}"


def _postgres_kept(dsn_env: str, schema: str) -> bool:
    """Whether a run before this one left `schema` built (--keep): its meta table says a refresh finished."""
    import psycopg
    from psycopg import sql

    from evident.connectors.postgres.dsn import resolve_dsn

    with psycopg.connect(resolve_dsn("bench", None, dsn_env).value(), autocommit=True) as conn:
        found = conn.execute("SELECT to_regclass(%s)", (f"{schema}.meta",)).fetchone()
        if not (found and found[0]):
            return False
        meta = sql.SQL("SELECT 1 FROM {} WHERE key = 'generation'").format(sql.Identifier(schema, "meta"))
        return conn.execute(meta).fetchone() is not None


def _postgres_retriever(dsn_env: str, schema: str) -> Any:
    from evident.connectors.postgres.dsn import resolve_dsn
    from evident.connectors.postgres.retriever import build_retriever

    return build_retriever(resolve_dsn("bench", None, dsn_env), schema=schema, config="english", k=8,
                           source_name="bench", timeout_s=600, statement_timeout_ms=None)  # fmt: skip


def postgres(corpus: Path, dsn_env: str, questions: list[str], rounds: int, agreement: bool,
             keep: bool) -> dict[str, Any]:  # fmt: skip
    import psycopg
    from psycopg import sql

    from evident.connectors.index.loaders import DEFAULT_LIMITS
    from evident.connectors.postgres.connections import Connections
    from evident.connectors.postgres.dsn import resolve_dsn
    from evident.connectors.postgres.refresh import refresh

    schema = _schema(int(corpus.stem.removeprefix("sections-")))
    dsn = resolve_dsn("bench", None, dsn_env)
    build_s: float | None = None
    if not (keep and _postgres_kept(dsn_env, schema)):
        with psycopg.connect(dsn.value(), autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))
        start = time.perf_counter()
        refresh(Connections(dsn, connect_timeout_s=10, statement_timeout_ms=None), schema, "english", [corpus],
                limits=DEFAULT_LIMITS)  # fmt: skip
        build_s = time.perf_counter() - start
        with psycopg.connect(dsn.value(), autocommit=True) as conn:
            conn.execute(sql.SQL("VACUUM ANALYZE {}").format(sql.Identifier(schema, "documents")))
    with psycopg.connect(dsn.value(), autocommit=True) as conn:
        size = conn.execute("SELECT sum(pg_total_relation_size(c.oid)) FROM pg_class c JOIN pg_namespace n"
                            " ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relkind = 'r'",
                            (schema,)).fetchone()  # fmt: skip
        sections = conn.execute(sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(schema, "documents")))
        count = sections.fetchone()
    retriever = _postgres_retriever(dsn_env, schema)
    visible = _staff()
    times = latencies(lambda q: retriever.search_visible(q, visible, None), questions, rounds)
    bounded = [[(d.url, s) for d, s in retriever.search_visible(q, visible, None)] for q in questions]
    same = None
    if agreement:
        retriever.candidate_pool = 0
        same = _agreement(bounded, [[(d.url, s) for d, s in retriever.search_visible(q, visible, None)]
                                    for q in questions])  # fmt: skip
    retriever.close()
    return {"sections": int(count[0]) if count else 0, "build_s": build_s, "size_mb": int(size[0] or 0) / 1e6,
            "times": times, "same": same}


def side_by_side(engine: str, sizes: list[int], keep: Path, dsn_env: str | None, questions: list[str],
                 rounds: int) -> dict[int, list[float]]:  # fmt: skip
    """Milliseconds of each question at each size, asked in turn at every size, `rounds` times after a
    warm-up round: the sizes share the machine's state at every moment."""
    from collections.abc import Callable
    from contextlib import ExitStack

    from evident.connectors.index.embedded import LocalIndex

    visible = _staff()
    times: dict[int, list[float]] = {size: [] for size in sizes}
    with ExitStack() as stack:
        searches: dict[int, Callable[[str], object]] = {}
        for size in sizes:
            if engine == "embedded":
                index = stack.enter_context(LocalIndex(keep / f"sections-{size}.sqlite3", read_only=True))
                searches[size] = lambda q, index=index: index.search(q, k=8, visible=visible)
            else:
                assert dsn_env is not None
                retriever = _postgres_retriever(dsn_env, _schema(size))
                stack.callback(retriever.close)
                searches[size] = lambda q, retriever=retriever: retriever.search_visible(q, visible, None)
        for round_ in range(rounds + 1):
            for q in questions:
                for size, search in searches.items():
                    start = time.perf_counter()
                    search(q)
                    if round_:
                        times[size].append((time.perf_counter() - start) * 1000)
    return times


def _one(args: argparse.Namespace) -> None:
    """The child process: one engine at one size; prints its figures as JSON."""
    corpus, questions = Path(args.corpus), _questions(args.queries)
    if args.one == "embedded":
        with tempfile.TemporaryDirectory() as tmp:
            out = embedded(corpus, Path(args.keep or tmp), questions, args.rounds, args.agreement)
    else:
        out = postgres(corpus, args.dsn_env, questions, args.rounds, args.agreement, args.keep is not None)
    out["max_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps(out))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    ap.add_argument("--queries", type=int, default=70, help="how many example questions")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--dsn-env", default=None, help="environment variable holding a PostgreSQL connection string")
    ap.add_argument("--engines", nargs="+", choices=["embedded", "postgres"], default=["embedded", "postgres"])
    ap.add_argument("--agreement-up-to", type=int, default=100_000,
                    help="up to this many sections, compare each top 8 with the unbounded ranking's")
    ap.add_argument("--keep", type=Path, default=None,
                    help="keep (and reuse) the embedded indexes and the PostgreSQL cluster in this folder")
    ap.add_argument("--side-by-side", action="store_true",
                    help="with --keep: ask every size's index in one process, interleaved, and print the ratios")
    ap.add_argument("--one", choices=["embedded", "postgres"], help=argparse.SUPPRESS)
    ap.add_argument("--agreement", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--corpus", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.side_by_side and args.keep is None:
        ap.error("--side-by-side needs --keep DIR")
    if args.keep is not None:
        args.keep.mkdir(parents=True, exist_ok=True)
    if args.one:
        _one(args)
        return 0

    import os

    server = None
    if "postgres" in args.engines and not args.dsn_env:
        from tests.support.postgres import PostgresServer

        server = PostgresServer.start(kept=args.keep / "postgres" if args.keep is not None else None)
        os.environ["EVIDENT_SCALE_DSN"], args.dsn_env = server.dsn(), "EVIDENT_SCALE_DSN"
    print(describe(f"{args.queries} example questions x {args.rounds} rounds, k = 8, as a staff member, by words"))
    rows: list[tuple[str, int, dict[str, Any]]] = []
    side: list[tuple[str, dict[int, list[float]]]] = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for size in args.sizes:
                corpus = Path(tmp) / f"sections-{size}.jsonl"
                kept = args.keep is not None and all(
                    (args.keep / f"{corpus.stem}.sqlite3").exists() if engine == "embedded"
                    else _postgres_kept(args.dsn_env, _schema(size)) for engine in args.engines)  # fmt: skip
                if kept:
                    corpus.touch()  # the kept indexes are reused: their text is not needed
                else:
                    mb = generate(size, corpus) / 1e6
                    print(f"{size:,} sections generated ({mb:.0f} MB of JSONL)", flush=True)
                for engine in args.engines:
                    command = [sys.executable, __file__, "--one", engine, "--corpus", str(corpus),
                               "--queries", str(args.queries), "--rounds", str(args.rounds)]  # fmt: skip
                    if args.keep is not None:
                        command += ["--keep", str(args.keep)]
                    if args.dsn_env:
                        command += ["--dsn-env", args.dsn_env]
                    if size <= args.agreement_up_to:
                        command.append("--agreement")
                    done = subprocess.run(command, capture_output=True, text=True, check=False)
                    if done.returncode != 0:
                        print(f"{engine} at {size:,}: failed: {done.stderr.strip()[-500:]}")
                        continue
                    rows.append((engine, size, json.loads(done.stdout.strip().splitlines()[-1])))
                    print(f"{engine} at {size:,}: done", flush=True)
                corpus.unlink()
        if args.side_by_side:
            assert args.keep is not None
            for engine in args.engines:
                times = side_by_side(engine, args.sizes, args.keep, args.dsn_env, _questions(args.queries),
                                     args.rounds)  # fmt: skip
                side.append((engine, times))
    finally:
        if server is not None:
            server.stop(keep=args.keep is not None)
    print("\n| engine | sections | build s | sections/s | size MB | query p50 ms | query p95 ms | peak RSS MB "
          "| same top 8 |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for engine, _, r in rows:
        same = "" if r["same"] is None else f"{r['same']}/{args.queries}"
        # None: a kept index, whose build this run did not measure
        rate = f"{r['build_s']:.1f} | {r['sections'] / r['build_s']:,.0f}" if r["build_s"] is not None else "kept | –"
        print(f"| {engine} | {r['sections']:,} | {rate} | "
              f"{r['size_mb']:.0f} | {percentile(r['times'], 50):.2f} | {percentile(r['times'], 95):.2f} | "
              f"{r['max_rss_mb']:.0f} | {same} |")
    if side:
        print(f"\nSide by side, one process, interleaved ({args.queries} questions x {args.rounds} rounds each):")
        print("\n| engine | sections | query p50 ms | query p95 ms | p50 x previous | p95 x previous |")
        print("|---|---:|---:|---:|---:|---:|")
    for engine, times in side:
        previous: tuple[float, float] | None = None
        for size in args.sizes:
            p50, p95 = percentile(times[size], 50), percentile(times[size], 95)
            growth = f"{p50 / previous[0]:.2f} | {p95 / previous[1]:.2f}" if previous else "– | –"
            print(f"| {engine} | {size:,} | {p50:.2f} | {p95:.2f} | {growth} |")
            previous = (p50, p95)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
