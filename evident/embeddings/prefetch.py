"""The question's vector, made on another core while the graph loads (a cold `evident ask`).

A cold `evident ask` spends most of its time importing LangGraph and LangChain, on one core. Embedding
the question with the local model (hashing the model file, parsing the tokenizer, setting up an
onnxruntime session, one model call) takes about another 0.15 s after that. Here a forked child does
it meanwhile, on a second core, and sends the vector back through a pipe; the parent puts it into the
process's vector cache (`scorer.VECTORS`, keyed by model, role and text), where the retrieve step finds
it and the parent never loads the model. A thread would not do: the session set-up holds the GIL, so it
would slow the imports by as much as it saves (measured: a cold ask took 0.932 s with a worker thread, 0.937 s
without, over 9 interleaved rounds).

Only the local model is embedded ahead (a remote provider's call belongs to the run, with its retries,
errors and trace), only where `os.fork` exists and there is a second core, and only from a process that
runs one thread and has not loaded onnxruntime yet: a fork copies no other thread, so a lock another
thread held, or onnxruntime's own thread pool, would be stuck in the child. Whatever goes wrong in the
child (a missing file, a crash, a hang past `WAIT_S`) leaves the run to embed the question itself,
which then reports the problem as it always does.
"""

from __future__ import annotations

import json
import os
import select
import sys
import threading
import time
from dataclasses import dataclass

from evident.context import EvidentContext
from evident.embeddings.model_files import installed_models, missing_runtime
from evident.embeddings.resolve import EmbeddingsSettings

__all__ = ["Ahead", "WAIT_S", "embed_ahead"]

# Longer than a cold model load on a busy machine (about 1 s); past it the run embeds the question itself.
WAIT_S = 10.0


@dataclass
class Ahead:
    """A child embedding `text`: `collect()` takes its vector into the vector cache."""

    pid: int
    pipe: int
    text: str

    def collect(self, wait_s: float = WAIT_S) -> bool:
        """Whether the child's vector is now in the cache; the child is reaped either way."""
        chunks: list[bytes] = []
        deadline = time.monotonic() + wait_s
        try:
            while (left := deadline - time.monotonic()) > 0:
                ready, _, _ = select.select([self.pipe], [], [], left)
                if not ready:
                    break
                chunk = os.read(self.pipe, 1 << 16)
                if not chunk:
                    return _cached(b"".join(chunks), self.text)
                chunks.append(chunk)
            return False
        finally:
            os.close(self.pipe)
            _reap(self.pid)


def _reap(pid: int) -> None:
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done == 0:  # still at work past its time: it has nothing the run will wait for
            os.kill(pid, 9)
            os.waitpid(pid, 0)
    except ChildProcessError:
        pass


def _cached(payload: bytes, text: str) -> bool:
    """Put the child's vector into the cache; False for anything but a whole payload (a child stopped
    mid-write leaves a part of one)."""
    head, sep, body = payload.partition(b"\n")
    try:
        header = json.loads(head) if sep else None
    except ValueError:
        return False
    if not isinstance(header, dict) or not body or header.get("bytes") != len(body):
        return False
    # numpy and the cache: the run imports them anyway, for its own vectors.
    import numpy as np

    from evident.embeddings.scorer import VECTORS, text_key

    VECTORS.put((str(header["model_id"]), "query", text_key(text)), np.frombuffer(body, dtype=np.float32).copy())
    return True


def embed_ahead(ctx: EvidentContext, text: str) -> Ahead | None:
    """Fork a child that embeds `text` (stripped, as the retrieve step embeds a question) with the local
    model of `ctx`; None where the run would not embed it locally or cannot fork."""
    settings = EmbeddingsSettings.from_context(ctx)
    if ctx.semantic_weight <= 0 or settings.provider not in (None, "local"):
        return None
    if not hasattr(os, "fork") or (os.cpu_count() or 1) < 2:
        return None
    if threading.active_count() > 1 or "onnxruntime" in sys.modules:
        return None
    if missing_runtime() is not None or not installed_models():
        return None
    text = text.strip()
    read, write = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid:
        os.close(write)
        return Ahead(pid, read, text)
    # The child: never returns into the parent's code, never flushes or runs the parent's exit handlers.
    code = 1
    try:
        os.close(read)
        code = _embed_into(write, settings, text)
    finally:
        os._exit(code)


def _embed_into(pipe: int, settings: EmbeddingsSettings, text: str) -> int:
    # Deferred: imported in the child only, so that the parent never loads onnxruntime for one question.
    from evident.embeddings.resolve import build_embeddings

    try:
        resolved = build_embeddings(settings)
        if resolved.scorer is None:
            return 1
        vector = resolved.scorer.embed_query(text)
        body = vector.astype("float32").tobytes()
        payload = json.dumps({"model_id": resolved.model_id, "bytes": len(body)}).encode() + b"\n" + body
        view = memoryview(payload)
        while view:
            view = view[os.write(pipe, view):]
    except Exception:  # whatever it is, the parent's run meets it again and reports it
        return 1
    return 0
