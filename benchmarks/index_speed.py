"""Indexing speed on a public manual: words first, then what embedding costs, against onnxruntime itself.

    apt-get install postgresql-doc-15           # the PostgreSQL 15 manual, about 1,200 HTML pages
    python benchmarks/index_speed.py            # a few minutes on 2 cores
    python benchmarks/index_speed.py --manual /usr/share/doc/python3-doc/html --windows 500

Reported:
- words only: the whole manual indexed from scratch (read, parsed, stored, ranked by Tantivy), as
  `evident index` does before it embeds anything, with `embeddings = "none"`: the manual is searchable then;
- EvidenT's embedding, in tokens per second: `LocalEmbeddings.encode` (tokenizing, batching by length,
  padding, the model, pooling) over a sample of the manual's windows (`--windows`, evenly spread);
- onnxruntime's raw tokens per second for the same model, the same texts and the same batches (the ones
  `encode` builds), counting only `InferenceSession.run`, in the same process and the same thread count;
  the two alternate (`--rounds`, medians), so that other work on the machine weighs on both alike;
- the ratio of the two (the target is 0.8 or more) and what embedding the whole manual would take at
  EvidenT's rate (its windows' tokens, counted with the model's tokenizer).
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from machine_info import describe  # noqa: E402  (benchmarks/ is on sys.path when run as a script)

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

MANUAL = Path("/usr/share/doc/postgresql-doc-15/html")


def words_only(manual: Path, folder: Path) -> tuple[Path, int, float]:
    from evident.connectors.index.embedded import LocalIndex

    target = folder / "manual.sqlite3"
    started = time.perf_counter()
    with LocalIndex(target) as index:
        index.refresh([manual], on_skip=lambda *_: None)
        documents = index.count()
    return target, documents, time.perf_counter() - started


def manual_windows(index: Path) -> list[str]:
    from evident.embeddings.windows import document_windows

    with sqlite3.connect(index) as conn:
        rows = conn.execute("SELECT title, content FROM documents ORDER BY id").fetchall()
    return [text for title, content in rows for text in document_windows(str(title), str(content))[1]]


def batches(encodings: list, batch_size: int, max_tokens: int) -> list[list[int]]:  # type: ignore[type-arg]
    """The batches `LocalEmbeddings.encode` builds: by length, at most `batch_size` texts and `max_tokens`."""
    order = sorted(range(len(encodings)), key=lambda i: len(encodings[i].ids))
    out: list[list[int]] = [[]]
    for i in order:
        width = len(encodings[i].ids)
        if out[-1] and (len(out[-1]) >= batch_size or (len(out[-1]) + 1) * width > max_tokens):
            out.append([])
        out[-1].append(i)
    return out


def raw_onnxruntime(texts: list[str], threads: int, batch_size: int) -> tuple[int, Callable[[], float]]:
    """(tokens, a run: the seconds of `session.run` alone) for the same texts and batches as `encode`."""
    import numpy as np
    import onnxruntime
    from tokenizers import Tokenizer

    from evident.embeddings.local import MAX_BATCH_TOKENS, MAX_SEQ_LENGTH
    from evident.embeddings.model_files import locate_model_files

    files = locate_model_files()
    tokenizer = Tokenizer.from_file(str(files.tokenizer))
    tokenizer.enable_truncation(max_length=MAX_SEQ_LENGTH)
    tokenizer.no_padding()
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.log_severity_level = 3
    session = onnxruntime.InferenceSession(str(files.model), sess_options=options, providers=["CPUExecutionProvider"])
    encodings = tokenizer.encode_batch(texts)
    feeds = []
    for batch in batches(encodings, batch_size, MAX_BATCH_TOKENS):
        width = max(len(encodings[i].ids) for i in batch)
        ids = np.zeros((len(batch), width), dtype=np.int64)
        mask = np.zeros_like(ids)
        for row, i in enumerate(batch):
            n = len(encodings[i].ids)
            ids[row, :n], mask[row, :n] = encodings[i].ids, encodings[i].attention_mask
        feeds.append({"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)})
    session.run(["last_hidden_state"], feeds[0])  # warm-up, as `encode` below is warmed up

    def run() -> float:
        started = time.perf_counter()
        for feed in feeds:
            session.run(["last_hidden_state"], feed)
        return time.perf_counter() - started

    return sum(len(e.ids) for e in encodings), run


def evident_encode(texts: list[str], threads: int, batch_size: int) -> Callable[[], float]:
    """A run of `LocalEmbeddings.encode` over `texts`: its seconds."""
    from evident.embeddings.local import LocalEmbeddings

    embeddings = LocalEmbeddings(threads=threads, batch_size=batch_size)
    embeddings.load()
    embeddings.encode(texts[:8])  # warm-up: the optimised session, as `evident index` runs it

    def run() -> float:
        started = time.perf_counter()
        embeddings.encode(texts)
        return time.perf_counter() - started

    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--manual", type=Path, default=MANUAL, help=f"a folder of HTML pages (default {MANUAL})")
    parser.add_argument("--windows", type=int, default=600, help="windows embedded by each of the two (default 600)")
    parser.add_argument("--threads", type=int, default=None, help="onnxruntime threads (default: the cores)")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=3, help="alternated runs of each (default 3; medians)")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--measure", nargs=2, metavar=("WAY", "TEXTS"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:  # one timed run, in a process of its own (see below)
        way, path = args.measure
        texts = json.loads(Path(path).read_text(encoding="utf-8"))
        tokens, run = raw_onnxruntime(texts, args.threads, args.batch_size)
        if way == "evident":
            run = evident_encode(texts, args.threads, args.batch_size)
        print(json.dumps({"tokens": tokens, "seconds": run()}))
        return
    if not args.manual.is_dir():
        sys.exit(f"{args.manual}: no such folder; `apt-get install postgresql-doc-15`, or give --manual")

    import onnxruntime
    import tokenizers
    from tokenizers import Tokenizer

    from evident.embeddings.local import MAX_SEQ_LENGTH, available_cores
    from evident.embeddings.model_files import locate_model_files

    threads = args.threads or available_cores()
    with tempfile.TemporaryDirectory() as folder:
        index, documents, words_s = words_only(args.manual, Path(folder))
        windows = manual_windows(index)
    step = max(1, len(windows) // max(1, args.windows))
    sample = windows[::step][: args.windows]
    counter = Tokenizer.from_file(str(locate_model_files().tokenizer))
    counter.enable_truncation(max_length=MAX_SEQ_LENGTH)
    all_tokens = sum(len(e.ids) for e in counter.encode_batch(windows))
    # Each run in a process of its own (an idle onnxruntime session's threads spin for a while after a
    # run, and would slow the other's), alternated so that other work on the machine weighs on both alike.
    raw_times, evident_times = [], []
    with tempfile.TemporaryDirectory() as folder:
        texts = Path(folder) / "texts.json"
        texts.write_text(json.dumps(sample), encoding="utf-8")
        for _ in range(args.rounds):
            for way, times in (("raw", raw_times), ("evident", evident_times)):
                measured = json.loads(subprocess.run(
                    [sys.executable, __file__, "--measure", way, str(texts), "--threads", str(threads),
                     "--batch-size", str(args.batch_size)], check=True, capture_output=True, text=True).stdout)
                times.append(measured["seconds"])
                tokens = measured["tokens"]
    raw_s, evident_s = statistics.median(raw_times), statistics.median(evident_times)
    result = {
        "machine": describe(f"onnxruntime {onnxruntime.__version__}", f"tokenizers {tokenizers.__version__}"),
        "manual": str(args.manual), "documents": documents, "words_only_s": round(words_s, 1),
        "manual_windows": len(windows), "manual_tokens": all_tokens,
        "sample_windows": len(sample), "sample_tokens": tokens, "threads": threads, "batch_size": args.batch_size,
        "rounds": args.rounds,
        "evident_tokens_per_s": round(tokens / evident_s), "raw_tokens_per_s": round(tokens / raw_s),
        "ratio": round(raw_s / evident_s, 3),
        "whole_manual_embedding_s": round(all_tokens / (tokens / evident_s)),
    }
    if args.json:
        print(json.dumps(result))
        return
    print(result["machine"])
    print(f"{args.manual}: {documents} documents, words only {words_s:.1f} s (target: under 90 s)")
    print(f"{len(windows):,} windows, {all_tokens:,} tokens; sample of {len(sample)} windows ({tokens:,} tokens), "
          f"{threads} threads, batches of {args.batch_size}")
    print(f"EvidenT encode: {result['evident_tokens_per_s']:,} tokens/s; onnxruntime alone: "
          f"{result['raw_tokens_per_s']:,} tokens/s; ratio {result['ratio']} (target: 0.8 or more)")
    print(f"embedding the whole manual at EvidenT's rate: about {result['whole_manual_embedding_s'] / 60:.1f} min")


if __name__ == "__main__":
    main()
