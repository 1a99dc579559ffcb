"""The offline engine's answerability trade-off on the development set (doc2dial-qa), from which its
gate is chosen.

    python benchmarks/abstention.py [--data ../shared/data/doc2dial-qa] [--part tune|holdout|all]
                                    [--corpus PATH]  # e.g. --data examples --corpus examples/corpus --part all
                                    [--words] [--weights 0 0.4 0.6] [--max-false 0.03]
                                    [--cache evidence.json] [--png abstention.png]

The offline extractor abstains ("Not sufficient information to answer.") when no window of the
retrieved text is answerable enough (`evident.offline.answerability`): read by meaning, the best
window's answerability (its coverage of the question's words blended with its cosine to the query at
`answer_meaning_weight`) below `answer_gate`; read by words alone, its coverage below
`answer_words_gate`. Retrieval is what `evident ask --corpus corpus.jsonl` does: the embedded index, by
meaning as well as by words when the semantic extra is installed (`--words`: by words alone), the top
`top_n` documents, each carrying what meaning found in it.

For every meaning weight (`--weights`, default the context's) this prints the curve: for each gate,
the false abstention rate on answerable questions and the number of unanswerable questions abstained
on; it marks the gate with the most correct abstentions at a false abstention of at most
`--max-false` (the issue's target: 3%) and the current settings, then both abstentions by message
length (at most 12 words, 13-24, 25 or more) at the current settings, and how many answers the
hedge margin (`answer_hedge_margin`) marks as weak evidence at a few margins. `--cache` keeps what the gate
reads of each question's windows, so a second run (other weights, the other part) skips retrieval.
With the eval extra (`pip install 'evident-rag[eval]'`, part of the dev extra), `--png` draws the curve.

`holdout` is every fifth question (index % 5 == 4): the gate is chosen on `tune` only.
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
DEFAULT_DATA = ROOT.parent / "shared" / "data" / "doc2dial-qa"
LENGTHS = (("<= 12 words", 0, 12), ("13-24 words", 13, 24), (">= 25 words", 25, 10**9))

# One question as the gate sees it: answerable, message words, and its windows' (coverage, cosine).
Row = tuple[bool, int, list[tuple[float, float | None]]]
# One question as a curve sees it: answerable, message words, best answerability, read by meaning.
Point = tuple[bool, int, float, bool]


def select(questions: list[dict[str, Any]], part: str) -> list[dict[str, Any]]:
    return [q for i, q in enumerate(questions) if part == "all" or (i % 5 == 4) == (part == "holdout")]


def gather(questions: list[dict[str, Any]], corpus: Path, words_only: bool, index: Path | None) -> list[Row]:
    """Each question retrieved as `evident ask` retrieves it, and what the gate reads of its windows."""
    from evident.context import EvidentContext
    from evident.eval.retrieval import SharedRetrieval, with_meaning
    from evident.offline.extractor import window_evidence

    with tempfile.TemporaryDirectory() as tmp:
        ctx = EvidentContext(corpus=[str(corpus)], index_path=str(index or Path(tmp) / "devset.sqlite3"),
                             embeddings="none" if words_only else None)
        shared = SharedRetrieval(ctx)
        rows: list[Row] = []
        for q in questions:
            rec, docs = shared.search(q["id"], q["query"], q["id"])
            evidence = window_evidence(q["query"], with_meaning(docs, rec), ctx.semantic_weight, ctx.offline)
            rows.append((bool(q["answerable"]), len(q["query"].split()),
                         [(e.coverage, e.cosine) for e in evidence]))
        return rows


def scores(rows: list[Row], weight: float) -> list[Point]:
    """(answerable, words, best answerability, read by meaning) per question."""
    from evident.offline.answerability import Evidence, best_answerability

    out = []
    for answerable, n_words, windows in rows:
        evidence = [Evidence(c, cos) for c, cos in windows]
        by_meaning = any(e.cosine is not None for e in evidence)
        out.append((answerable, n_words, best_answerability(evidence, weight), by_meaning))
    return out


def at(points: list[Point], gate: float, words_gate: float) -> tuple[float, float, int, int]:
    """(gate, false abstention rate, false abstentions, unanswerable abstained) when the engine
    abstains on every score below `gate` (read by meaning) or `words_gate` (by words alone)."""
    refused = [(a, s < (gate if m else words_gate)) for a, _, s, m in points]
    n_a = sum(a for a, _ in refused)
    fa = sum(r for a, r in refused if a)
    return gate, fa / max(1, n_a), fa, sum(r for a, r in refused if not a)


def hedged(points: list[Point], gate: float, words_gate: float, margin: float) -> tuple[int, int, int, int]:
    """(answerable hedged, answerable answered, unanswerable hedged, unanswerable answered): the answered
    questions whose best score clears the gate by less than `margin` (`answer_hedge_margin`), whose
    answer opens with "The documentation does not explicitly state the answer"."""
    counts = [0, 0, 0, 0]
    for a, _, s, m in points:
        threshold = gate if m else words_gate
        if s >= threshold:
            k = 0 if a else 2
            counts[k] += s < threshold + margin
            counts[k + 1] += 1
    return counts[0], counts[1], counts[2], counts[3]


def curve(points: list[Point], words_gate: float | None) -> list[tuple[float, float, int, int]]:
    """`at` every distinct score (`words_gate` None: the same gate for pages read by words)."""
    gates = sorted({0.0, *(s for _, _, s, _ in points)})
    return [at(points, t, t if words_gate is None else words_gate) for t in gates]


def by_length(points: list[Point], gate: float, words_gate: float) -> list[str]:
    lines = [f"  {'message length':<14} {'false abstention':>20} {'unanswerable abstained':>24}"]
    for label, lo, hi in LENGTHS:
        part = [p for p in points if lo <= p[1] <= hi]
        _, rate, fa, ua = at(part, gate, words_gate)
        n_a = sum(p[0] for p in part)
        n_u = len(part) - n_a
        lines.append(f"  {label:<14} {fa:>7d}/{n_a:<4d} ({rate:5.1%}) {ua:>12d}/{n_u:<3d} ({ua / max(1, n_u):4.0%})")
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA, help="folder of questions.jsonl (and corpus.jsonl)")
    ap.add_argument("--corpus", type=Path, default=None, help="the corpus (default: DATA/corpus.jsonl)")
    ap.add_argument("--part", default="tune", choices=["tune", "holdout", "all"])
    ap.add_argument("--words", action="store_true", help="retrieve by words alone (no embeddings)")
    ap.add_argument("--weights", type=float, nargs="+", default=None, help="answer_meaning_weight values")
    ap.add_argument("--max-false", type=float, default=0.03, help="false abstention allowed on answerable")
    ap.add_argument("--index", type=Path, default=None, help="index file to build once and reuse (default: temporary)")
    ap.add_argument("--cache", type=Path, default=None, help="keep (and reuse) what the gate reads here")
    ap.add_argument("--png", type=Path, default=None, help="write the curve here (needs matplotlib)")
    args = ap.parse_args(argv)
    from evident.eval.extra import problem

    if args.png is not None and (missing := problem()) is not None:
        print(f"abstention: --png {missing}", file=sys.stderr)
        return 2
    if not (args.data / "questions.jsonl").is_file():
        print(f"abstention: {args.data}/questions.jsonl not found (give --data)", file=sys.stderr)
        return 2

    from evident.context import EvidentContext

    ctx = EvidentContext()
    questions = select([json.loads(x) for x in (args.data / "questions.jsonl").read_text().splitlines() if x.strip()],
                       args.part)
    if args.cache is not None and args.cache.is_file():
        rows: list[Row] = [(a, n, [(x[0], x[1]) for x in w]) for a, n, w in json.loads(args.cache.read_text())]
    else:
        rows = gather(questions, args.corpus or args.data / "corpus.jsonl", args.words, args.index)
        if args.cache is not None:
            args.cache.write_text(json.dumps(rows))
    n_a = sum(a for a, _, _ in rows)
    n_u = len(rows) - n_a
    read = sum(any(cos is not None for _, cos in w) for _, _, w in rows)
    print(f"{args.data.name} {args.part}: {n_a} answerable, {n_u} unanswerable; {read} of {len(rows)} read by meaning")
    weights = args.weights or [ctx.answer_meaning_weight]
    current = None
    for weight in weights:
        points = scores(rows, weight)
        lexical = read == 0
        line = curve(points, None)
        allowed = [p for p in line if p[1] <= args.max_false]
        best = max(allowed, key=lambda p: (p[3], -p[0])) if allowed else line[0]
        name = "coverage" if lexical else f"answerability at answer_meaning_weight {weight:g}"
        print(f"\nabstain when {name} < gate")
        print(f"{'gate':>9}  {'false abstention':>18}  {'unanswerable abstained':>23}")
        grid = [at(points, x / 50, x / 50) for x in range(5, 31)]
        for t, rate, fa, ua in sorted({*grid, best}):
            mark = f" <- most abstentions at <= {args.max_false:.0%}" if (t, rate, fa, ua) == best else ""
            print(f"{t:9.3f}  {rate:7.1%} ({fa:3d}/{n_a})  {ua:10d}/{n_u} ({ua / max(1, n_u):.0%}){mark}")
        print(f"by message length at the curve's best gate {best[0]:.3f}:")
        print("\n".join(by_length(points, best[0], best[0])))
        if weight == ctx.answer_meaning_weight or lexical:
            current = (points, line)
    points, line = current if current is not None else (scores(rows, ctx.answer_meaning_weight), [])
    now = at(points, ctx.answer_gate, ctx.answer_words_gate)
    print(f"\ncurrent settings (answer_meaning_weight {ctx.answer_meaning_weight}, answer_gate {ctx.answer_gate}, "
          f"answer_words_gate {ctx.answer_words_gate}): false abstention {now[1]:.1%} ({now[2]}/{n_a}), "
          f"unanswerable abstained {now[3]}/{n_u}")
    print("\n".join(by_length(points, ctx.answer_gate, ctx.answer_words_gate)))
    print(f"\nweak evidence (answered, best score under the gate + answer_hedge_margin, now "
          f"{ctx.answer_hedge_margin:g}; the composer also hedges answers that cover little of the question)")
    print(f"{'margin':>9}  {'answerable hedged':>20}  {'unanswerable answered, hedged':>30}")
    for margin in sorted({0.0, 0.02, 0.05, 0.1, 0.15, 0.2, ctx.answer_hedge_margin}):
        ah, an, uh, un = hedged(points, ctx.answer_gate, ctx.answer_words_gate, margin)
        mark = " <- current" if margin == ctx.answer_hedge_margin else ""
        share, unanswered = ah / max(1, an), uh / max(1, un)
        print(f"{margin:9.2f}  {ah:9d}/{an:<4d} ({share:4.1%})  {uh:16d}/{un:<4d} ({unanswered:4.0%}){mark}")
    if args.png is not None and line:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(6, 4))
        ax.plot([p[1] for p in line], [p[3] / max(1, n_u) for p in line], drawstyle="steps-post")
        ax.axvline(args.max_false, linestyle="--", color="grey")
        ax.plot([now[1]], [now[3] / max(1, n_u)], "o", label="current settings")
        ax.set_xlabel("false abstention on answerable questions")
        ax.set_ylabel("abstention on unanswerable questions")
        ax.set_title(f"Offline answerability trade-off (doc2dial-qa {args.part})")
        ax.legend(loc="lower right")
        fig.tight_layout()
        fig.savefig(args.png, dpi=120)
        print(f"curve written to {args.png}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
