"""How many of EvidenT's files one offline `evident ask` crosses (issue 15: at most 20).

    python benchmarks/query_files.py [--question "..."] [--corpus examples/corpus] [--list]

A file is crossed when a function defined in it runs during the command: the command runs in this
process under `sys.setprofile` (and `threading.setprofile`, for the worker threads that search
sources), after `evident index` and the imports, so the count is what a reader follows for one query,
not what Python runs at start-up. Package
`__init__.py` files without code are never counted. Prints the files per package, the total and,
with `--list`, every file.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import sys
import threading
from collections import defaultdict
from pathlib import Path
from types import FrameType
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

TARGET = 20


def crossed_files(corpus: str, question: str) -> set[Path]:
    """The evident/ files whose functions run while the CLI answers `question` over an indexed `corpus`."""
    import evident.commands.ask  # noqa: F401  # imported before profiling: importing is not crossing
    import evident.graph.builder  # noqa: F401
    from evident.cli import main

    package = (ROOT / "evident").resolve()
    seen: set[Path] = set()

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        if event == "call" and frame.f_code.co_name != "<module>":  # running code, not importing it
            seen.add(Path(frame.f_code.co_filename))

    def run(*argv: str) -> None:
        old = sys.argv
        sys.argv = ["evident", *argv]
        try:
            with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):
                main()
        finally:
            sys.argv = old

    run("index", corpus)  # the index exists before the query, as after `make demo`
    sys.setprofile(profile)
    threading.setprofile(profile)  # sources are searched on worker threads, started by this query
    try:
        run("ask", question, "--corpus", corpus, "--json")
    finally:
        sys.setprofile(None)
        threading.setprofile(None)  # type: ignore[arg-type]  # None clears it, as for sys.setprofile
    return {p.resolve() for p in seen if p.resolve().is_relative_to(package)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--question", default="How many days do I have to submit an expense report after a trip?")
    ap.add_argument("--corpus", default=str(ROOT / "examples" / "corpus"))
    ap.add_argument("--list", action="store_true", help="print every crossed file")
    args = ap.parse_args(argv)

    files = crossed_files(args.corpus, args.question)
    by_package: dict[str, list[str]] = defaultdict(list)
    for path in sorted(files):
        rel = path.relative_to(ROOT)
        by_package[str(rel.parent)].append(rel.name)
    print("| package | files crossed by one offline `evident ask` |\n|---|---|")
    for package, names in sorted(by_package.items()):
        shown = ", ".join(names) if args.list else str(len(names))
        print(f"| {package} | {shown} |")
    verdict = "met" if len(files) <= TARGET else "missed"
    print(f"| **total** | **{len(files)}** (target ≤ {TARGET}: {verdict}) |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
