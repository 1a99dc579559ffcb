"""Embeddings benchmark: the local default (all-MiniLM-L6-v2, int8 ONNX on onnxruntime) on this machine.

    python benchmarks/embeddings.py              # about a minute on 2 cores
    python benchmarks/embeddings.py --repeats 3  # quicker

Reported, each the median of `--repeats` runs: the cold start of a fresh Python process (import,
sha256 of both files, session and tokenizer loaded, one sentence embedded), the sha256 of the model
file alone, and throughput in texts per second for short sentences (the examples' questions) and
200-word passages (cut from the example corpus), with 1 and 2 onnxruntime threads; the ratio column
compares each with the reference run, 1 thread on short sentences, measured in the same process.
Also the resident memory the loaded model adds, and a query's latency (one sentence, warm).
Texts bypass the vector cache (`LocalEmbeddings.encode`): each run embeds for real.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

from machine_info import describe  # noqa: E402  (benchmarks/ is on sys.path when run as a script)

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

COLD = (
    "import time; t = time.perf_counter()\n"
    "from evident.embeddings.local import LocalEmbeddings\n"
    "LocalEmbeddings(threads=1).encode(['How long does an old API key keep working after I rotate it?'])\n"
    "print(time.perf_counter() - t)\n"
)


def median_time(run: object, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        run()  # type: ignore[operator]
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def sentences() -> list[str]:
    lines = (ROOT / "examples" / "questions.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line)["query"] for line in lines if line.strip()]


def passages(words: int = 200, count: int = 64) -> list[str]:
    from evident.connectors.index.loaders import load_corpus

    text = " ".join(d.content for d in load_corpus(str(ROOT / "examples" / "corpus")))
    tokens = text.split()
    return [" ".join(tokens[i * words : (i + 1) * words]) for i in range(min(count, len(tokens) // words))]


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=5, help="timed runs per measurement (median)")
    args = parser.parse_args()

    import onnxruntime
    import tokenizers

    from evident.embeddings.local import LocalEmbeddings
    from evident.embeddings.model_files import _digests, locate_model_files, sha256_of

    print(describe(f"onnxruntime {onnxruntime.__version__}", f"tokenizers {tokenizers.__version__}"))
    cold = [float(subprocess.run([sys.executable, "-c", COLD], capture_output=True, text=True, check=True,
                                 cwd=ROOT).stdout) for _ in range(args.repeats)]
    files = locate_model_files()

    def hash_model() -> None:
        _digests.clear()
        sha256_of(files.model)

    hashing = median_time(hash_model, args.repeats)
    short, long = sentences(), passages()
    before = rss_mb()
    models = {threads: LocalEmbeddings(files, threads=threads) for threads in (1, 2)}
    for model in models.values():
        model.encode(short[:4])  # loaded and warmed
    loaded = rss_mb() - before
    rows = []
    reference = None
    for label, texts in (("short sentences", short), ("200-word passages", long)):
        for threads, model in models.items():
            seconds = median_time(lambda m=model, t=texts: m.encode(t), args.repeats)
            rate = len(texts) / seconds
            reference = reference or rate
            rows.append((f"{label}, {threads} thread{'s' if threads > 1 else ''}", len(texts), rate, rate / reference))
    query = median_time(lambda: models[1].encode([short[0]]), args.repeats * 20)
    peak = rss_mb() - before

    print(f"\ncold start in a fresh process (import, sha256 of both files, load, one sentence): "
          f"{statistics.median(cold) * 1000:.0f} ms")
    print(f"sha256 of the model file (23 MB), uncached: {hashing * 1000:.0f} ms")
    print(f"one query sentence, warm, 1 thread: {query * 1000:.1f} ms")
    print(f"resident memory added by two loaded sessions: {loaded:.0f} MB; peak while embedding: {peak:.0f} MB")
    print(f"\n{'texts':<30} {'n':>4} {'texts/s':>9} {'vs 1 thread, short':>19}")
    for label, n, rate, ratio in rows:
        print(f"{label:<30} {n:>4} {rate:>9.0f} {ratio:>18.2f}×")


if __name__ == "__main__":
    main()
