"""Alignment benchmark: `evident.alignment.align` against the plain implementation of the paper's rule.

    python benchmarks/alignment.py                     # main and drift scenarios, well under two minutes
    python benchmarks/alignment.py --scenario bulk     # 5,000 passages over 60 guidance pages, about 2 minutes
    python benchmarks/alignment.py --repeats 21 --docs 20 --doc-kb 100 --passages 40
    python benchmarks/alignment.py --profile [--scenario bulk]   # cProfile of one cold run

Everything is generated deterministically from a seed (no network, no data files): English-like
documents built from a vocabulary of a few thousand words (Zipf-distributed, with the common
function words of English), with Markdown headings, bullet lists, tables, curly quotes and
numbers; and passages of the kinds an extractor really produces:

* verbatim   a window of one to three sentences of the cited document (case and spacing varied);
* drifted    verbatim text of one document cited under the URL of another (citation drift);
* tail       verbatim text followed by an invented sentence;
* number     a sentence of the cited document with one number changed ("14 days" for "10 days");
* ellipsis   one sentence with words in its middle replaced by " … ";
* invented   fluent text that occurs in no document.

Scenarios: `main` (default 20 documents × 100 KB, 40 passages), `drift` (default 1,000
documents × 10 KB, 40 passages, a third of them drifted or invented, so the drift search scans
every document) and `bulk` (5,000 passages over 60 pages of about 8 KB of guidance-like prose:
eligibility rules, fees, rates and deadlines built from a grammar, so that pages share much of
their phrasing as real guidance does; a fifth of the passages drifted or invented, the others
verbatim, reformatted, partially invented or with one number changed). Per scenario it prints
the median wall time of one run (cold: a fresh `IndexCache()` per run, so every document index
is built; warm: the cache reused), passages per second, peak traced memory of one cold run
(tracemalloc), and the median time of `evident.alignment.reference.align_reference` on the same
input, with the ratio. Then, per kind of passage, the share of right decisions of both (what
"right" means for each kind is in `expected_outcome`).
"""

from __future__ import annotations

import argparse
import gc
import random
import statistics
import sys
import time
import tracemalloc
from dataclasses import dataclass
from typing import Any

from evident.alignment import IndexCache, align
from evident.alignment.reference import align_reference
from machine_info import describe  # noqa: E402  (benchmarks/ is on sys.path when run as a script)

FUNCTION_WORDS = (
    "the of and to a in is that for it as was with be by on not he this are or his from at which "
    "but have an they you were her she there been one all we their has would when if so no will "
    "can more other its into only some could time these may then do first any now such like our "
    "over also new after should well must where most through each between under before same "
    "customer account plan service request team data policy support access user report invoice "
    "payment contract server region backup storage release version security incident ticket "
    "manager employee office travel expense approval review deadline days hours month year"
).split()
ONSETS = "b bl br c ch cl cr d dr f fl fr g gl gr h j k l m n p pl pr qu r s sc sh sl sp st str t th tr v w".split()
VOWELS = "a e i o u ai ea ee ie io oa ou".split()
CODAS = " b ck d ft g l ll m n nd ng nt p r rd rn s ss st t th x".split(" ")
SUFFIXES = ["", "", "", "s", "ed", "ing", "er", "ion", "ly", "ment", "able", "ity"]


def make_vocabulary(rng: random.Random, size: int) -> list[str]:
    words = list(dict.fromkeys(FUNCTION_WORDS))
    seen = set(words)
    while len(words) < size:
        w = "".join(rng.choice(ONSETS) + rng.choice(VOWELS) + rng.choice(CODAS)
                    for _ in range(rng.choice((1, 1, 2, 2, 3))))
        w += rng.choice(SUFFIXES)
        if w not in seen and len(w) > 1:
            seen.add(w)
            words.append(w)
    return words


class TextGen:
    """Zipf-distributed English-like text with realistic page furniture."""

    def __init__(self, rng: random.Random, vocab: list[str]) -> None:
        self.rng = rng
        self.vocab = vocab
        weights = [1.0 / (r + 1) ** 1.05 for r in range(len(vocab))]
        self._cum: list[float] = []
        acc = 0.0
        for w in weights:
            acc += w
            self._cum.append(acc)

    def word(self) -> str:
        return self.rng.choices(self.vocab, cum_weights=self._cum, k=1)[0]

    def sentence(self) -> str:
        rng = self.rng
        n = rng.randint(8, 26)
        ws = [self.word() for _ in range(n)]
        if rng.random() < 0.35:  # a number with a unit, the kind a hallucination changes
            ws.insert(rng.randrange(1, n), f"{rng.choice((2, 3, 5, 7, 10, 14, 30, 45, 90, 365))} "
                      f"{rng.choice(('days', 'hours', 'GB', 'users', 'percent', 'months'))}")
        if rng.random() < 0.15:
            i = rng.randrange(0, n - 2)
            ws[i] = "“" + ws[i]
            ws[i + 1] = ws[i + 1] + "”"
        if rng.random() < 0.3:
            ws[rng.randrange(2, n - 1)] += ","
        if rng.random() < 0.05:
            ws[rng.randrange(0, n)] = rng.choice(("naïve", "café", "Zürich", "ﬁnance", "façade"))
        ws[0] = ws[0][:1].upper() + ws[0][1:]
        return " ".join(ws) + rng.choice(".....?!:")

    def document(self, target_chars: int) -> str:
        rng = self.rng
        parts: list[str] = [f"# {self.sentence()[:-1].title()}\n\n"]
        size = len(parts[0])
        while size < target_chars:
            r = rng.random()
            if r < 0.08:
                block = f"## {' '.join(self.word() for _ in range(rng.randint(2, 6))).capitalize()}\n\n"
            elif r < 0.16:
                block = "".join(f"- {self.sentence()}\n" for _ in range(rng.randint(2, 6))) + "\n"
            elif r < 0.21:
                cols = rng.randint(2, 4)
                head = "| " + " | ".join(self.word().capitalize() for _ in range(cols)) + " |\n"
                rule = "|" + "---|" * cols + "\n"
                rows = "".join(
                    "| " + " | ".join(rng.choice((self.word(), str(rng.randint(1, 999)),
                                                  f"{rng.randint(1, 99)}%")) for _ in range(cols)) + " |\n"
                    for _ in range(rng.randint(2, 8))
                )
                block = head + rule + rows + "\n"
            else:
                block = " ".join(self.sentence() for _ in range(rng.randint(2, 7))) + "\n\n"
            parts.append(block)
            size += len(block)
        return "".join(parts)


def sentences_of(text: str) -> list[str]:
    out: list[str] = []
    for para in text.split("\n"):
        para = para.strip()
        if not para or para.startswith(("#", "|")):
            continue
        para = para.lstrip("- ")
        start = 0
        for i, ch in enumerate(para):
            if ch in ".?!" and (i + 1 == len(para) or para[i + 1] == " "):
                s = para[start : i + 1].strip()
                if len(s.split()) >= 8:
                    out.append(s)
                start = i + 1
    return out


@dataclass
class Scenario:
    name: str
    docs: list[dict[str, str]]
    passages: list[dict[str, str]]
    kinds: dict[str, int]


def _vary(rng: random.Random, s: str) -> str:
    """What extractors do to verbatim text: case and spacing change, words stay."""
    r = rng.random()
    if r < 0.2:
        return s.lower()
    if r < 0.4:
        return s.replace(" ", "  ", 2)
    if r < 0.5:
        return s.replace("“", '"').replace("”", '"')
    return s


def make_scenario(name: str, n_docs: int, doc_chars: int, n_passages: int, mix: dict[str, float],
                  seed: int) -> Scenario:
    rng = random.Random(seed)
    vocab = make_vocabulary(rng, 3000)
    gen = TextGen(rng, vocab)
    docs = [{"url": f"https://intranet.example.com/{name}/doc-{i:04d}", "content": gen.document(doc_chars)}
            for i in range(n_docs)]
    sents = [sentences_of(d["content"]) for d in docs]
    kinds = [k for k, share in mix.items() for _ in range(round(share * n_passages))]
    kinds = (kinds + ["verbatim"] * n_passages)[:n_passages]
    rng.shuffle(kinds)
    passages: list[dict[str, str]] = []
    for i, kind in enumerate(kinds):
        di = rng.randrange(n_docs)
        ss = sents[di]
        j = rng.randrange(len(ss) - 3)
        url = docs[di]["url"]
        if kind == "verbatim":
            content = _vary(rng, " ".join(ss[j : j + rng.randint(1, 3)]))
        elif kind == "drifted":
            content = " ".join(ss[j : j + rng.randint(1, 2)])
            url = docs[(di + 1 + rng.randrange(n_docs - 1)) % n_docs]["url"]
        elif kind == "tail":
            content = ss[j] + " " + gen.sentence()
        elif kind == "number":
            cand = [s for s in ss if any(t in s for t in (" days", " hours", " GB", " users", " percent"))]
            s = rng.choice(cand or ss)
            words = s.split()
            nums = [k for k, w in enumerate(words) if w.isdigit()]
            if nums:
                k = rng.choice(nums)
                words[k] = str(int(words[k]) + rng.choice((1, 4, 10)))
            content = " ".join(words)
        elif kind == "ellipsis":
            content = ss[j] + " … " + ss[j + 2]
        else:  # invented
            content = " ".join(gen.sentence() for _ in range(rng.randint(1, 2)))
        passages.append({"passage_id": f"{name}-{i}", "url": url, "content": content})
    counts: dict[str, int] = {}
    for k in kinds:
        counts[k] = counts.get(k, 0) + 1
    return Scenario(name, docs, passages, counts)


def _time(fn: Any, repeats: int) -> tuple[float, Any]:
    times: list[float] = []
    out = None
    for _ in range(repeats):
        gc.collect()
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def run_scenario(sc: Scenario, repeats: int, ref_repeats: int, n: int, threshold: float) -> dict[str, Any]:
    # Process-wide one-time costs (imports, the word table) are paid outside the measurement.
    align(sc.passages[:1], sc.docs[:1], n=n, threshold=threshold, cache=IndexCache())

    cold, decisions = _time(lambda: align(sc.passages, sc.docs, n=n, threshold=threshold,
                                          cache=IndexCache()), repeats)
    warm_cache = IndexCache()
    align(sc.passages, sc.docs, n=n, threshold=threshold, cache=warm_cache)
    warm, _ = _time(lambda: align(sc.passages, sc.docs, n=n, threshold=threshold, cache=warm_cache),
                    repeats)
    gc.collect()
    tracemalloc.start()
    align(sc.passages, sc.docs, n=n, threshold=threshold, cache=IndexCache())
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    ref, ref_out = _time(lambda: align_reference(sc.passages, sc.docs, n=n, threshold=threshold),
                         ref_repeats)
    actions: dict[str, int] = {}
    for d in decisions:
        actions[d.action] = actions.get(d.action, 0) + 1
    return {
        "scenario": sc.name, "docs": len(sc.docs),
        "kb": sum(len(d["content"]) for d in sc.docs) / len(sc.docs) / 1000,
        "passages": len(sc.passages), "cold_ms": cold * 1000, "warm_ms": warm * 1000,
        "pps_cold": len(sc.passages) / cold, "pps_warm": len(sc.passages) / warm,
        "peak_mb": peak / 1e6, "ref_ms": ref * 1000, "ratio": ref / cold,
        "actions": actions, "kinds": sc.kinds,
    }


def print_table(rows: list[dict[str, Any]]) -> None:
    head = ("scenario", "docs × KB", "passages", "cold ms", "warm ms", "passages/s cold", "passages/s warm",
            "peak MB", "reference ms", "× faster (cold)")
    body = [
        (r["scenario"], f"{r['docs']} × {r['kb']:.0f}", str(r["passages"]), f"{r['cold_ms']:.1f}",
         f"{r['warm_ms']:.1f}", f"{r['pps_cold']:,.0f}", f"{r['pps_warm']:,.0f}", f"{r['peak_mb']:.1f}",
         f"{r['ref_ms']:,.0f}", f"{r['ratio']:.0f}×")
        for r in rows
    ]
    widths = [max(len(h), *(len(b[i]) for b in body)) for i, h in enumerate(head)]
    line = "| " + " | ".join(h.ljust(w) for h, w in zip(head, widths)) + " |"
    print(line)
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for b in body:
        print("| " + " | ".join(c.ljust(w) for c, w in zip(b, widths)) + " |")
    for r in rows:
        print(f"  {r['scenario']}: passages {r['kinds']} -> decisions {r['actions']}")


def machine() -> str:
    return describe()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=9, help="timed runs per measurement (median)")
    ap.add_argument("--ref-repeats", type=int, default=3, help="timed runs of the reference (main)")
    ap.add_argument("--docs", type=int, default=20)
    ap.add_argument("--doc-kb", type=float, default=100.0)
    ap.add_argument("--passages", type=int, default=40)
    ap.add_argument("--drift-docs", type=int, default=1000, help="documents of the drift scenario (0: skip)")
    ap.add_argument("--drift-doc-kb", type=float, default=10.0)
    ap.add_argument("--drift-ref-repeats", type=int, default=1)
    ap.add_argument("--n", type=int, default=5)
    ap.add_argument("--threshold", type=float, default=0.7)
    ap.add_argument("--seed", type=int, default=20240601)
    ap.add_argument("--profile", action="store_true", help="cProfile one cold query of the main scenario")
    args = ap.parse_args(argv)

    print(f"machine: {machine()}")
    t0 = time.perf_counter()
    main_mix = {"verbatim": 0.4, "drifted": 0.15, "tail": 0.125, "number": 0.1, "ellipsis": 0.075,
                "invented": 0.15}
    main_sc = make_scenario("main", args.docs, int(args.doc_kb * 1000), args.passages, main_mix, args.seed)
    if args.profile:
        import cProfile
        import pstats

        align(main_sc.passages[:1], main_sc.docs[:1], cache=IndexCache())
        prof = cProfile.Profile()
        prof.enable()
        align(main_sc.passages, main_sc.docs, n=args.n, threshold=args.threshold, cache=IndexCache())
        prof.disable()
        pstats.Stats(prof, stream=sys.stdout).sort_stats("cumulative").print_stats(25)
        return 0
    rows = [run_scenario(main_sc, args.repeats, args.ref_repeats, args.n, args.threshold)]
    if args.drift_docs:
        drift_mix = {"verbatim": 0.4, "drifted": 0.2, "tail": 0.1, "number": 0.1, "invented": 0.2}
        drift_sc = make_scenario("drift", args.drift_docs, int(args.drift_doc_kb * 1000), args.passages,
                                 drift_mix, args.seed + 1)
        rows.append(run_scenario(drift_sc, max(3, args.repeats // 3), args.drift_ref_repeats, args.n,
                                 args.threshold))
    print(f"n={args.n}, threshold={args.threshold}, repeats={args.repeats}; cold = fresh IndexCache() per "
          f"query, warm = cache reused; reference = evident.alignment.reference.align_reference")
    print_table(rows)
    print(f"total benchmark time {time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
