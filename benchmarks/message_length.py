"""The offline answer by message length on the development set (doc2dial-qa): on answerable questions, false
abstention and hedged answers; on unanswerable ones, refused and hedged; per bucket of message words. Issue 48
asks that whether a question is answered not depend on how long its message is: these are its two curves.

    python benchmarks/message_length.py [--data ../shared/data/doc2dial-qa] [--part tune|holdout|all]
                                        [--set first long situated] [--words] [--answers answers.json]

Three sets of messages. `first`: the first questions (questions.jsonl). `long`: the follow-up turns
(followups.jsonl) asked the way many users write, as one message: every earlier user turn of the dialogue
(the situation, in the user's own words), then the new turn, joined by blank lines, without history; only
messages of 25 words or more, the gold the turn's own. That is how `devset_check.py --long` builds them
(the project's shared tools), so the figures here and there are one measurement. Every long message is
answerable, and only 5 unanswerable first questions have 25 words or more; so `situated` builds the long
unanswerable ones: each unanswerable first question (a COVID-19 opener, a topic no page covers) after the
situation of a long message of `long`, in turn (its user's earlier turns): a message that tells a situation
the pages speak of, then asks what they do not. `holdout` is every fifth message of a set (index % 5 == 4),
after the long ones were chosen; the engine is tuned on `tune` only.

Every message goes to the default graph, offline with the default settings, over `DATA/corpus.jsonl`
(the embedded index `evident ask --corpus` builds; `--words`: by words alone), and is judged by the graph's
own output: refused is status `insufficient`, hedged is `evidence` `weak` (the answer opens with "The
documentation does not explicitly state"), answered is `evidence` `clear`. `--answers` keeps each message's
length, answerability, status and evidence, and reads them back on a second run instead of asking again.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
DEFAULT_DATA = ROOT.parent / "shared" / "data" / "doc2dial-qa"
LONG_WORDS = 25  # devset_check.py --long: a message so built is long from 25 words
BUCKETS = ((0, 12), (13, 24), (25, 49), (50, 99), (100, 10**9))

SETS = {"first": "first questions", "long": "follow-ups as one long message (devset_check.py --long)",
        "situated": "unanswerable first questions after a long message's situation"}
# One message as judged: (words, answerable, status, evidence).
Judged = tuple[int, bool, str, str]


def read(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]


def long_messages(followups: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each follow-up turn as one message: the user's earlier turns, then the turn, when 25 words or more."""
    out = []
    for q in followups:
        said = [m["content"] for m in q.get("history") or [] if m.get("role") == "user"]
        message = "\n\n".join([*said, q["query"]])
        if len(message.split()) >= LONG_WORDS:
            out.append({**q, "query": message, "history": []})
    return out


def situated(questions: list[dict[str, Any]], followups: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each unanswerable question after the situation of one long message (its earlier user turns), in turn."""
    situations = list(dict.fromkeys(q["query"].rsplit("\n\n", 1)[0] for q in long_messages(followups)))
    unanswerable = [q for q in questions if not q["answerable"]]
    return [{**q, "query": f"{situations[n % len(situations)]}\n\n{q['query']}"} for n, q in enumerate(unanswerable)]


def select(questions: list[dict[str, Any]], part: str) -> list[dict[str, Any]]:
    return [q for i, q in enumerate(questions) if part == "all" or (i % 5 == 4) == (part == "holdout")]


def ask(questions: list[dict[str, Any]], corpus: Path, words_only: bool) -> list[Judged]:
    from evident.commands.answer import invoke
    from evident.context import EvidentContext
    from evident.graph import graph

    ctx = EvidentContext(corpus=[str(corpus)], embeddings="none" if words_only else None)
    out: list[Judged] = []
    for n, q in enumerate(questions, 1):
        state = invoke(graph, ctx, q["query"])
        out.append((len(q["query"].split()), bool(q["answerable"]), str(state.get("status") or "error"),
                    str(state.get("evidence") or "none")))
        if n % 100 == 0:
            print(f"  {n}/{len(questions)} asked", file=sys.stderr, flush=True)
    return out


def label(lo: int, hi: int) -> str:
    return f"<= {hi} words" if lo == 0 else f">= {lo} words" if hi >= 10**9 else f"{lo}-{hi} words"


def share(k: int, n: int) -> str:
    return f"{k:>4d}/{n:<4d} {k / n:6.1%}" if n else f"{'-':>16}"


def table(judged: list[Judged]) -> list[str]:
    """One row per bucket that holds a message, and the total: answerable false abstention and hedged,
    unanswerable refused, hedged, and refused or hedged (both say the documentation does not answer)."""
    head = (f"| {'message length':<14} | {'answerable':>10} | {'false abstention':>16} | {'hedged':>16} | "
            f"{'unanswerable':>12} | {'refused':>16} | {'hedged':>16} | {'refused or hedged':>17} |")
    lines = [head, "|" + "|".join("-" * len(c) for c in head.split("|")[1:-1]) + "|"]
    rows = [(label(lo, hi), [j for j in judged if lo <= j[0] <= hi]) for lo, hi in BUCKETS]
    for name, part in [*rows, ("all", judged)]:
        if not part:
            continue
        yes = [j for j in part if j[1]]
        no = [j for j in part if not j[1]]
        refused = sum(j[2] == "insufficient" for j in no)
        weak = sum(j[3] == "weak" for j in no)
        lines.append(f"| {name:<14} | {len(yes):>10} | {share(sum(j[2] == 'insufficient' for j in yes), len(yes))} | "
                     f"{share(sum(j[3] == 'weak' for j in yes), len(yes))} | {len(no):>12} | "
                     f"{share(refused, len(no))} | {share(weak, len(no))} | {share(refused + weak, len(no)):>17} |")
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA, help="folder of questions.jsonl, followups.jsonl "
                    "and corpus.jsonl")
    ap.add_argument("--part", default="tune", choices=["tune", "holdout", "all"])
    ap.add_argument("--set", dest="sets", nargs="+", default=list(SETS), choices=list(SETS))
    ap.add_argument("--words", action="store_true", help="retrieve by words alone (no embeddings)")
    ap.add_argument("--answers", type=Path, default=None, help="keep (and reuse) each message's judgement here")
    args = ap.parse_args(argv)
    if not (args.data / "questions.jsonl").is_file():
        print(f"message_length: {args.data}/questions.jsonl not found (give --data)", file=sys.stderr)
        return 2
    kept: dict[str, list[Judged]] = {}
    if args.answers is not None and args.answers.is_file():
        kept = {k: [(int(w), bool(a), str(s), str(e)) for w, a, s, e in v]
                for k, v in json.loads(args.answers.read_text()).items()}
    for name in args.sets:
        key = f"{name}/{args.part}{'/words' if args.words else ''}"
        if key not in kept:
            questions = select(read(args.data / "questions.jsonl"), args.part)
            if name == "long":
                questions = select(long_messages(read(args.data / "followups.jsonl")), args.part)
            elif name == "situated":
                questions = situated(questions, read(args.data / "followups.jsonl"))
            kept[key] = ask(questions, args.data / "corpus.jsonl", args.words)
            if args.answers is not None:
                args.answers.write_text(json.dumps(kept))
        print(f"\n{args.data.name} {args.part}, {SETS[name]}:")
        print("\n".join(table(kept[key])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
