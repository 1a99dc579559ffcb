"""Hybrid retrieval's cost: query overhead, a cold `evident ask`, indexing throughput and index size.

    python benchmarks/hybrid.py                 # about 3 minutes on 2 cores (the examples embedded for real)
    python benchmarks/hybrid.py --sizes 2000    # the synthetic index at other sizes
    python benchmarks/hybrid.py --doc2dial      # also the development set's 273 pages (embeds them: ~4 min)

Reference runs, in the same process: the words-only search (`LocalIndex.search` without `meaning`) and
the words-only index build. Reported:

- query overhead, warm: (embedding the question with the local model + the hybrid search) minus the
  words-only search of the same question, p50/p95 over the example questions, each asked `--rounds`
  times; each round embeds the question anew (the vector cache is bypassed), as a new question would;
- a cold `evident ask` over the examples (a fresh process: imports, settings, the index opened, the model
  loaded and checked, one answer), with embeddings on and off, median of `--cold` runs, the index
  already built and embedded;
- indexing: sections per second of the words-only build, and of embedding them; windows per second;
  the index's size on disk without and with vectors.

The synthetic index (benchmarks/retrieval.py's generator) gets, for each of its windows, the real vector
of a window of the examples (picked by the window text's hash): embedding 10,000 sections for real
takes the better part of an hour here, and a window's cost at query time does not depend on its values.
Its quality is not measured here (docs/evaluation.md is).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from machine_info import describe  # noqa: E402  (benchmarks/ is on sys.path when run as a script)
from retrieval import generate, index_size, percentile  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def questions() -> list[str]:
    lines = (ROOT / "examples" / "questions.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line)["query"] for line in lines if line.strip()]


class PooledEmbeddings:
    """Real vectors of the example windows, handed out by text hash (see the module docstring)."""

    model_id = "bench:pooled-all-MiniLM-L6-v2"

    def __init__(self, pool: Any) -> None:
        self.pool = pool

    def _pick(self, text: str) -> list[float]:
        digest = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big")
        return [float(x) for x in self.pool[digest % len(self.pool)]]

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self._pick(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self._pick(text)


def _checkpoint(target: Path) -> None:
    import sqlite3

    with sqlite3.connect(target) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")


def _words_size(target: Path) -> int:
    import sqlite3

    copy = target.with_name(target.name + ".words")
    with sqlite3.connect(target) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        conn.execute(f"VACUUM INTO '{copy}'")
    with sqlite3.connect(copy) as conn:
        conn.execute("DELETE FROM passage_vectors")
        conn.commit()
        conn.execute("VACUUM")
    size = copy.stat().st_size + sum(p.stat().st_size for p in Path(f"{target}.tantivy").rglob("*") if p.is_file())
    copy.unlink()
    return size


def query_overhead(index: Any, scorer: Any, qs: list[str], rounds: int) -> dict[str, float]:
    from evident.embeddings.meaning import QueryMeaning
    from evident.embeddings.scorer import VectorCache

    for q in qs:  # warm-up: the matrix in memory, SQLite's statement cache
        index.search(q, k=8)
        index.search(q, k=8, meaning=QueryMeaning(scorer, scorer.embed_query(q)))
    words: list[float] = []
    hybrid: list[float] = []
    overhead: list[float] = []
    for _ in range(rounds):
        for q in qs:
            t = time.perf_counter()
            index.search(q, k=8)
            w = time.perf_counter() - t
            scorer.cache = VectorCache()  # a new question: embedded for real
            t = time.perf_counter()
            index.search(q, k=8, meaning=QueryMeaning(scorer, scorer.embed_query(q)))
            h = time.perf_counter() - t
            words.append(w * 1000)
            hybrid.append(h * 1000)
            overhead.append((h - w) * 1000)
    return {"words_p50": percentile(words, 50), "words_p95": percentile(words, 95),
            "hybrid_p50": percentile(hybrid, 50), "hybrid_p95": percentile(hybrid, 95),
            "over_p50": percentile(overhead, 50), "over_p95": percentile(overhead, 95)}


def build(corpus: Path, target: Path, scorer: Any) -> dict[str, Any]:
    from evident.connectors.index.embedded import LocalIndex

    t = time.perf_counter()
    with LocalIndex(target) as index:
        index.refresh([corpus], on_skip=lambda *_: None)
        count = index.count()
    words_s = time.perf_counter() - t
    with LocalIndex(target) as index:
        stats = index.embed(scorer)
    _checkpoint(target)  # both sizes without a write-ahead log
    return {"sections": count, "words_s": words_s, "embed_s": stats.seconds, "windows": stats.windows,
            "words_mb": _words_size(target) / 1e6, "hybrid_mb": index_size(target) / 1e6}


def cold_ask(index_dir: Path, runs: int) -> dict[str, float]:
    exe = Path(sys.executable).with_name("evident")
    q = questions()[0]
    out: dict[str, float] = {}
    for label, extra in (("words", {"EVIDENT_EMBEDDINGS": "none"}), ("hybrid", {})):
        env = {k: v for k, v in os.environ.items() if not k.startswith("EVIDENT_")}
        env.update({"EVIDENT_INDEX_DIR": str(index_dir), **extra})
        cmd = [str(exe), "ask", q, "--corpus", str(ROOT / "examples" / "corpus"), "--json"]
        subprocess.run(cmd, env=env, capture_output=True, check=True)  # builds and embeds the index once
        times = []
        for _ in range(runs):
            t = time.perf_counter()
            subprocess.run(cmd, env=env, capture_output=True, check=True)
            times.append(time.perf_counter() - t)
        out[label] = statistics.median(times)
    return out


def row(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="*", default=[10_000])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--cold", type=int, default=3)
    parser.add_argument("--doc2dial", action="store_true")
    args = parser.parse_args(argv)

    from evident.context import EvidentContext
    from evident.embeddings import resolve_embeddings
    from evident.embeddings.scorer import SemanticScorer, VectorCache

    resolved = resolve_embeddings(EvidentContext(embeddings="local"))
    scorer = resolved.scorer
    if scorer is None:
        print(f"embeddings are off: {resolved.reason}")
        return 1
    print(describe(f"hybrid retrieval, model {resolved.model_id[:40]}…"))
    qs = questions()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        corpora: list[tuple[str, Path, Any]] = [("examples", ROOT / "examples" / "corpus", scorer)]
        if args.doc2dial:
            pages = ROOT.parent / "shared" / "data" / "doc2dial-qa" / "corpus.jsonl"
            corpora.append(("doc2dial-qa pages", pages, scorer))
        builds: dict[str, dict[str, Any]] = {}
        overheads: dict[str, dict[str, float]] = {}
        from evident.connectors.index.embedded import LocalIndex

        for name, corpus, used in corpora:
            used.cache = VectorCache()
            target = work / f"{name.split()[0]}.sqlite3"
            builds[name] = build(corpus, target, used)
            with LocalIndex(target) as index:
                overheads[name] = query_overhead(index, scorer, qs, args.rounds)
        with LocalIndex(work / "examples.sqlite3") as index:
            pool = index._loaded_vectors(scorer.model_id).matrix  # type: ignore[union-attr]
        for size in args.sizes:
            corpus = work / f"synthetic-{size}.jsonl"
            generate(size, corpus)
            name = f"synthetic {size:,} (pooled vectors)"
            pooled = SemanticScorer(PooledEmbeddings(pool), model_id=PooledEmbeddings.model_id)  # type: ignore[arg-type]
            target = work / f"synthetic-{size}.sqlite3"
            builds[name] = build(corpus, target, pooled)
            with LocalIndex(target) as index:
                overheads[name] = query_overhead(index, _Same(scorer, PooledEmbeddings.model_id), qs, args.rounds)
        cold = cold_ask(work / "cold", args.cold)

    print("\nQuery overhead, warm (ms; overhead = embedding the question + hybrid search - words-only search)\n")
    print(row(["index", "words p50", "words p95", "hybrid p50", "hybrid p95", "overhead p50", "overhead p95"]))
    print(row(["---"] * 7))
    for name, o in overheads.items():
        print(row([name, *(f"{o[k]:.1f}" for k in ("words_p50", "words_p95", "hybrid_p50", "hybrid_p95",
                                                    "over_p50", "over_p95"))]))
    print("\nIndexing (sections/s; the reference is the words-only build of the same index)\n")
    print(row(["index", "sections", "words-only build", "embedding", "windows", "windows/s", "ratio",
               "size words-only MB", "size with vectors MB"]))
    print(row(["---"] * 9))
    for name, b in builds.items():
        note = "" if "pooled" not in name else " (pooled: no model)"
        print(row([name, str(b["sections"]), f"{b['sections'] / b['words_s']:.0f}/s",
                   f"{b['sections'] / b['embed_s']:.1f}/s{note}", str(b["windows"]),
                   f"{b['windows'] / b['embed_s']:.1f}", f"{b['embed_s'] / b['words_s']:.1f}x",
                   f"{b['words_mb']:.2f}", f"{b['hybrid_mb']:.2f}"]))
    print(f"\nCold `evident ask` over the examples (median of {args.cold}): words only {cold['words']:.2f} s, "
          f"hybrid {cold['hybrid']:.2f} s, +{cold['hybrid'] - cold['words']:.2f} s\n")
    return 0


class _Same:
    """The real scorer's query vectors under the pooled index's model id (its vectors are the model's)."""

    def __init__(self, scorer: Any, model_id: str) -> None:
        self._scorer = scorer
        self.model_id = model_id

    def __getattr__(self, name: str) -> Any:
        return getattr(self._scorer, name)

    def __setattr__(self, name: str, value: Any) -> None:
        if name in ("_scorer", "model_id"):
            object.__setattr__(self, name, value)
        else:
            setattr(self._scorer, name, value)


if __name__ == "__main__":
    raise SystemExit(main())
