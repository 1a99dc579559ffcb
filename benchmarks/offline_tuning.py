"""Tunes the offline engine's `OfflineSettings` on the development set's tune split, and reports the
holdout and the bundled examples with 95% intervals.

    python benchmarks/offline_tuning.py [--data ../shared/data/doc2dial-qa] [--rounds 1] [--jobs 2]
                                        [--cache /tmp/offline-tuning.pkl] [--report-only] [--holdout]
                                        [--set FIELD=VALUE ...]

Each question is retrieved once, as `evident ask --corpus corpus.jsonl` retrieves it (by meaning as well
as by words when the semantic extra is installed; `EVIDENT_EMBEDDINGS=none` for words alone), and its
documents are replayed through the real graph (`evident.eval.methods.EvidentMethod`) for every setting
tried. The figures are those of `../shared/tools/devset_check.py` on doc2dial-qa (groundedness: a cited
page is gold; first-citation; evidence recall: a gold string inside the cited quotes joined; false
abstention; unanswerable abstained) and those of `evident eval` on the examples (evidence inside one
cited quote), plus the share of answer words outside any cited stretch (the weak answer's preface).

Coordinate search: each field in turn over its grid (`GRID`), keeping the value with the best objective
(groundedness + first-citation + evidence recall + the unanswerable share refused, counted over the tune
split's and the examples' questions together) among those whose tune false abstention stays at most
`--max-false`. Only the tune split is searched; `--holdout` measures the holdout once, with the
settings found.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import pickle
import re
import sys
import time
from dataclasses import astuple, dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
DEFAULT_DATA = ROOT.parent / "shared" / "data" / "doc2dial-qa"

# The values tried for each field, in the order searched.
GRID: dict[str, list[Any]] = {
    "rank_decay": [0.15, 0.28, 0.4],
    "pair_bonus": [0.0, 0.25, 0.5],
    "heading_decay": [0.0, 0.5, 0.75],
    "long_unit_words": [25, 40, 60],
    "name_miss": [0.3, 0.5, 0.7],
    "window_units": [2, 3, 4],
    "max_sentences": [3, 4, 5],
    "max_long_sentences": [5, 6, 8],
    "strong_relevance": [0.5, 0.67, 0.8],
    "passage_decay": [0.5, 0.7, 0.9],
}
_CITE = re.compile(r"\[[^\]\s]+\]")


def norm(text: str) -> str:
    return " ".join((text or "").casefold().split())


def load(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]


@dataclass(frozen=True)
class Figures:
    answerable: int
    unanswerable: int
    grounded: int
    first: int
    evidence: int
    false_abstention: int
    refused: int
    answer_words: int
    uncited_words: int

    def __add__(self, other: Figures) -> Figures:
        return Figures(*(a + b for a, b in zip(astuple(self), astuple(other), strict=True)))

    @property
    def objective(self) -> float:
        a, u = max(1, self.answerable), max(1, self.unanswerable)
        return (self.grounded + self.first + self.evidence) / a + self.refused / u

    def line(self) -> str:
        a = max(1, self.answerable)
        return (f"G {self.grounded / a:.3f} FC {self.first / a:.3f} EV {self.evidence / a:.3f} "
                f"FA {self.false_abstention}/{self.answerable} UA {self.refused}/{self.unanswerable}")


def retrieve(questions: list[dict[str, Any]], ctx: Any, cache: Path | None) -> list[list[Any]]:
    """Each question's retrieved documents, with what meaning found in them; once per cache file."""
    from evident.eval.retrieval import SharedRetrieval, with_meaning

    ids = [q["id"] for q in questions]
    if cache and cache.is_file():
        stored = pickle.loads(cache.read_bytes())
        if stored.get("ids") == ids:
            return list(stored["docs"])
    shared = SharedRetrieval(ctx)
    out = []
    for q in questions:
        rec, docs = shared.search(q["id"], q["query"], key="tuning")
        out.append(with_meaning(docs, rec))
    if cache:
        cache.write_bytes(pickle.dumps({"ids": ids, "docs": out}))
    return out


def _uncited(answer: str, urls: list[str]) -> tuple[int, int]:
    """(answer words, words of the units without a citation)."""
    from evident.citations.answer import parse_answer, sentences_in

    units = list(sentences_in(parse_answer(answer, frozenset(urls))))
    total = sum(len(_CITE.sub("", u.text).split()) for u in units)
    return total, sum(len(u.text.split()) for u in units if not u.urls)


def measure(ctx: Any, questions: list[dict[str, Any]], docs: list[list[Any]], per_fact: bool) -> Figures:
    """Every question through the graph under `ctx`."""
    from evident.eval.methods import EvidentMethod

    method = EvidentMethod(ctx)
    n = una = grounded = first = evidence = false = refused = words = uncited = 0
    for q, d in zip(questions, docs, strict=True):
        rec = method("tuning", q["id"], q["query"], d)
        answered = rec.outcome == "answered"
        if answered:
            total, bare = _uncited(rec.answer, [x.url for x in d])
            words, uncited = words + total, uncited + bare
        if not q.get("answerable", True):
            una += 1
            refused += not answered
            continue
        n += 1
        if not answered:
            false += 1
            continue
        gold = set(q.get("gold_urls") or []) | set(q.get("alt_urls") or [])
        cited = [f.url for f in rec.facts]
        quotes = ([norm(f.quote or f.sentence) for f in rec.facts] if per_fact
                  else [norm(" ".join(f.quote for f in rec.facts))])
        grounded += bool(set(cited) & gold)
        first += bool(cited and cited[0] in gold)
        evidence += any(norm(e) in t for e in q.get("gold_evidence") or [] for t in quotes)
    return Figures(n, una, grounded, first, evidence, false, refused, words, uncited)


_WORK: dict[str, Any] = {}


def _evaluate(settings_json: str) -> tuple[str, Figures, Figures | None]:
    """One setting on the tune split and the examples in `_WORK` (set before the workers fork)."""
    from evident.settings import OfflineSettings

    settings = OfflineSettings.model_validate_json(settings_json)
    w = _WORK
    tune = measure(w["ctx"].model_copy(update={"offline": settings}), w["tune"], w["tune_docs"], False)
    ex = (measure(w["ex_ctx"].model_copy(update={"offline": settings}), w["ex"], w["ex_docs"], True)
          if w["ex"] else None)
    return settings_json, tune, ex


def _changed(settings: Any) -> str:
    default = type(settings)()
    diff = {k: v for k, v in settings.model_dump().items() if v != getattr(default, k)}
    return ", ".join(f"{k}={v}" for k, v in diff.items()) or "defaults"


def search(start: Any, rounds: int, jobs: int, max_false: float) -> Any:
    """Coordinate search over GRID from `start`, one printed line per setting measured."""
    seen: dict[str, tuple[Figures, Figures | None]] = {}

    def value(s: Any) -> float:
        tune, ex = seen[s.model_dump_json()]
        if tune.false_abstention > max_false * tune.answerable:
            return -1.0
        # Pooled by question, so that the 70 examples weigh as 70 questions, not as the 612 of tune.
        return (tune + ex).objective if ex else tune.objective

    # A fresh process per setting: nothing one setting imports or caches leaks into the next.
    with multiprocessing.get_context("fork").Pool(jobs, maxtasksperchild=1) as pool:
        def score(trials: list[Any]) -> None:
            fresh = list(dict.fromkeys(t.model_dump_json() for t in trials if t.model_dump_json() not in seen))
            for key, tune, ex in pool.imap(_evaluate, fresh):
                seen[key] = (tune, ex)
                s = type(start).model_validate_json(key)
                print(f"  {_changed(s):<44} tune {tune.line()} | examples {ex.line() if ex else '-'} "
                      f"| objective {value(s):.4f}", flush=True)

        best = start
        score([best])
        for r in range(rounds):
            print(f"round {r + 1}:", flush=True)
            moved = False
            for name, values in GRID.items():
                trials = [best.model_copy(update={name: v}) for v in values]
                score(trials)
                top = max(trials, key=value)
                if value(top) > value(best) + 1e-9:
                    best, moved = top, True
            if not moved:
                break
    return best


def report(name: str, f: Figures) -> None:
    from evident.eval.stats import rate

    def cell(hits: int, n: int) -> str:
        e = rate(hits, n)
        return "n/a" if e.value is None else f"{e.value:.3f} [{e.ci_low:.3f}, {e.ci_high:.3f}]"

    print(f"\n{name} ({f.answerable} answerable, {f.unanswerable} unanswerable):")
    for label, hits, n in (("groundedness", f.grounded, f.answerable), ("first-citation", f.first, f.answerable),
                           ("evidence recall", f.evidence, f.answerable),
                           ("false abstention", f.false_abstention, f.answerable),
                           ("unanswerable abstained", f.refused, f.unanswerable)):
        print(f"  {label:<24}{cell(hits, n):<24} ({hits}/{n})")
    share = f.uncited_words / max(1, f.answer_words)
    print(f"  {'uncited answer words':<24}{share:.3f} ({f.uncited_words}/{f.answer_words})")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--examples", type=Path, default=ROOT / "examples" / "questions.jsonl",
                    help="a second question file in the objective ('' for none)")
    ap.add_argument("--examples-corpus", type=Path, default=ROOT / "examples" / "corpus")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--jobs", type=int, default=2, help="settings measured at once")
    ap.add_argument("--max-false", type=float, default=0.03, help="the highest tune false abstention allowed")
    ap.add_argument("--cache", type=Path, default=None, help="keep the retrieved documents here between runs")
    ap.add_argument("--report-only", action="store_true", help="measure the settings, no search")
    ap.add_argument("--holdout", action="store_true", help="also measure the holdout split, once")
    ap.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE",
                    help="start from this value of an OfflineSettings field (repeatable)")
    args = ap.parse_args(argv)
    from evident.eval.extra import problem

    if (missing := problem()) is not None:  # its figures carry Wilson intervals (statsmodels)
        print(f"offline_tuning: {missing}", file=sys.stderr)
        return 2
    path = args.data / "questions.jsonl"
    if not path.is_file():
        print(f"offline_tuning: {path} not found (give --data)", file=sys.stderr)
        return 2

    from pydantic import ValidationError

    from evident.context import EvidentContext
    from evident.settings import OfflineSettings, first_problem

    values: dict[str, Any] = {}
    for item in args.set:
        name, _, value = item.partition("=")
        values[name] = value
    try:
        settings = OfflineSettings.model_validate({**OfflineSettings().model_dump(), **values})
    except ValidationError as exc:
        where, message = first_problem(exc)
        print(f"offline_tuning: --set {where}: {message}", file=sys.stderr)
        return 2

    questions = load(path)
    ctx = EvidentContext(corpus=[str(args.data / "corpus.jsonl")], mode="offline")
    start = time.perf_counter()
    docs = retrieve(questions, ctx, args.cache)
    parts = {"tune": [], "holdout": []}  # type: dict[str, list[tuple[dict[str, Any], list[Any]]]]
    for i, pair in enumerate(zip(questions, docs, strict=True)):
        parts["holdout" if i % 5 == 4 else "tune"].append(pair)
    ex: list[dict[str, Any]] = []
    ex_docs: list[list[Any]] = []
    ex_ctx = EvidentContext(corpus=[str(args.examples_corpus)], mode="offline")
    if str(args.examples) not in ("", ".") and args.examples.is_file():
        ex = load(args.examples)
        ex_cache = args.cache.with_name(args.cache.stem + "-examples" + args.cache.suffix) if args.cache else None
        ex_docs = retrieve(ex, ex_ctx, ex_cache)
    print(f"retrieved {len(questions)} + {len(ex)} questions in {time.perf_counter() - start:.0f} s")
    _WORK.update(ctx=ctx, tune=[q for q, _ in parts["tune"]], tune_docs=[d for _, d in parts["tune"]],
                 ex_ctx=ex_ctx, ex=ex, ex_docs=ex_docs)
    if not args.report_only:
        settings = search(settings, args.rounds, args.jobs, args.max_false)
    print(f"\nsettings: {settings.model_dump()}")
    tuned = ctx.model_copy(update={"offline": settings})
    report("tune", measure(tuned, _WORK["tune"], _WORK["tune_docs"], False))
    if ex:
        report("examples", measure(ex_ctx.model_copy(update={"offline": settings}), ex, ex_docs, True))
    if args.holdout:
        report("holdout", measure(tuned, [q for q, _ in parts["holdout"]], [d for _, d in parts["holdout"]], False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
