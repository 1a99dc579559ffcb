"""A cold `evident ask` embeds the question in a forked child while the graph loads
(evident/embeddings/prefetch.py). Each case runs in a fresh interpreter: the fork is only taken from a
process with one thread that has not loaded onnxruntime, which a pytest worker is not."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from evident.context import EvidentContext
from evident.graph import build_graph

pytestmark = pytest.mark.embeddings  # the local model on, as for a user

QUESTION = "How many days do I have to submit an expense report after a trip?"


def run(script: str, examples: Path, tmp_path: Path) -> dict[str, object]:
    code = textwrap.dedent(f"""
        import json, os, threading
        from evident.context import EvidentContext
        from evident.embeddings.prefetch import embed_ahead
        ctx = EvidentContext(corpus=[{str(examples)!r}])
        question = {QUESTION!r}
    """) + textwrap.dedent(script)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=120,
                          check=False)
    assert done.returncode == 0, done.stderr
    out: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return out


def test_the_childs_vector_is_the_one_the_run_would_make(examples: Path, tmp_path: Path) -> None:
    out = run("""
        import numpy as np
        ahead = embed_ahead(ctx, "  " + question + " ")
        taken = ahead is not None and ahead.collect()
        parent_loaded_onnxruntime = "onnxruntime" in __import__("sys").modules
        from evident.embeddings.resolve import GraphEmbeddings
        from evident.embeddings.scorer import VECTORS, text_key
        resolved = GraphEmbeddings().resolve(ctx)
        key = (resolved.model_id, "query", text_key(question))
        ahead_vector = VECTORS.get(key)
        hits = VECTORS.hits
        # The run's own embedding of the question, in this process, for comparison.
        own = resolved.embeddings.embed_query(question)
        try:
            os.waitpid(ahead.pid, os.WNOHANG)
            reaped = False
        except ChildProcessError:
            reaped = True
        print(json.dumps({"taken": taken, "onnx": parent_loaded_onnxruntime, "hits": hits, "reaped": reaped,
                          "close": bool(np.allclose(ahead_vector, np.array(own) / np.linalg.norm(own), atol=1e-6))}))
    """, examples, tmp_path)
    assert out == {"taken": True, "onnx": False, "hits": 1, "reaped": True, "close": True}


def test_a_child_that_cannot_embed_leaves_the_question_to_the_run(examples: Path, tmp_path: Path) -> None:
    out = run("""
        ctx = ctx.model_copy(update={"embeddings_model_file": os.path.join(os.getcwd(), "missing.onnx")})
        ahead = embed_ahead(ctx, question)
        print(json.dumps({"started": ahead is not None, "taken": ahead is not None and ahead.collect()}))
    """, examples, tmp_path)
    assert out == {"started": True, "taken": False}


def test_a_child_past_its_time_is_stopped(examples: Path, tmp_path: Path) -> None:
    out = run("""
        import time
        ahead = embed_ahead(ctx, question)
        start = time.monotonic()
        taken = ahead.collect(wait_s=0.0)
        try:
            os.waitpid(ahead.pid, os.WNOHANG)
            reaped = False
        except ChildProcessError:
            reaped = True
        print(json.dumps({"taken": taken, "reaped": reaped, "quick": time.monotonic() - start < 5}))
    """, examples, tmp_path)
    assert out == {"taken": False, "reaped": True, "quick": True}


def test_no_fork_from_a_process_with_threads_or_without_semantic_weight(examples: Path, tmp_path: Path) -> None:
    out = run("""
        words_only = embed_ahead(ctx.model_copy(update={"semantic_weight": 0.0}), question)
        off = embed_ahead(ctx.model_copy(update={"embeddings": "none"}), question)
        stop = threading.Event()
        worker = threading.Thread(target=stop.wait)
        worker.start()
        threaded = embed_ahead(ctx, question)
        stop.set()
        worker.join()
        print(json.dumps({"words_only": words_only is None, "off": off is None, "threaded": threaded is None}))
    """, examples, tmp_path)
    assert out == {"words_only": True, "off": True, "threaded": True}


def test_a_cold_ask_answers_as_the_graph_does_without_it(examples: Path, tmp_path: Path) -> None:
    # `evident ask` takes the vector from its child; this process (threads: no fork) embeds the question itself.
    evident = Path(sys.executable).with_name("evident")
    done = subprocess.run([str(evident), "ask", QUESTION, "--corpus", str(examples), "--json"],
                          capture_output=True, text=True, cwd=tmp_path, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    cold = json.loads(done.stdout)
    here = build_graph().invoke({"query": QUESTION}, context=EvidentContext(corpus=[str(examples)]))
    assert cold["status"] == here["status"] == "answered"
    assert cold["answer"] == here["answer"]
    assert [c["url"] for c in cold["citations"]] == [c["url"] for c in here["citations"]]


def test_a_part_of_a_vector_is_not_taken(examples: Path, tmp_path: Path) -> None:
    # A child stopped mid-write: the header promises more bytes than came.
    out = run("""
        from evident.embeddings.prefetch import Ahead
        from evident.embeddings.scorer import VECTORS, text_key
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.write(write, b'{"model_id": "m", "bytes": 1536}\\n' + bytes(100))
            os._exit(0)
        os.close(write)
        taken = Ahead(pid, read, question).collect()
        print(json.dumps({"taken": taken, "cached": VECTORS.get(("m", "query", text_key(question))) is not None}))
    """, examples, tmp_path)
    assert out == {"taken": False, "cached": False}
