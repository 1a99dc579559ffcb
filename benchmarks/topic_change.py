"""Conversations that change topic: doc2dial dialogues joined in pairs, asked with history and bare.

    python benchmarks/topic_change.py [--data ../shared/data/doc2dial-qa] [--pairs 60] [--part tune|holdout|all]

doc2dial's dialogues never leave their page, so they cannot show a conversation pulling a new topic
back to the old page. Here two dialogues on different pages are joined: dialogue A's whole conversation
(its user turns and the agent's replies), then dialogue B, whose turns are asked on that history: B's
first question (the switch: a question naming a new subject after a talk about another page) and B's
follow-ups (history: A, then B's turns before it). Each B turn is asked twice through the default graph
(offline, default settings): with the history as `{"messages": [...]}` and bare as `{"query": ...}`.
Printed for both: groundedness (a cited page is gold) and right page (the first citation is gold), for
all B turns, the switch turns and the follow-ups. The data is read at run time from `--data` (the
development set, data/doc2dial-qa); nothing of it is kept here. `--part` keeps the dialogues whose
first question, and the follow-ups whose line, is in that part of its file (holdout: every fifth line,
as ../shared/tools/devset_check.py splits them).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

DEFAULT_DATA = ROOT.parent / "shared" / "data" / "doc2dial-qa"

Item = dict[str, Any]


def read(path: Path) -> list[Item]:
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]


def in_part(position: int, part: str) -> bool:
    return part == "all" or (position % 5 == 4) == (part == "holdout")


def pages(item: Item) -> set[str]:
    return set(item.get("gold_urls") or []) | set(item.get("alt_urls") or [])


def dialogues(data: Path, part: str) -> list[tuple[Item, list[Item]]]:
    """(first question, its follow-ups in turn order) of every answerable dialogue with follow-ups."""
    later: dict[str, list[tuple[int, Item]]] = defaultdict(list)
    for i, q in enumerate(read(data / "followups.jsonl")):
        later[q["dial_id"]].append((i, q))  # every follow-up: A's conversation is whole whatever the part
    out = []
    for i, q in enumerate(read(data / "questions.jsonl")):
        turns = sorted(later.get(q.get("dial_id") or "", []), key=lambda t: t[1]["turn_id"])
        if q["answerable"] and turns and in_part(i, part):
            out.append((q, [t for _, t in turns]))
    return out


def conversation(first: Item, follow_ups: list[Item]) -> list[dict[str, str]]:
    """A dialogue's messages, user and agent, through its last follow-up's reply."""
    last = follow_ups[-1]
    return [*last["history"], {"role": "user", "content": last["query"]},
            {"role": "assistant", "content": last.get("agent_reply") or ""}]


def joined(data: Path, part: str, limit: int) -> list[tuple[Item, list[dict[str, str]], bool]]:
    """(B's turn, the history it is asked on, whether it is the switch) for up to `limit` pairs: the
    dialogues in file order, taken two by two, a pair kept when no page of B's turns is one of A's."""
    split = {q["id"]: i for i, q in enumerate(read(data / "followups.jsonl"))}
    found = dialogues(data, part)
    out: list[tuple[Item, list[dict[str, str]], bool]] = []
    pairs = 0
    for (a, a_later), (b, b_later) in zip(found[::2], found[1::2], strict=False):
        if pairs >= limit:
            break
        a_pages = pages(a).union(*(pages(t) for t in a_later))
        if a_pages & pages(b).union(*(pages(t) for t in b_later)):
            continue
        pairs += 1
        history = conversation(a, a_later)
        out.append((b, history, True))
        out.extend((t, [*history, *t["history"]], False) for t in b_later if in_part(split[t["id"]], part))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA, help="folder of questions.jsonl, followups.jsonl, "
                    "corpus.jsonl")
    ap.add_argument("--pairs", type=int, default=60, help="how many joined pairs (default 60)")
    ap.add_argument("--part", default="tune", choices=["tune", "holdout", "all"])
    args = ap.parse_args()
    if not (args.data / "followups.jsonl").is_file():
        sys.exit(f"no development set at {args.data} (give --data)")

    from evident.context import EvidentContext
    from evident.graph import build_graph

    ctx = EvidentContext(corpus=[str(args.data / "corpus.jsonl")])
    graph: Any = build_graph()  # invoked with either input form
    turns = joined(args.data, args.part, args.pairs)
    rows: dict[str, list[tuple[bool, bool, bool]]] = {"history": [], "bare": []}
    for turn, history, switch in turns:
        gold = pages(turn)
        asked = {"history": {"messages": [*history, {"role": "user", "content": turn["query"]}]},
                 "bare": {"query": turn["query"]}}
        for how, inputs in asked.items():
            out = graph.invoke(inputs, context=ctx)
            cited = [c["url"] for c in out.get("citations") or []]  # the graph returns JSON
            rows[how].append((switch, bool(set(cited) & gold), bool(cited and cited[0] in gold)))
    print(f"doc2dial-qa topic change {args.part}: {sum(s for _, _, s in turns)} pairs, {len(turns)} turns of the "
          "second dialogue")
    for how, got in rows.items():
        for name, keep in (("all", lambda s: True), ("switch", lambda s: s), ("follow-ups", lambda s: not s)):
            sel = [r for r in got if keep(r[0])]
            n = len(sel) or 1
            print(f"  {how:8} {name:10} n={len(sel):4}  grounded {sum(r[1] for r in sel) / n:.3f}  "
                  f"right page {sum(r[2] for r in sel) / n:.3f}")


if __name__ == "__main__":
    main()
