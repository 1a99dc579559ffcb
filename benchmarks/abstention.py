"""The offline engine's abstention trade-off on the development set (doc2dial-qa), from which its
threshold is chosen.

    python benchmarks/abstention.py [--data ../shared/data/doc2dial-qa] [--part tune|holdout|all]
                                    [--max-false 0.03] [--png abstention.png]

The offline extractor abstains ("Not sufficient information to answer.") when `address_score`, the
largest share of the question's weighted terms that one window of the retrieved text covers, is below
`evident.offline.extractor.MIN_COVERAGE`. For every threshold this prints the false abstention rate on
answerable questions and the number of unanswerable questions abstained on, marks the threshold with
the most correct abstentions at a false abstention rate of at most `--max-false` (the issue's target:
3%), and the current setting. Retrieval is the embedded index with the default settings (the top
`EvidentContext().top_n` documents), exactly what `evident ask --corpus corpus.jsonl` retrieves.
With matplotlib installed (the dev extras), `--png` draws the curve.

`holdout` is every fifth question (index % 5 == 4): the threshold is chosen on `tune` only.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
DEFAULT_DATA = ROOT.parent / "shared" / "data" / "doc2dial-qa"


def select(questions: list[dict], part: str) -> list[dict]:
    return [q for i, q in enumerate(questions) if part == "all" or (i % 5 == 4) == (part == "holdout")]


def at(scores: list[tuple[bool, float]], threshold: float) -> tuple[float, float, int, int]:
    """(threshold, false abstention rate, false abstentions, unanswerable abstained) when the engine
    abstains on every score below `threshold`."""
    answerable = [s for a, s in scores if a]
    fa = sum(s < threshold for s in answerable)
    return threshold, fa / max(1, len(answerable)), fa, sum(s < threshold for a, s in scores if not a)


def curve(scores: list[tuple[bool, float]]) -> list[tuple[float, float, int, int]]:
    """`at` every distinct score: the whole trade-off curve."""
    return [at(scores, t) for t in sorted({0.0, *(s for _, s in scores)})]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--part", default="tune", choices=["tune", "holdout", "all"])
    ap.add_argument("--max-false", type=float, default=0.03, help="false abstention allowed on answerable")
    ap.add_argument("--png", type=Path, default=None, help="write the curve here (needs matplotlib)")
    args = ap.parse_args(argv)
    if not (args.data / "questions.jsonl").is_file():
        print(f"abstention: {args.data}/questions.jsonl not found (give --data)", file=sys.stderr)
        return 2

    from evident.connectors.index.embedded import LocalIndex
    from evident.context import EvidentContext
    from evident.offline.extractor import MIN_COVERAGE, address_score

    questions = select([json.loads(x) for x in (args.data / "questions.jsonl").read_text().splitlines() if x.strip()],
                       args.part)
    top_n = EvidentContext().top_n
    with tempfile.TemporaryDirectory() as tmp, LocalIndex(Path(tmp) / "devset.sqlite3") as index:
        index.add_corpus(args.data / "corpus.jsonl")
        scores = [(bool(q["answerable"]), address_score(q["query"], [d for d, _ in index.search(q["query"], top_n)]))
                  for q in questions]
    points = curve(scores)
    n_a = sum(a for a, _ in scores)
    n_u = len(scores) - n_a
    allowed = [p for p in points if p[1] <= args.max_false]
    best = max(allowed, key=lambda p: (p[3], -p[0])) if allowed else points[0]
    print(f"doc2dial-qa {args.part}: {n_a} answerable, {n_u} unanswerable; abstain when address_score < threshold")
    print(f"{'threshold':>9}  {'false abstention':>18}  {'unanswerable abstained':>23}")
    grid = [at(scores, x / 20) for x in range(0, 13)]
    for t, rate, fa, ua in sorted({*grid, best}):
        mark = f" <- most abstentions at ≤{args.max_false:.0%}" if (t, rate, fa, ua) == best else ""
        print(f"{t:9.3f}  {rate:7.1%} ({fa:3d}/{n_a})  {ua:10d}/{n_u} ({ua / max(1, n_u):.0%}){mark}")
    now = at(scores, MIN_COVERAGE)
    print(f"current MIN_COVERAGE = {MIN_COVERAGE}: false abstention {now[1]:.1%} ({now[2]}/{n_a}), "
          f"unanswerable abstained {now[3]}/{n_u}")
    if args.png is not None:
        try:
            import matplotlib

            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
        except ImportError:
            print("matplotlib is not installed: no PNG written (pip install -e '.[dev]')", file=sys.stderr)
            return 0
        fig, ax = plt.subplots(figsize=(6, 4))
        ax.plot([p[1] for p in points], [p[3] / max(1, n_u) for p in points], drawstyle="steps-post")
        ax.axvline(args.max_false, linestyle="--", color="grey")
        ax.plot([now[1]], [now[3] / max(1, n_u)], "o", label=f"MIN_COVERAGE = {MIN_COVERAGE}")
        ax.set_xlabel("false abstention on answerable questions")
        ax.set_ylabel("abstention on unanswerable questions")
        ax.set_title(f"Offline abstention trade-off (doc2dial-qa {args.part})")
        ax.legend(loc="lower right")
        fig.tight_layout()
        fig.savefig(args.png, dpi=120)
        print(f"curve written to {args.png}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
