"""How much of EvidenT one offline query walks through: modules entered and file-to-file transitions.

    python benchmarks/trace_query.py [--question "..."] [--corpus examples/corpus] [--list]

The corpus is indexed first (`evident index`, as `make demo` does), then the graph answers the question
twice, offline, in this process; the second answer runs under `sys.setprofile` (and
`threading.setprofile`, for the worker threads that search sources). The first one is not counted: it
loads what a running deployment holds already (the index, the embeddings model, caches), so the count is
the path of a query, not of start-up. Counted, over the call events of the traced answer:

- modules entered: the evident/ files one of whose functions runs (package `__init__.py` files count
  only when code in them runs);
- file-to-file transitions: the distinct (caller's file, called file) pairs of evident/ files, and how
  many calls cross from one evident/ file into another in all;
- call events: into evident/ code, and in all (libraries and the standard library included).

A generator's resumption is a call event too (as `sys.setprofile` reports it). `--list` prints every
module entered, per package, and every transition with its number of calls.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import sys
import threading
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

# The question of `make demo` (the Makefile's QUESTION).
DEMO_QUESTION = "How many days do I have to submit an expense report after a trip?"


@dataclass
class Trace:
    """What the profiler saw of one answer."""

    modules: set[Path] = field(default_factory=set)
    transitions: Counter[tuple[Path, Path]] = field(default_factory=Counter)
    evident_calls: int = 0
    all_calls: int = 0


def index(corpus: str) -> None:
    """`evident index CORPUS`, as `make demo` runs it before asking (its progress lines go to stderr)."""
    from evident.cli import main

    old = sys.argv
    sys.argv = ["evident", "index", corpus]
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):
            main()
    finally:
        sys.argv = old


def trace_query(corpus: str, question: str) -> Trace:
    """The call events of the second offline answer to `question` over the indexed `corpus`."""
    from evident.context import EvidentContext
    from evident.graph import build_graph

    package = str((ROOT / "evident").resolve())
    graph = build_graph()
    ctx = EvidentContext(corpus=[corpus], mode="offline")
    graph.invoke({"query": question}, context=ctx)  # loading, not the query's path: not counted
    trace = Trace()

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        if event != "call" or frame.f_code.co_name == "<module>":  # running code, not importing it
            return
        trace.all_calls += 1
        called = frame.f_code.co_filename
        if not called.startswith(package):
            return
        trace.evident_calls += 1
        trace.modules.add(Path(called))
        caller = frame.f_back.f_code.co_filename if frame.f_back is not None else ""
        if caller != called and caller.startswith(package):
            trace.transitions[Path(caller), Path(called)] += 1

    sys.setprofile(profile)
    threading.setprofile(profile)  # sources are searched on worker threads, started by this query
    try:
        graph.invoke({"query": question}, context=ctx)
    finally:
        sys.setprofile(None)
        threading.setprofile(None)  # type: ignore[arg-type]  # None clears it, as for sys.setprofile
    return trace


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--question", default=DEMO_QUESTION)
    ap.add_argument("--corpus", default=str(ROOT / "examples" / "corpus"))
    ap.add_argument("--list", action="store_true", help="print every module entered and every transition")
    args = ap.parse_args(argv)

    index(args.corpus)
    trace = trace_query(args.corpus, args.question)

    def shown(path: Path) -> str:
        return str(path.resolve().relative_to(ROOT))

    by_package: dict[str, list[str]] = defaultdict(list)
    for path in sorted(trace.modules):
        by_package[str(Path(shown(path)).parent)].append(path.name)
    print("| package | modules entered by one offline query |\n|---|---|")
    for package, names in sorted(by_package.items()):
        print(f"| {package} | {', '.join(names) if args.list else len(names)} |")
    print(f"| **total** | **{len(trace.modules)}** |")
    if args.list:
        print("\n| from | to | calls |\n|---|---|---|")
        for (caller, called), calls in sorted(trace.transitions.items(), key=lambda kv: (-kv[1], kv[0])):
            print(f"| {shown(caller)} | {shown(called)} | {calls} |")
    print(f"\nmodules entered: {len(trace.modules)}; file-to-file transitions: {len(trace.transitions)} distinct, "
          f"{sum(trace.transitions.values()):,} calls; call events: {trace.evident_calls:,} into evident/, "
          f"{trace.all_calls:,} in all")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
