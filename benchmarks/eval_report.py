"""Regenerate the measured part of docs/evaluation.md: `evident eval` offline on doc2dial-qa and on
the bundled example questions, with the figures in docs/img/.

    make eval-report                      # or: .venv/bin/python benchmarks/eval_report.py
    python benchmarks/eval_report.py --doc2dial-limit 100      # a quicker partial run
    python benchmarks/eval_report.py --part all                # doc2dial's holdout too: once, at the end

Only the text between the `<!-- eval-report:start -->` and `<!-- eval-report:end -->` markers is
rewritten; everything else in the file (the hand-written guide above, other sections below) stays.
The doc2dial-qa data is read from ../shared/data/doc2dial-qa (never copied into the repository);
without it, that part says so. Of doc2dial-qa only the tune part is asked (every question but every
fifth, as `devset_check.py --part tune`): the holdout is measured once, at the end of a piece of work
(`--part all`), never while choosing. Every run starts from an empty cache, so the figures are those of the
engine as it is now.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from machine_info import describe  # noqa: E402

DOC = ROOT / "docs" / "evaluation.md"
IMG = ROOT / "docs" / "img"
DOC2DIAL = (ROOT.parent / "shared" / "data" / "doc2dial-qa").resolve()
START, END = "<!-- eval-report:start -->", "<!-- eval-report:end -->"
KEY = ("groundedness", "first_citation_precision", "cited_url_precision", "evidence_recall", "false_abstention",
       "correct_abstention")


def run_one(name: str, questions: Path, corpus: Path, limit: int | None, cache: Path, *,
            tune_only: bool = False) -> tuple[str, float]:
    """One dataset (its tune part alone with `tune_only`): its report section (markdown) and the run's wall
    time in seconds."""
    from evident.context import EvidentContext
    from evident.eval.dataset import load_dataset
    from evident.eval.methods import METHODS
    from evident.eval.plots import write_plots
    from evident.eval.report import EvalResult, markdown, pct
    from evident.eval.runner import evaluate
    from evident.eval.summary import method_metrics

    queries = load_dataset(questions, limit)
    if tune_only:
        queries = [q for i, q in enumerate(queries) if i % 5 != 4]
    ctx = EvidentContext(corpus=[str(corpus)], mode="offline")
    start = time.perf_counter()
    run = evaluate(queries, ctx, list(METHODS), cache, progress=sys.stderr.isatty())
    result = EvalResult.build(str(questions), queries, run, ctx, ablation=True)
    seconds = time.perf_counter() - start
    images = write_plots(result, IMG, prefix=f"{name}-")
    section = markdown(result, {k: f"img/{p.name}" for k, p in images.items()}, heading="###")
    part = ", tune part (every question but every fifth)" if tune_only else ""
    section = section.replace(f"### Evaluation of {questions.name}", f"### {name}: `{_shown(questions)}`{part}", 1)
    if tune_only:
        return section, seconds
    # The holdout (every fifth question) is never tuned on; the split shows whether tuning overfit.
    positions = {q.id: i for i, q in enumerate(queries)}
    splits = []
    for method in ("evident", "bm25"):
        for label, holdout in (("tuning (index % 5 != 4)", False), ("holdout (index % 5 == 4)", True)):
            rows = [r for r in run.rows[method] if (positions[r.query.id] % 5 == 4) == holdout]
            mm = method_metrics(rows, ctx.ngram_n, ctx.threshold)
            splits.append(f"| {method} | {label} | {len(rows)} | " + " | ".join(pct(mm.get(k)) for k in KEY) + " |")
    section += "\n".join([
        "", "#### Tuning and holdout questions", "",
        "| method | split | questions | " + " | ".join(KEY) + " |", "|" + "---|" * (len(KEY) + 3), *splits, "",
    ])
    return section, seconds


def _shown(path: Path) -> str:
    try:
        return str(path.relative_to(ROOT))
    except ValueError:
        return f"../shared/data/doc2dial-qa/{path.name}" if path.parent.name == DOC2DIAL.name else str(path)


def _commit() -> str:
    try:
        sha = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                             check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                               capture_output=True, text=True, check=True).stdout.strip()
        return sha + (" with uncommitted changes" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def splice(text: str, generated: str) -> str:
    """`text` with the part between the markers replaced (the markers appended when missing)."""
    block = f"{START}\n{generated.rstrip()}\n{END}"
    if START in text and END in text:
        head, rest = text.split(START, 1)
        return head + block + rest.split(END, 1)[1]
    return text.rstrip() + "\n\n" + block + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--doc2dial-limit", type=int, default=None, help="only the first N doc2dial-qa questions")
    ap.add_argument("--part", choices=["tune", "all"], default="tune",
                    help="doc2dial-qa's questions: the tune part (default) or all, holdout included (once, at the end)")
    ap.add_argument("--doc", type=Path, default=DOC)
    ap.add_argument("--doc2dial", type=Path, default=DOC2DIAL,
                    help="the development set's directory (default ../shared/data/doc2dial-qa beside the checkout)")
    args = ap.parse_args(argv)
    from evident.eval.extra import problem

    if (missing := problem()) is not None:
        print(f"eval-report: {missing}", file=sys.stderr)
        return 2

    IMG.mkdir(parents=True, exist_ok=True)
    parts = [
        "## Measured: offline runs",
        "",
        f"Generated by `make eval-report` on {datetime.now(UTC):%Y-%m-%d %H:%M} UTC, code at commit "
        f"{_commit()}; {describe()}. Offline mode (no model): **pilot**, **direct** and **ges** need a model and are "
        "not run here, nor is the LLM-as-judge; SemMax/SemRecall use the configured embeddings (an answer shorter "
        "than one 256-word window has SemRecall = SemMax). The alignment rates of EvidenT "
        "offline are those of a verbatim extractor (every passage is copied from its page), so they say "
        "nothing about a model's drift or hallucination; run `evident eval` with a model for those.",
        "",
    ]
    with tempfile.TemporaryDirectory() as tmp:
        data = args.doc2dial
        datasets = [("doc2dial-qa", data / "questions.jsonl", data / "corpus.jsonl", args.doc2dial_limit,
                     args.part == "tune"),
                    ("examples", ROOT / "examples" / "questions.jsonl", ROOT / "examples" / "corpus", None, False)]
        for name, questions, corpus, limit, tune_only in datasets:
            if not questions.is_file():
                parts += [f"### {name}", "", f"Not measured: {questions} is absent on this machine.", ""]
                continue
            print(f"eval-report: {name} ...", file=sys.stderr)
            section, seconds = run_one(name, questions, corpus, limit, Path(tmp) / name, tune_only=tune_only)
            parts += [section, "", f"Wall time of this run (retrieval, both methods, ablation): {seconds:.0f} s.", ""]
    old = args.doc.read_text(encoding="utf-8") if args.doc.is_file() else ""
    args.doc.write_text(splice(old, "\n".join(parts)), encoding="utf-8")
    print(f"eval-report: wrote {args.doc} and {IMG}/", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
