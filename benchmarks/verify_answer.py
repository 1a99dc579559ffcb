"""How long `verify_answer` takes to check one agent answer, on real EvidenT evidence.

    python benchmarks/verify_answer.py [--repeats 21] [--corpus examples/corpus] [--questions examples/questions.jsonl]

For every question of the file, the EvidenT tool (`evident_tool`, offline, by words alone) answers over the
corpus once; its `ToolMessage` (content with `[n]` marks, the `EvidenceArtifact`) goes into a thread, followed
by one of three final answers an agent could give:

* copied      the tool's content as it is (what the offline `evident_agent` answers);
* misquoted   the same with the first number of every sentence that has one changed (+1);
* padded      the same with an uncited sentence no passage supports appended to each paragraph.

Each thread is checked `--repeats` times (`verify_answer(messages)`, a fresh alignment cache per call, so
nothing is reused across answers); it prints the median wall time per answer per kind, the slowest answer's
median, the answers' sizes, and the statuses found (copied answers should be all supported; misquoted ones
contradicted where a number changed; padded ones have one unsupported sentence per paragraph). Nothing is
asserted: the numbers are for reading.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import time
from collections import Counter
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from machine_info import describe  # noqa: E402  (benchmarks/ is on sys.path when run as a script)

from evident.agent.tool import evident_tool
from evident.agent.verify_answer import verify_answer
from evident.context import EvidentContext

ROOT = Path(__file__).resolve().parents[1]
_NUMBER = re.compile(r"(?<!\[)\b\d+\b(?!\])")  # a number, not a mark
PADDING = "Every employee also receives a company car and unlimited paid leave."


def misquoted(text: str) -> str:
    """The first number of every line changed by one."""
    return "\n".join(_NUMBER.sub(lambda m: str(int(m.group(0)) + 1), line, count=1) for line in text.split("\n"))


def padded(text: str) -> str:
    return "\n\n".join(f"{part} {PADDING}" if not part.startswith(("Sources:", "[")) else part
                       for part in text.split("\n\n"))


def threads(corpus: Path, questions: Path) -> list[tuple[str, str, list[Any]]]:
    tool = evident_tool(context=EvidentContext(corpus=[str(corpus)], embeddings="none"))
    out: list[tuple[str, str, list[Any]]] = []
    for i, line in enumerate(questions.read_text(encoding="utf-8").splitlines()):
        query = json.loads(line)["query"]
        call = {"name": tool.name, "args": {"query": query}, "id": f"call-{i}", "type": "tool_call"}
        result = tool.invoke(call)
        assert isinstance(result, ToolMessage)
        asked = [HumanMessage(query), AIMessage("", tool_calls=[call]), result]
        for kind, answer in (("copied", result.text), ("misquoted", misquoted(result.text)),
                             ("padded", padded(result.text))):
            out.append((kind, query, [*asked, AIMessage(answer)]))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=21)
    parser.add_argument("--corpus", type=Path, default=ROOT / "examples" / "corpus")
    parser.add_argument("--questions", type=Path, default=ROOT / "examples" / "questions.jsonl")
    args = parser.parse_args()
    print(describe())
    started = time.perf_counter()
    cases = threads(args.corpus, args.questions)
    print(f"{len(cases) // 3} questions answered by the EvidenT tool in {time.perf_counter() - started:.1f} s")
    per_kind: dict[str, list[float]] = {}
    statuses: dict[str, Counter[str]] = {}
    sizes: list[int] = []
    for kind, _query, messages in cases:
        times = []
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            check = verify_answer(messages)
            times.append(time.perf_counter() - t0)
        assert check is not None
        per_kind.setdefault(kind, []).append(statistics.median(times))
        statuses.setdefault(kind, Counter()).update(s.status for s in check.sentences)
        sizes.append(len(messages[-1].text))
    every = [t for ts in per_kind.values() for t in ts]
    print(f"answers: {len(every)}, {statistics.median(sizes)} characters (median), {max(sizes)} at most")
    print(f"median time per answer: {statistics.median(every) * 1000:.2f} ms "
          f"(slowest answer {max(every) * 1000:.2f} ms; {args.repeats} repeats each)")
    for kind, ts in per_kind.items():
        found = ", ".join(f"{n} {s}" for s, n in sorted(statuses[kind].items()))
        print(f"  {kind:<10} median {statistics.median(ts) * 1000:7.2f} ms   sentences: {found}")


if __name__ == "__main__":
    main()
