"""Per-user fairness under a flood: one user's answer time while another floods the run queue.

    python benchmarks/fairness.py                              # langgraph dev, the default limit
    python benchmarks/fairness.py --server aegra
    python benchmarks/fairness.py --max-active-runs 100000     # no effective limit: the flood as it was

The server is started as `evident serve` starts it (benchmarks/server.py: 127.0.0.1, a free port, the
examples in offline mode, `--jobs` runs at a time), with a tokens file of two users. Bob asks `--asks`
questions one after the other (`POST /runs/wait`) on the idle server, then again while alice floods:
`--flooders` client threads send `--flood` background runs (`POST /runs`) in all, as fast as the server
answers (issue 50's attack: 150 runs in under a second), and bob asks as soon as the flood is on; alice's
runs past `max_active_runs` (the deployment's limit of pending and running runs per user,
evident/web/fairness.py) are refused with 429. Printed: bob's answer times idle and under the flood (his
first question under it meets the fullest queue: the worst is the one to read), their ratios to his idle
median, and how many of alice's runs were taken and refused.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402
from server import EXAMPLES, machine, questions, servers  # noqa: E402  (benchmarks/ is on sys.path)

from tests.e2e.corpus import tokens_file  # noqa: E402

ALICE, BOB = "alice-flood-token", "bob-asks-token"


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def answer_times(url: str, asks: list[str]) -> list[float]:
    times = []
    for query in asks:
        start = time.perf_counter()
        response = httpx.post(f"{url}/runs/wait", headers=bearer(BOB), timeout=600,
                              json={"assistant_id": "evident", "input": {"query": query}})
        times.append(time.perf_counter() - start)
        if response.status_code != 200 or response.json().get("status") not in ("answered", "insufficient"):
            raise SystemExit(f"bob's question failed: HTTP {response.status_code} {response.text[:200]}")
    return times


def flood(url: str, flooders: int, total: int) -> dict[int, int]:
    """Alice's `total` background runs, sent without pause by `flooders` threads (counts by HTTP status)."""
    counts: dict[int, int] = {}
    lock = threading.Lock()
    started = threading.Barrier(flooders + 1)

    def send() -> None:
        with httpx.Client(base_url=url, headers=bearer(ALICE), timeout=60) as client:
            started.wait()
            while True:
                with lock:
                    if sum(counts.values()) + counts.get(0, 0) >= total:
                        return
                    counts[0] = counts.get(0, 0) + 1  # in flight
                status = client.post("/runs", json={"assistant_id": "evident",
                                                    "input": {"query": "expense report deadline"}}).status_code
                with lock:
                    counts[0] -= 1
                    counts[status] = counts.get(status, 0) + 1

    threads = [threading.Thread(target=send, daemon=True) for _ in range(flooders)]
    for thread in threads:
        thread.start()
    started.wait()
    threading.Thread(target=lambda: [t.join() for t in threads], daemon=True).start()
    return counts


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--server", choices=("langgraph-dev", "aegra"), default="langgraph-dev")
    parser.add_argument("--jobs", type=int, default=8, help="runs the server executes at once")
    parser.add_argument("--max-active-runs", type=int, default=0, help="the per-user limit (default: the deployment's)")
    parser.add_argument("--asks", type=int, default=5, help="bob's questions, idle and under the flood")
    parser.add_argument("--flooders", type=int, default=20, help="alice's client threads")
    parser.add_argument("--flood", type=int, default=150, help="alice's background runs in all")
    args = parser.parse_args()
    args.replicas = 1

    with tempfile.TemporaryDirectory(prefix="evident-bench-fairness-") as tmp:
        folder = Path(tmp)
        tokens = tokens_file(folder / "tokens.json", {ALICE: ("alice", ["staff"]), BOB: ("bob", ["staff"])})
        env = {"EVIDENT_INDEX_DIR": str(folder / "indexes"), "EVIDENT_CORPUS": str(EXAMPLES / "corpus"),
               "EVIDENT_EMBEDDINGS": "none", "EVIDENT_AUTH_TOKENS_FILE": str(tokens)}
        if args.max_active_runs:
            env["EVIDENT_MAX_ACTIVE_RUNS"] = str(args.max_active_runs)
        with servers(args, folder, env) as running:
            url = running[0].url
            asks = questions(args.asks)
            answer_times(url, asks[:1])  # warm-up
            idle = answer_times(url, asks)
            counts = flood(url, args.flooders, args.flood)
            deadline = time.monotonic() + 60
            while sum(n for status, n in counts.items() if status) < args.flooders and time.monotonic() < deadline:
                time.sleep(0.05)  # until the flood is on: its first runs are answered
            loaded = answer_times(url, asks)

    limit = args.max_active_runs or "the default"
    print(f"machine: {machine()}")
    print(f"server: {args.server}, --jobs {args.jobs}, max_active_runs {limit}; alice floods with {args.flood} "
          f"background runs (POST /runs) from {args.flooders} threads\n")
    print("| bob's answer | median s | max s |")
    print("|---|---|---|")
    print(f"| idle | {statistics.median(idle):.2f} | {max(idle):.2f} |")
    print(f"| under alice's flood | {statistics.median(loaded):.2f} | {max(loaded):.2f} |")
    idle_median = statistics.median(idle)
    print(f"\nratio to bob's idle median: median {statistics.median(loaded) / idle_median:.2f}, "
          f"worst {max(loaded) / idle_median:.2f}")
    print("alice's runs: " + ", ".join(f"HTTP {status}: {n}" for status, n in sorted(counts.items()) if status))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
