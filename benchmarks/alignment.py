"""Alignment benchmark: `evident.alignment.align` against the plain implementation of the paper's rule.

    python benchmarks/alignment.py                     # main and drift scenarios, well under two minutes
    python benchmarks/alignment.py --scenario bulk     # 5,000 passages over 60 guidance pages, about 2 minutes
    python benchmarks/alignment.py --repeats 21 --docs 20 --doc-kb 100 --passages 40
    python benchmarks/alignment.py --profile [--scenario bulk]   # cProfile of one cold run

Everything is generated deterministically from a seed (no network, no data files): English-like
documents built from a vocabulary of a few thousand words (Zipf-distributed, with the common
function words of English), with Markdown headings, bullet lists, tables, curly quotes and
numbers; and passages of the kinds an extractor really produces:

* verbatim   one or two sentences of one paragraph of the cited document (case and spacing varied);
* reformatted  the same with line breaks, Markdown emphasis, upper or lower case (bulk only);
* drifted    verbatim text of one document cited under the URL of another (citation drift);
* tail       a real sentence followed by an invented one (partially invented);
* number     a sentence of the cited document with one number changed ("14 days" for "10 days");
* ellipsis   one sentence with words in its middle replaced by " … ";
* invented   fluent text that occurs in no document.

Scenarios: `main` (default 20 documents × 100 KB, 40 passages), `drift` (default 1,000
documents × 10 KB, 40 passages, 40% of them drifted or invented, so the drift search scans
every document) and `bulk` (5,000 passages over 60 pages of about 8 KB of guidance-like prose:
eligibility rules, fees, rates and deadlines built from a grammar, so that pages share much of
their phrasing as real guidance does; a fifth of the passages drifted or invented, the others
verbatim, reformatted, partially invented or with one number changed). Per scenario it prints
the median wall time of one run (cold: a fresh `IndexCache()` per run, so every document index
is built; warm: the cache reused), passages per second, peak traced memory of one cold run
(tracemalloc), and the median time of `tests/support/alignment_reference.py`'s `align_reference` on the same
input, with the ratio. Then, per kind of passage, the share of right decisions of both (what
"right" means for each kind is in `Truth` and `is_right`).
"""

from __future__ import annotations

import argparse
import gc
import random
import re
import statistics
import sys
import time
import tracemalloc
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from machine_info import describe  # noqa: E402  (benchmarks/ is on sys.path when run as a script)

# The repository root, for the reference implementation kept with the tests that compare against it.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from evident.alignment import IndexCache, align  # noqa: E402
from evident.alignment.tokenize import words  # noqa: E402
from tests.support.alignment_reference import align_reference  # noqa: E402

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


# --- guidance-like prose (the bulk scenario) ------------------------------------------------------

WHO = ["you", "your spouse", "applicants", "students", "veterans", "employers", "borrowers", "parents",
       "survivors", "eligible dependents", "self-employed workers", "retirees", "your representative",
       "the account holder", "new claimants", "caregivers", "landlords", "tenants", "small businesses", "farmers"]
MODAL = ["can", "must", "may", "should", "will need to", "are required to", "are not allowed to", "cannot"]
ACTION = ["apply for", "submit", "renew", "request", "cancel", "update", "appeal", "report changes to",
          "sign", "upload", "review", "pay", "claim", "transfer", "close"]
THING = ["the benefit", "a payment plan", "the application form", "your tax return", "a hardship grant",
         "the housing allowance", "a refund", "your direct deposit details", "the disability claim",
         "a deferment", "the income statement", "your student loan", "a replacement card",
         "the enrollment request", "an extension", "the pension estimate", "a fee waiver", "the travel voucher",
         "your medical records", "the childcare subsidy"]
WHEN = ["within {n} days of the decision", "before the end of the tax year", "at least {n} days before the deadline",
        "online or by mail", "through your online account", "in person at a local office",
        "no later than {n} weeks after the change", "every {n} months", "once a year",
        "after you receive the notice", "by calling the helpline", "using form {form}",
        "if your income changes by more than {pct}", "during the open enrollment period"]
PROGRAM = ["Direct Subsidized Loans", "Direct Unsubsidized Loans", "Parent PLUS Loans", "Grad PLUS Loans",
           "Perkins Loans", "Consolidation Loans", "Housing Choice Vouchers", "Supplemental Security Income",
           "Child Tax Credit payments", "Earned Income Credit payments", "Unemployment Insurance benefits",
           "Disability Insurance benefits", "Family Leave benefits", "Survivor Benefits", "Work Study awards"]
FEE = ["application fee", "late fee", "processing fee", "origination fee", "annual fee", "filing fee",
       "replacement fee", "monthly premium"]
PERIOD = ["the first year", "the 2024-25 award year", "loans first disbursed after July 1", "each academic year",
          "the life of the loan", "the current benefit period", "the first {n} months"]
HEADINGS = ["Who can apply", "How to apply", "What you need", "Eligibility", "Interest rates and fees",
            "Deadlines", "After you apply", "Appeals", "Payments", "Reporting changes", "Documents you need",
            "Contact us", "Repayment", "If your circumstances change", "Exceptions"]
FORMS = ["SF-{n}", "W-{n}", "DS-{n}", "I-{n}"]
TEMPLATES = (
    "{who} {modal} {action} {thing} {when}",
    "the {fee} for {thing} is {money}, or {money} if you {action} it {when}",
    "{program} have a fixed interest rate of {pct} for {period}",
    "if {who} {action} {thing} {when}, {who} {modal} {action} {thing}",
    "{program} are not available to {who} who earn more than {money} a year, unless {who} {action} {thing}",
    "you will receive a decision within {n} days, and payments are made every {n} days",
    "to {action} {thing}, use form {form} and include {thing}",
    "the maximum amount for {program} is {money} per year, and {who} {modal} {action} {thing} {when}",
)
# What a model invents: plausible sentences about things these pages never discuss.
INVENTED = [
    "Our regional office in {city} is open on {day} mornings for walk-in appointments without a ticket.",
    "Applicants who speak {lang} can ask for an interpreter at no cost through the community liaison desk.",
    "A dedicated mobile application lets {who} scan receipts and track every claim in real time.",
    "The {city} pilot programme rewards early filers with a voucher for public transport.",
    "Each household also receives a welcome pack with a printed calendar of {lang} workshops.",
    "Caseworkers visit {city} on the first {day} of the month to answer questions in person.",
]
CITIES = ["Springfield", "Riverton", "Lakeside", "Fairview", "Greenville", "Madison", "Clayton", "Ashford"]
DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"]
LANGS = ["Spanish", "Vietnamese", "Tagalog", "Arabic", "Polish", "Somali"]
SLOTS = {"who": WHO, "modal": MODAL, "action": ACTION, "thing": THING, "when": WHEN, "program": PROGRAM,
         "fee": FEE, "period": PERIOD, "city": CITIES, "day": DAYS, "lang": LANGS}
_SLOT = re.compile(r"\{(\w+)\}")


class GuidanceGen:
    """Pages of benefits and loan guidance: rules, fees, rates and deadlines with many numbers."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def _slot(self, name: str) -> str:
        """A fresh value for one `{name}` of a template (the same name twice draws twice)."""
        rng = self.rng
        if name in SLOTS:
            return self.fill(rng.choice(SLOTS[name]))
        if name == "n":
            return str(rng.choice((2, 3, 5, 7, 10, 14, 15, 21, 30, 45, 60, 90, 120, 180, 365)))
        if name == "pct":
            return f"{rng.randint(1, 9)}.{rng.randint(0, 99):02d}%"
        if name == "form":
            return rng.choice(FORMS).format(n=rng.randint(10, 999))
        if name != "money":
            raise KeyError(name)
        if rng.random() < 0.5:
            return f"${rng.choice((25, 35, 40, 50, 75, 100, 150, 250, 500))}"
        return f"${rng.choice((1, 2, 5, 12, 20, 57, 120, 123))},{rng.choice(('000', '500', '250'))}"

    def fill(self, template: str) -> str:
        return _SLOT.sub(lambda m: self._slot(m.group(1)), template)

    def sentence(self) -> str:
        s = self.fill(self.rng.choice(TEMPLATES))
        return s[0].upper() + s[1:] + "."

    def invented(self) -> str:
        return self.fill(self.rng.choice(INVENTED))

    def document(self, title: str, target: int) -> str:
        rng = self.rng
        parts = [f"# {title}\n\n", " ".join(self.sentence() for _ in range(rng.randint(2, 4))) + "\n\n"]
        size = sum(map(len, parts))
        while size < target:
            block = f"## {rng.choice(HEADINGS)}\n\n"
            r = rng.random()
            if r < 0.3:
                block += "".join(f"- {self.sentence()}\n" for _ in range(rng.randint(2, 5))) + "\n"
            elif r < 0.4:
                block += "".join(f"{i}. {self.sentence()}\n" for i in range(1, rng.randint(3, 6))) + "\n"
            elif r < 0.5:
                block += "| Loan type | Interest rate | Fee |\n|---|---|---|\n" + "".join(
                    self.fill("| {program} | {pct} | {money} |\n")
                    for _ in range(rng.randint(2, 5))) + "\n"
            else:
                for _ in range(rng.randint(1, 3)):
                    block += " ".join(self.sentence() for _ in range(rng.randint(2, 5))) + "\n\n"
            parts.append(block)
            size += len(block)
        return "".join(parts)


# --- passages and what the right decision for each is --------------------------------------------

_ITEM = re.compile(r"^(?:[-*] |\d+\. )")
_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")


def paragraphs_of(text: str) -> list[list[str]]:
    """The sentences of each paragraph or list item (lines that are not headings or table rows)."""
    out: list[list[str]] = []
    for line in text.split("\n"):
        line = _ITEM.sub("", line.strip())
        if not line or line.startswith(("#", "|")):
            continue
        sents: list[str] = []
        start = 0
        for i, ch in enumerate(line):
            if ch in ".?!" and (i + 1 == len(line) or line[i + 1] == " "):
                sents.append(line[start : i + 1].strip())
                start = i + 1
        sents = [x for x in sents if len(x.split()) >= 8]
        if sents:
            out.append(sents)
    return out


@dataclass
class Truth:
    """The right decision for a generated passage."""

    kind: str
    action: str
    urls: frozenset[str]  # acceptable final documents
    words: list[str]  # the quote's words (for "truncated": the supported part it must come from)
    subs: list[tuple[list[str], list[str]]] = field(default_factory=list)  # (passage words, source words)


def is_right(t: Truth, action: str, url: str, quote_words: list[str],
             subs: list[tuple[list[str], list[str]]]) -> bool:
    """Whether a decision is the right one for its passage (kind by kind, see `Truth`)."""
    if action != t.action:
        return False
    if action == "dropped":
        return True
    if url not in t.urls:
        return False
    if action == "truncated":
        # The part the source supports, without a word of the invented part: at least 80% of it.
        m = len(quote_words)
        return m >= 0.8 * len(t.words) and any(t.words[i : i + m] == quote_words
                                                 for i in range(len(t.words) - m + 1))
    return quote_words == t.words and (
        action != "corrected" or [_changed(*x) for x in subs] == [_changed(*x) for x in t.subs])


def _changed(said: list[str], source: list[str]) -> tuple[list[str], list[str]]:
    """The words that differ, without the words both sides share around them ("I-528" / "I-728")."""
    while said and source and said[0] == source[0]:
        said, source = said[1:], source[1:]
    while said and source and said[-1] == source[-1]:
        said, source = said[:-1], source[:-1]
    return said, source


@dataclass
class Scenario:
    name: str
    docs: list[dict[str, str]]
    passages: list[dict[str, str]]
    truths: list[Truth]

    @property
    def kinds(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for t in self.truths:
            out[t.kind] = out.get(t.kind, 0) + 1
        return out


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


def _reformat(rng: random.Random, s: str) -> str:
    """Heavier reformatting that keeps every word: line breaks, Markdown emphasis, case, spacing."""
    ws = s.split(" ")
    r = rng.random()
    if r < 0.25:
        return s.lower().replace(", ", " , ")
    if r < 0.5:
        i = rng.randrange(1, len(ws))
        return " ".join(ws[:i]) + "\n" + " ".join(ws[i:])
    if r < 0.75:
        i = rng.randrange(0, len(ws) - 1)
        return " ".join(ws[:i] + [f"**{ws[i]} {ws[i + 1]}**"] + ws[i + 2 :])
    return "   ".join(ws).upper()


class _Contains:
    """Which documents contain a token sequence (normalised), for generating unambiguous cases."""

    def __init__(self, docs: list[dict[str, str]]) -> None:
        self.urls = [d["url"] for d in docs]
        self.tstrings = [" " + " ".join(words(d["content"])) + " " for d in docs]

    def where(self, text: str) -> frozenset[str]:
        probe = " " + " ".join(words(text)) + " "
        return frozenset(u for u, t in zip(self.urls, self.tstrings, strict=True) if probe in t)


def _change_number(rng: random.Random, s: str) -> tuple[str, str, str] | None:
    """`s` with one number changed, and the (new, old) numbers; None if it has none."""
    found = list(_NUMBER.finditer(s))
    if not found:
        return None
    m = rng.choice(found)
    old = m.group()
    digits = [i for i, ch in enumerate(old) if ch.isdigit()]
    i = rng.choice(digits)
    new = old[:i] + str((int(old[i]) + rng.randint(1, 8)) % 10) + old[i + 1 :]
    if new == old or new.lstrip("0") == "" or (new[0] == "0" and len(new) > 1 and new[1].isdigit()):
        return None
    return s[: m.start()] + new + s[m.end() :], new, old


def _passage(kind: str, rng: random.Random, docs: list[dict[str, str]], paras: list[list[list[str]]],
             contains: _Contains, invent: Any) -> tuple[str, str, Truth] | None:
    """One passage of `kind` (content, cited URL, truth), or None to draw again."""
    di = rng.randrange(len(docs))
    url = docs[di]["url"]
    para = rng.choice(paras[di])
    j = rng.randrange(len(para))
    one = para[j]
    if kind in ("verbatim", "reformatted"):
        text = " ".join(para[j : j + rng.randint(1, 2)])
        content = _vary(rng, text) if kind == "verbatim" else _reformat(rng, text)
        return content, url, Truth(kind, "kept", frozenset({url}), words(text))
    if kind == "drifted":
        other = docs[(di + 1 + rng.randrange(len(docs) - 1)) % len(docs)]["url"]
        where = contains.where(one)
        if other in where:
            return None
        return one, other, Truth(kind, "relinked", where, words(one))
    if kind == "tail":
        return one + " " + invent(), url, Truth(kind, "truncated", frozenset({url}), words(one))
    if kind == "number":
        changed = _change_number(rng, one)
        if changed is None or contains.where(changed[0]):
            return None
        content, new, old = changed
        return content, url, Truth(kind, "corrected", frozenset({url}), words(one), [(words(new), words(old))])
    if kind == "ellipsis":
        ws = one.split(" ")
        if len(ws) < 12:
            return None
        a = rng.randint(4, len(ws) - 8)
        b = rng.randint(a + 2, len(ws) - 4)
        content = " ".join(ws[:a]) + " … " + " ".join(ws[b:])
        return content, url, Truth(kind, "kept", frozenset({url}), words(content))
    content = " ".join(invent() for _ in range(rng.randint(1, 2)))  # invented
    return content, url, Truth(kind, "dropped", frozenset(), [])


def make_scenario(name: str, n_docs: int, doc_chars: int, n_passages: int, mix: dict[str, float],
                  seed: int, prose: str = "zipf") -> Scenario:
    rng = random.Random(seed)
    if prose == "guidance":
        guide = GuidanceGen(rng)
        docs = [{"url": f"https://benefits.example.gov/{name}/guide-{i:03d}",
                 "content": guide.document(f"{rng.choice(PROGRAM)}: {rng.choice(HEADINGS).lower()}", doc_chars)}
                for i in range(n_docs)]
        invent = guide.invented
    else:
        gen = TextGen(rng, make_vocabulary(rng, 3000))
        docs = [{"url": f"https://intranet.example.com/{name}/doc-{i:04d}", "content": gen.document(doc_chars)}
                for i in range(n_docs)]
        invent = gen.sentence
    paras = [paragraphs_of(d["content"]) for d in docs]
    contains = _Contains(docs)
    kinds = [k for k, share in mix.items() for _ in range(round(share * n_passages))]
    kinds = (kinds + ["verbatim"] * n_passages)[:n_passages]
    rng.shuffle(kinds)
    passages: list[dict[str, str]] = []
    truths: list[Truth] = []
    for i, kind in enumerate(kinds):
        made = None
        while made is None:
            made = _passage(kind, rng, docs, paras, contains, invent)
        content, url, truth = made
        if kind == "invented" and contains.where(content):
            truth = Truth(kind, "kept", contains.where(content), words(content))  # unlikely: text is real
        passages.append({"passage_id": f"{name}-{i}", "url": url, "content": content})
        truths.append(truth)
    return Scenario(name, docs, passages, truths)


def _time(fn: Any, repeats: int) -> tuple[float, Any]:
    times: list[float] = []
    out = None
    for _ in range(repeats):
        gc.collect()
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def right_shares(sc: Scenario, decisions: list[Any],
                 reference: list[dict[str, Any]]) -> dict[str, tuple[int, int, int]]:
    """Per kind: (passages, right decisions of `align`, right decisions of the reference)."""
    out: dict[str, list[int]] = {}
    for t, d, r in zip(sc.truths, decisions, reference, strict=True):
        ours = is_right(t, d.action, d.url, words(d.quote),
                        [(words(x.passage), words(x.source)) for x in d.substitutions])
        theirs = is_right(t, r["action"], r["url"], words(r["text"]), [])
        row = out.setdefault(t.kind, [0, 0, 0])
        row[0] += 1
        row[1] += ours
        row[2] += theirs
    return {k: (a, b, c) for k, (a, b, c) in out.items()}


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
        "peak_mb": peak / 1e6, "ref_ms": ref * 1000, "ratio": ref / cold, "repeats": repeats,
        "ref_repeats": ref_repeats, "actions": actions, "kinds": sc.kinds,
        "right": right_shares(sc, decisions, ref_out),
    }


def _print_rows(head: tuple[str, ...], body: list[tuple[str, ...]]) -> None:
    widths = [max(len(h), *(len(b[i]) for b in body)) for i, h in enumerate(head)]
    print("| " + " | ".join(h.ljust(w) for h, w in zip(head, widths, strict=True)) + " |")
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for b in body:
        print("| " + " | ".join(c.ljust(w) for c, w in zip(b, widths, strict=True)) + " |")


def print_table(rows: list[dict[str, Any]]) -> None:
    head = ("scenario", "docs × KB", "passages", "cold ms", "warm ms", "passages/s cold", "passages/s warm",
            "peak MB", "reference ms", "× faster (cold)", "× faster (warm)")
    _print_rows(head, [
        (r["scenario"], f"{r['docs']} × {r['kb']:.0f}", f"{r['passages']:,}", f"{r['cold_ms']:,.1f}",
         f"{r['warm_ms']:,.1f}", f"{r['pps_cold']:,.0f}", f"{r['pps_warm']:,.0f}", f"{r['peak_mb']:.1f}",
         f"{r['ref_ms']:,.0f}", f"{r['ratio']:.1f}×", f"{r['ref_ms'] / r['warm_ms']:.1f}×")
        for r in rows
    ])
    print()
    print("Right decisions per kind of passage (align | reference; the reference has no `corrected`):")
    body = []
    for r in rows:
        for kind, (total, ours, theirs) in sorted(r["right"].items()):
            body.append((r["scenario"], kind, f"{total:,}", f"{ours / total:.1%}", f"{theirs / total:.1%}"))
        total = sum(v[0] for v in r["right"].values())
        body.append((r["scenario"], "all", f"{total:,}", f"{sum(v[1] for v in r['right'].values()) / total:.1%}",
                     f"{sum(v[2] for v in r['right'].values()) / total:.1%}"))
    _print_rows(("scenario", "kind", "passages", "align right", "reference right"), body)
    for r in rows:
        print(f"  {r['scenario']}: decisions {r['actions']}")


def machine() -> str:
    return describe()


MAIN_MIX = {"verbatim": 0.4, "drifted": 0.15, "tail": 0.125, "number": 0.1, "ellipsis": 0.075, "invented": 0.15}
DRIFT_MIX = {"verbatim": 0.4, "drifted": 0.2, "tail": 0.1, "number": 0.1, "invented": 0.2}
BULK_MIX = {"verbatim": 0.2, "reformatted": 0.2, "tail": 0.2, "number": 0.2, "drifted": 0.1, "invented": 0.1}


# The numeric options: (flag, default, help); the default's type is the option's type.
NUMERIC_OPTIONS: tuple[tuple[str, int | float, str], ...] = (
    ("--repeats", 9, "timed runs per measurement (median)"),
    ("--ref-repeats", 3, "timed runs of the reference (main)"),
    ("--docs", 20, ""),
    ("--doc-kb", 100.0, ""),
    ("--passages", 40, ""),
    ("--drift-docs", 1000, "documents of the drift scenario (0: skip)"),
    ("--drift-doc-kb", 10.0, ""),
    ("--drift-ref-repeats", 1, ""),
    ("--bulk-docs", 60, ""),
    ("--bulk-doc-kb", 8.0, ""),
    ("--bulk-passages", 5000, ""),
    ("--bulk-repeats", 5, "timed runs of align and of the reference (bulk)"),
    ("--n", 5, ""),
    ("--threshold", 0.7, ""),
    ("--seed", 20240601, ""),
)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scenario", choices=("default", "main", "drift", "bulk", "all"), default="default",
                    help="default: main and drift")
    for flag, default, help_text in NUMERIC_OPTIONS:
        ap.add_argument(flag, type=type(default), default=default, help=help_text or None)
    ap.add_argument("--profile", action="store_true", help="cProfile one cold run of the first scenario")
    args = ap.parse_args(argv)

    print(f"machine: {machine()}")
    t0 = time.perf_counter()
    wanted = {"default": ["main", "drift"], "all": ["main", "drift", "bulk"]}.get(args.scenario, [args.scenario])
    if not args.drift_docs:
        wanted = [w for w in wanted if w != "drift"]
    build = {
        "main": lambda: make_scenario("main", args.docs, int(args.doc_kb * 1000), args.passages, MAIN_MIX,
                                      args.seed),
        "drift": lambda: make_scenario("drift", args.drift_docs, int(args.drift_doc_kb * 1000), args.passages,
                                       DRIFT_MIX, args.seed + 1),
        "bulk": lambda: make_scenario("bulk", args.bulk_docs, int(args.bulk_doc_kb * 1000), args.bulk_passages,
                                      BULK_MIX, args.seed + 2, prose="guidance"),
    }
    if args.profile:
        import cProfile
        import pstats

        sc = build[wanted[0]]()
        align(sc.passages[:1], sc.docs[:1], cache=IndexCache())
        prof = cProfile.Profile()
        prof.enable()
        align(sc.passages, sc.docs, n=args.n, threshold=args.threshold, cache=IndexCache())
        prof.disable()
        pstats.Stats(prof, stream=sys.stdout).sort_stats("cumulative").print_stats(25)
        return 0
    repeats = {"main": (args.repeats, args.ref_repeats),
               "drift": (max(3, args.repeats // 3), args.drift_ref_repeats),
               "bulk": (args.bulk_repeats, args.bulk_repeats)}
    rows = [run_scenario(build[w](), *repeats[w], args.n, args.threshold) for w in wanted]
    runs = ", ".join(f"{r['scenario']} {r['repeats']} (reference {r['ref_repeats']})" for r in rows)
    print(f"n={args.n}, threshold={args.threshold}; medians of runs: {runs}; cold = fresh IndexCache() per run, "
          f"warm = cache reused; reference = tests/support/alignment_reference.py")
    print_table(rows)
    print(f"total benchmark time {time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
