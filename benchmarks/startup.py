"""Cold start of `evident ask` over the bundled examples against `python -c "import langgraph.graph"`.

    python benchmarks/startup.py [--runs 15] [--question "..."]

Each run is a new process (nothing imported, nothing loaded: a cold start as a user has it; the
operating system's file cache and Python's bytecode cache stay warm, as they are for a user's second
command). The runs of the
commands alternate, so a machine that gets busier or quieter during the measurement weighs on
all of them alike. The examples' index is built (and the embeddings model read once) before the
first timed run, so every timed `ask` opens an index that is up to date, as a user's does.

Printed: the median, lower and upper quartile of the wall time of each command, the ratio of the
medians, and the median of the per-round ratios (each `ask` divided by the baseline run next to
it: the figure least moved by a busy machine). Issue 29's target: `ask` within 1.3x the baseline.
Also timed, for reference: `evident --help` and `evident verify` (which must not load LangChain).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))

from machine_info import describe  # noqa: E402  (benchmarks/ is on sys.path when run as a script)

QUESTION = "How many days do I have to submit an expense report after a trip?"
BASELINE = "import langgraph.graph"
TARGET_RATIO = 1.3


def _evident() -> list[str]:
    """The `evident` a user runs: the console script next to this Python, else `python -m`."""
    script = Path(sys.executable).with_name("evident")
    return [str(script)] if script.is_file() else [sys.executable, "-m", "evident.cli"]


def _environment() -> dict[str, str]:
    # Offline and with no evident.toml: the bundled examples, as `evident ask` with no settings. Bytecode is
    # written and read as a user's Python does: pip compiled the baseline's packages at install, and a user's
    # EvidenT has its own (compiled at install, or by the first run of an editable one). A shell that sets
    # PYTHONDONTWRITEBYTECODE would otherwise have every timed `ask` compile EvidenT's sources, about 0.08 s.
    skipped = ("EVIDENT_", "OPENAI_", "LANGSMITH_", "PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX")
    return {k: v for k, v in os.environ.items() if not k.startswith(skipped)}


def _timed(argv: list[str], cwd: Path, env: dict[str, str]) -> float:
    start = time.perf_counter()
    proc = subprocess.run(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True)
    took = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({proc.returncode}):\n{proc.stderr}")
    return took


def _verify_inputs(folder: Path) -> list[str]:
    docs, passages = folder / "docs.jsonl", folder / "passages.jsonl"
    text = "Expense reports must be submitted within 30 days of the end of a trip."
    docs.write_text(json.dumps({"url": "KB-1", "content": text}) + "\n", encoding="utf-8")
    passages.write_text(json.dumps({"passage_id": "p1", "url": "KB-1", "content": text}) + "\n", encoding="utf-8")
    return ["verify", "--docs", str(docs), "--passages", str(passages)]


def _quartiles(values: list[float]) -> tuple[float, float, float]:
    low, mid, high = statistics.quantiles(values, n=4) if len(values) > 1 else (values[0],) * 3
    return low, statistics.median(values), high


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=15, help="Timed runs of each command (default 15).")
    parser.add_argument("--question", default=QUESTION)
    args = parser.parse_args()
    env = _environment()
    evident = _evident()
    with tempfile.TemporaryDirectory(prefix="evident-startup-") as tmp:
        folder = Path(tmp)
        commands = {
            f'python -c "{BASELINE}"': [sys.executable, "-c", BASELINE],
            "evident ask (examples)": [*evident, "ask", args.question],
            "evident --help": [*evident, "--help"],
            "evident verify": [*evident, *_verify_inputs(folder)],
        }
        for argv in commands.values():  # warm-up: the index is built, files are in the page cache
            _timed(argv, folder, env)
        times: dict[str, list[float]] = {name: [] for name in commands}
        for _ in range(args.runs):
            for name, argv in commands.items():
                times[name].append(_timed(argv, folder, env))
    base_name, ask_name = list(commands)[:2]
    base = statistics.median(times[base_name])
    print(f"Cold start, {args.runs} runs each, interleaved; {describe()}")
    print(f"load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print()
    print("| command | median s | quartiles s | x baseline |")
    print("|---|---:|---:|---:|")
    for name, values in times.items():
        low, mid, high = _quartiles(values)
        print(f"| `{name}` | {mid:.3f} | {low:.3f}–{high:.3f} | {mid / base:.2f} |")
    paired = statistics.median(a / b for a, b in zip(times[ask_name], times[base_name], strict=True))
    ratio = statistics.median(times[ask_name]) / base
    print()
    print(f"ask / baseline: {ratio:.2f} (medians), {paired:.2f} (median of per-round ratios); "
          f"target {TARGET_RATIO}: {'met' if max(ratio, paired) <= TARGET_RATIO else 'not met'}")


if __name__ == "__main__":
    main()
