"""Load check of the served graph: N offline queries against `evident serve`, on `langgraph dev` or on
Aegra replicas sharing one PostgreSQL and one Redis.

    python benchmarks/server.py                        # 50 concurrent queries, 8 jobs (~15 s)
    python benchmarks/server.py --queries 100 --jobs 16 --rounds 3
    python benchmarks/server.py --server aegra --replicas 1 --queries 200 --concurrency 40
    python benchmarks/server.py --server aegra --replicas 2 --queries 200 --concurrency 40

The server is started exactly as `evident serve` starts it (tests/e2e/dev_server.py: 127.0.0.1, a free
port, the project's langgraph.json made hermetic, no outside connection), on the bundled example
corpus in offline mode. With `--server aegra` the benchmark also starts a throwaway PostgreSQL cluster
and a Redis on loopback (tests/support/), migrates the database once (`--migrate-only`) and starts
`--replicas` replicas (`evident serve --database … --redis … --no-migrate`, the Python of `make
install-server`), one after the other; the clients take the replicas in turn. After one warm-up query
per server, `--queries` different questions from examples/questions.jsonl are sent, each as a plain
`POST /runs/wait`, by `--concurrency` client threads (default: all at once) released together. Every
reply must be HTTP 200 with status "answered" or "insufficient" ("error" or "degraded", a failed
source, count as errors).

Reported per round: end-to-end latency p50/p95/max as the client sees it, throughput (queries per
second of wall time), and the pipeline's own time inside the server (the sum of the run's
`timings_ms`), whose difference to the end-to-end latency is the server's queueing and transport.
`langgraph dev` is the in-memory development server: its queue polls for new runs about every
0.5 s and runs `--jobs` runs at a time (`evident serve --jobs`). Aegra's `/runs/wait` polls for the
end of a run every 2 s, so no answer there comes sooner (docs/deployment.md). The numbers describe
this machine (every process shares its cores), not a deployment of several machines.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402
from machine_info import describe  # noqa: E402  (benchmarks/ is on sys.path when run as a script)

from tests.e2e import dev_server  # noqa: E402
from tests.e2e.dev_server import DevServer  # noqa: E402
from tests.support.postgres import PostgresServer  # noqa: E402
from tests.support.redis_server import RedisServer  # noqa: E402

EXAMPLES = ROOT / "examples"


def machine() -> str:
    return describe()


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def questions(n: int) -> list[str]:
    lines = (EXAMPLES / "questions.jsonl").read_text(encoding="utf-8").splitlines()
    qs = [json.loads(line)["query"] for line in lines if line.strip()]
    return [qs[i % len(qs)] for i in range(n)]


def ask(url: str, query: str) -> tuple[float, dict[str, Any] | None, str]:
    start = time.perf_counter()
    try:
        response = httpx.post(f"{url}/runs/wait", json={"assistant_id": "evident", "input": {"query": query}},
                              timeout=300)
    except httpx.HTTPError as exc:
        return time.perf_counter() - start, None, f"{type(exc).__name__}: {exc}"
    elapsed = time.perf_counter() - start
    if response.status_code != 200:
        return elapsed, None, f"HTTP {response.status_code}: {response.text[:200]}"
    body = response.json()
    if body.get("status") == "error":
        return elapsed, body, f"status error: {body.get('error')}"
    if body.get("status") == "degraded":  # the one local source failed: under load, that is an error too
        return elapsed, body, f"status degraded: {body.get('source_errors') or body.get('model_errors')}"
    return elapsed, body, ""


def round_of(urls: list[str], qs: list[str], concurrency: int) -> dict[str, Any]:
    results: list[tuple[float, dict[str, Any] | None, str]] = [(0.0, None, "not run")] * len(qs)
    clients = min(concurrency, len(qs))
    gate = threading.Barrier(clients + 1)
    todo = iter(range(len(qs)))
    lock = threading.Lock()

    def worker() -> None:
        gate.wait()
        while True:
            with lock:
                i = next(todo, None)
            if i is None:
                return
            results[i] = ask(urls[i % len(urls)], qs[i])

    threads = [threading.Thread(target=worker) for _ in range(clients)]
    for t in threads:
        t.start()
    gate.wait()  # every client is ready: release them together
    start = time.perf_counter()
    for t in threads:
        t.join()
    wall = time.perf_counter() - start
    errors = [e for _, _, e in results if e]
    latencies = [r[0] * 1000 for r in results]
    pipeline = [sum((b or {}).get("timings_ms", {}).values()) for _, b, _ in results if b]
    statuses: dict[str, int] = {}
    for _, body, _ in results:
        status = (body or {}).get("status", "error")
        statuses[status] = statuses.get(status, 0) + 1
    return {"wall_s": wall, "errors": errors, "latencies_ms": latencies, "pipeline_ms": pipeline,
            "statuses": statuses}


@contextmanager
def servers(args: argparse.Namespace, folder: Path, env: dict[str, str]) -> Iterator[list[DevServer]]:
    """The servers under load: one `langgraph dev`, or `--replicas` Aegra replicas on one database."""
    with ExitStack() as stack:
        if args.server == "langgraph-dev":
            started = [dev_server.start(folder / "server", env=env, jobs=args.jobs)]
        else:
            postgres = PostgresServer.start()
            stack.callback(postgres.stop)
            redis = stack.enter_context(RedisServer(dev_server.free_port()))
            database = postgres.create_database("bench")
            dev_server.migrate(database, folder / "migrate")
            started = []
            for i in range(args.replicas):  # one after the other: see docs/deployment.md
                started.append(dev_server.start_aegra(folder / f"replica-{i + 1}", database=database,
                                                      redis=redis.url, migrate=False, env=env, jobs=args.jobs))
        try:
            yield started
        finally:
            for server in started:
                server.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--queries", type=int, default=50, help="queries per round")
    parser.add_argument("--concurrency", type=int, default=0, help="client threads (default: one per query)")
    parser.add_argument("--jobs", type=int, default=8, help="runs each server executes at once")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--server", choices=("langgraph-dev", "aegra"), default="langgraph-dev")
    parser.add_argument("--replicas", type=int, default=1, help="Aegra replicas (with --server aegra)")
    args = parser.parse_args()
    concurrency = args.concurrency or args.queries

    with tempfile.TemporaryDirectory(prefix="evident-bench-server-") as tmp:
        folder = Path(tmp)
        env = {"EVIDENT_INDEX_DIR": str(folder / "indexes"), "EVIDENT_CORPUS": str(EXAMPLES / "corpus"),
               "EVIDENT_EMBEDDINGS": "none"}
        started = time.perf_counter()
        with servers(args, folder, env) as running:
            startup = time.perf_counter() - started
            urls = [server.url for server in running]
            for url in urls:
                _, _, problem = ask(url, "warm-up: how do I submit an expense report?")
                if problem:
                    print(f"warm-up failed: {problem}", file=sys.stderr)
                    return 1
            rounds = [round_of(urls, questions(args.queries), concurrency) for _ in range(args.rounds)]

    print(f"machine: {machine()}")
    if args.server == "aegra":
        print(f"server: evident serve --database (Aegra), {args.replicas} replica(s) on one PostgreSQL and Redis, "
              f"--jobs {args.jobs} each; started in {startup:.1f} s")
    else:
        print(f"server: evident serve (langgraph dev, in-memory), --jobs {args.jobs}; started in {startup:.1f} s")
    print(f"load: {args.queries} offline queries (POST /runs/wait), {concurrency} at a time, "
          f"x {args.rounds} round(s)\n")
    header = "| round | errors | p50 ms | p95 ms | max ms | throughput q/s | pipeline p50 ms | statuses |"
    print(header)
    print("|" + "|".join("---" for _ in range(header.count("|") - 1)) + "|")
    failed = 0
    for i, r in enumerate(rounds, 1):
        lat, pipe = r["latencies_ms"], r["pipeline_ms"] or [0.0]
        statuses = ", ".join(f"{k} {v}" for k, v in sorted(r["statuses"].items()))
        print(f"| {i} | {len(r['errors'])} | {statistics.median(lat):.0f} | {percentile(lat, 0.95):.0f} | "
              f"{max(lat):.0f} | {args.queries / r['wall_s']:.1f} | {statistics.median(pipe):.0f} | {statuses} |")
        failed += len(r["errors"])
        for e in r["errors"][:5]:
            print(f"  error: {e}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
