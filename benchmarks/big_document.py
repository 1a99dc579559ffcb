"""One very large document: what a query costs once it is indexed as sections (issue 9, item 5).

    python benchmarks/big_document.py                  # a 50 MB Markdown manual, default section budget
    python benchmarks/big_document.py --mb 10 --section-chars 50000

A Markdown manual of `--mb` MB (chapters with headings, generated prose, and one chapter holding
the facts the questions ask about) is written to a temp folder and indexed with `evident index`'s
code path (`LocalIndex.refresh`) with the size cap raised above it (`max_file_bytes`). Then, in a
fresh process, the default graph answers `--queries` questions in offline mode over that index; the
process reports each query's wall time (the first one includes opening the index and checking
the corpus for changes) and its peak RSS (Linux `VmHWM`) before the first query and after the
last, so the difference is what the queries themselves cost.

Target: < 2 s and < 500 MB per query (before sections, one such document took 2 min 14 s and 3.4 GB).
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from machine_info import describe  # noqa: E402  (benchmarks/ is on sys.path when run as a script)

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

WORDS = ("policy employee request approval manager system access account report data review process team "
         "service customer support release version deploy network security incident budget travel expense "
         "contract vendor invoice payment schedule training office device laptop backup storage").split()
FACTS = [
    ("When is the pelican budget reviewed?", "The pelican budget is reviewed every April by the finance board."),
    ("Who approves walrus contracts?", "Walrus contracts are approved by the legal lead and the CFO."),
    ("How long are heron backups kept?", "Heron backups are kept for 400 days in cold storage."),
]

QUERY_PROCESS = r"""
import json, sys, time
from pathlib import Path
def peak_mb():
    # VmHWM, not ru_maxrss: the latter keeps the parent's peak across fork and exec.
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
from evident.context import EvidentContext
from evident.graph import graph
index, corpus, section_chars, max_file_mb = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
questions = json.loads(sys.argv[5])
ctx = EvidentContext(corpus=[corpus], index_path=index, section_chars=section_chars, max_file_mb=max_file_mb,
                     mode="offline")
before = peak_mb()
runs = []
for question in questions:
    start = time.perf_counter()
    out = graph.invoke({"query": question}, context=ctx)
    runs.append({"question": question, "seconds": time.perf_counter() - start, "status": out["status"],
                 "cited": sorted({c["url"] for c in out["citations"]})})
print(json.dumps({"rss_before_mb": before, "rss_after_mb": peak_mb(), "runs": runs}))
"""


def manual(megabytes: float, seed: int = 7) -> str:
    rng = random.Random(seed)
    target = int(megabytes * 1_000_000)
    parts: list[str] = []
    size = 0
    chapter = 0
    facts_placed = False
    while size < target:
        chapter += 1
        paragraphs = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(40, 90))).capitalize() + "."
                      for _ in range(rng.randint(8, 16))]
        if not facts_placed and size > target * 0.63:  # deep inside, not in the first sections
            paragraphs.insert(2, " ".join(fact for _, fact in FACTS))
            facts_placed = True
        text = f"## Chapter {chapter}\n\n" + "\n\n".join(paragraphs) + "\n\n"
        parts.append(text)
        size += len(text)
    return "---\nurl: https://manual.example/handbook\ntitle: Handbook\n---\n# Handbook\n\n" + "".join(parts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mb", type=float, default=50.0, help="size of the generated document")
    parser.add_argument("--section-chars", type=int, default=100_000, help="section budget (setting section_chars)")
    parser.add_argument("--queries", type=int, default=3, help=f"questions asked (at most {len(FACTS)})")
    args = parser.parse_args()

    from evident.connectors.index.embedded import LocalIndex
    from evident.connectors.index.loaders import MB, CorpusLimits

    print(describe())
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "corpus"
        folder.mkdir()
        text = manual(args.mb)
        (folder / "handbook.md").write_text(text, encoding="utf-8")
        max_file_mb = args.mb * 1.2 + 1
        limits = CorpusLimits(max_file_bytes=int(max_file_mb * MB), section_chars=args.section_chars)
        index_path = Path(tmp) / "index.sqlite3"
        start = time.perf_counter()
        with LocalIndex(index_path, limits=limits) as index:
            stats = index.refresh([folder], on_skip=lambda path, why: print(f"skipped {path}: {why}"))
            sections = index.count()
        print(f"document: {len(text) / MB:.1f} MB; indexed as {sections} sections of <= {args.section_chars} "
              f"characters in {time.perf_counter() - start:.1f} s ({stats.added} added)")
        questions = [q for q, _ in FACTS[: args.queries]]
        proc = subprocess.run(
            [sys.executable, "-c", QUERY_PROCESS, str(index_path), str(folder), str(args.section_chars),
             str(max_file_mb), json.dumps(questions)],
            capture_output=True, text=True, cwd=ROOT, check=False,
        )
        if proc.returncode != 0:
            sys.exit(proc.stderr)
        result = json.loads(proc.stdout.splitlines()[-1])
        for run in result["runs"]:
            print(f"  {run['seconds']:.2f} s  {run['status']:<12} {run['question']}  -> {', '.join(run['cited'])}")
        print(f"peak RSS: {result['rss_before_mb']:.0f} MB after imports, {result['rss_after_mb']:.0f} MB after "
              f"{len(questions)} queries (+{result['rss_after_mb'] - result['rss_before_mb']:.0f} MB)")


if __name__ == "__main__":
    main()
