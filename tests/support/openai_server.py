"""A scripted OpenAI-compatible chat server on 127.0.0.1, for driving the real `ChatOpenAI` client.

It speaks the subset of `/v1/chat/completions` that EvidenT uses: non-streaming JSON and SSE
streaming replies, `response_format` (json_schema / json_object) and `tools` / `tool_calls`, error
statuses with `Retry-After`, stalls, and a simulated model latency (time to first token plus a token
rate). Tests script it per call kind ("extract" or "generate") or with a function. It serves tests of
the wire; a test of the graph's logic injects `tests.support.llm.FakeModel` instead. `GET /_requests`
returns the record of requests (kind and monotonic start/finish times), for a benchmark that runs the
server in another process.

Server behaviours seen in the wild, each opt-in: `reject_json_schema` answers a `json_schema`
response_format with HTTP 500 and a Python traceback naming response_format (llama-cpp-python);
`slots=1` processes one request at a time and reports its slots on `/props` (llama.cpp); `cap_field`
honours only that output-cap field ("max_tokens": llama.cpp-family servers ignore
`max_completion_tokens`); `n_ctx` is reported on `/props` and as `/v1/models` meta.

It answers `POST /v1/embeddings` too, for the real `OpenAIEmbeddings` client: vectors are word-hash
counts (`bag_of_words`, `embedding_dimensions` wide, or the request's `dimensions`), so texts sharing
words point the same way and a test can tell the server's vectors from anything else. Float lists and
the base64 encoding the OpenAI SDK asks for by default are both spoken. `embeddings_status` answers
every embeddings request with that HTTP error; `embeddings_delay_s` stalls before answering (a slow
server). Those requests are recorded in `embedding_requests`, apart from the chat `requests`.

    with OpenAIServer() as server:
        server.script(extract=[Reply(content=...)], generate=[Reply(content=...)])
        ChatOpenAI(base_url=server.base_url, api_key="x", model="m").invoke("hi")
        OpenAIEmbeddings(base_url=server.base_url, api_key="x", model="m").embed_query("hi")

Stdlib only. Every handler thread is joined and every connection closed by `stop()`, so no thread
outlives its test; a stalled reply wakes up as soon as the server stops.
"""

from __future__ import annotations

import base64
import hashlib
import json
import socket
import struct
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

EXTRACT_MARKER = "collected_passages"
EMBEDDING_DIMENSIONS = 16


def bag_of_words(text: str, dimensions: int = EMBEDDING_DIMENSIONS) -> list[float]:
    """Each word adds 1 to the coordinate its hash picks (the server's embedding of `text`)."""
    vector = [0.0] * dimensions
    for word in text.lower().split():
        vector[int.from_bytes(hashlib.sha256(word.encode()).digest()[:4], "big") % dimensions] += 1.0
    return vector


@dataclass
class Reply:
    """One scripted answer to one request."""

    content: str | None = None
    tool_calls: list[dict[str, Any]] | None = None  # [{"name": ..., "arguments": str | dict}]
    refusal: str | None = None
    finish_reason: str = "stop"
    status: int = 200
    error: str = ""  # message of the error body when status != 200
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0  # silence before the reply starts (a stall)
    ttft_s: float = 0.0  # simulated time to first token
    tokens_per_s: float | None = None  # simulated decode rate (None: instant)
    chunk_chars: int = 12  # characters per SSE delta

    def out_tokens(self) -> int:
        text = (self.content or "") + "".join(
            a if isinstance(a, str) else json.dumps(a)
            for a in (tc.get("arguments", "") for tc in self.tool_calls or [])
        )
        return max(1, len(text) // 4)


@dataclass
class ChatRequest:
    """One request as the server received it."""

    path: str
    body: dict[str, Any]
    headers: dict[str, str]
    started: float = 0.0
    finished: float = 0.0

    @property
    def messages(self) -> list[dict[str, Any]]:
        return list(self.body.get("messages") or [])

    @property
    def stream(self) -> bool:
        return bool(self.body.get("stream"))

    @property
    def response_format(self) -> dict[str, Any] | None:
        return self.body.get("response_format")

    @property
    def tools(self) -> list[dict[str, Any]]:
        return list(self.body.get("tools") or [])

    @property
    def text(self) -> str:
        parts: list[str] = []
        for m in self.messages:
            content = m.get("content")
            if isinstance(content, str):
                parts.append(content)
            elif isinstance(content, list):
                parts.extend(str(b.get("text", "")) for b in content if isinstance(b, dict))
        return "\n".join(parts)

    @property
    def kind(self) -> str:
        """ "extract" for a passage-extraction call, else "generate"."""
        if self.response_format or self.tools or EXTRACT_MARKER in self.text:
            return "extract"
        return "generate"

    @property
    def prompt_tokens(self) -> int:
        return max(1, len(self.text) // 4)


@dataclass
class EmbeddingsRequest:
    """One `/embeddings` request as the server received it."""

    path: str
    body: dict[str, Any]
    headers: dict[str, str]

    @property
    def inputs(self) -> list[str]:
        given = self.body.get("input")
        return [given] if isinstance(given, str) else [str(x) for x in given or []]


Responder = Callable[[ChatRequest], Reply]


class _Server(ThreadingHTTPServer):
    daemon_threads = False  # joined by server_close(): nothing outlives the test
    block_on_close = True
    owner: OpenAIServer


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - silence stderr
        return

    def setup(self) -> None:
        super().setup()
        # Headers and body go out in separate writes; without this, Nagle's algorithm holds the body
        # until the client's delayed ACK (about 40 ms), which would look like pipeline overhead.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.server.owner._track(self.connection, add=True)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.server.owner._track(self.connection, add=False)

    def do_GET(self) -> None:  # noqa: N802
        if self.path.rstrip("/") == "/_requests":  # the record, for a client in another process
            with self.server.owner._lock:
                done = [{"kind": r.kind, "stream": r.stream, "started": r.started, "finished": r.finished}
                        for r in self.server.owner.requests]
            self._json(200, {"requests": done})
        elif self.path.rstrip("/").endswith("/models"):
            owner = self.server.owner
            entry: dict[str, Any] = {"id": "test-model", "object": "model"}
            if owner.n_ctx:
                entry["meta"] = {"n_ctx_train": owner.n_ctx}
            self._json(200, {"object": "list", "data": [entry]})
        elif self.path.rstrip("/") == "/props" and self.server.owner.slots:
            owner = self.server.owner
            self._json(200, {"total_slots": owner.slots,
                             "default_generation_settings": {"n_ctx": owner.n_ctx or 4096}})
        else:
            self._json(404, {"error": {"message": "not found", "type": "invalid_request_error"}})

    def do_POST(self) -> None:  # noqa: N802
        arrived = time.monotonic()  # the request line and headers are in; the body may still be coming
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        owner = self.server.owner
        try:
            body = json.loads(raw or b"{}")
        except json.JSONDecodeError:
            self._json(400, {"error": {"message": "invalid JSON body", "type": "invalid_request_error"}})
            return
        if self.path.rstrip("/").endswith("/embeddings"):
            self._embeddings(body)
            return
        if not self.path.rstrip("/").endswith("/chat/completions"):
            self._json(404, {"error": {"message": f"unknown path {self.path}", "type": "invalid_request_error"}})
            return
        request = ChatRequest(self.path, body, {k.lower(): v for k, v in self.headers.items()}, arrived)
        owner._begin(request)
        slot = owner._slot
        try:
            if slot is not None:
                slot.acquire()  # a server with fewer slots than requests: the rest wait here
            owner._wait_barrier(request)
            if owner.reject_json_schema and (request.response_format or {}).get("type") == "json_schema":
                self._json(500, {"error": {"message": _JSON_SCHEMA_TRACEBACK, "type": "internal_server_error"}})
                return
            reply = owner._capped(owner._reply_for(request), body)
            if reply.delay_s and owner._stopping.wait(reply.delay_s):
                self.close_connection = True
                return
            self._send(request, reply, body)
        except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError, OSError):
            self.close_connection = True  # the client gave up (a timeout): nothing to answer
        finally:
            if slot is not None:
                slot.release()
            request.finished = time.monotonic()
            owner._end(request)

    def _embeddings(self, body: dict[str, Any]) -> None:
        owner = self.server.owner
        request = EmbeddingsRequest(self.path, body, {k.lower(): v for k, v in self.headers.items()})
        with owner._lock:
            owner.embedding_requests.append(request)
        try:
            if owner._sleep(owner.embeddings_delay_s):
                self.close_connection = True
                return
            if owner.embeddings_status != 200:
                status = owner.embeddings_status
                self._json(status, {"error": {"message": f"HTTP {status}", "type": "server_error"}})
                return
            dims = int(body.get("dimensions") or owner.embedding_dimensions)
            data = []
            for i, text in enumerate(request.inputs):
                vector = bag_of_words(text, dims)
                encoded: Any = vector
                if body.get("encoding_format") == "base64":  # little-endian float32, as the SDK decodes it
                    encoded = base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode()
                data.append({"object": "embedding", "index": i, "embedding": encoded})
            tokens = sum(len(t.split()) for t in request.inputs)
            self._json(200, {"object": "list", "data": data, "model": body.get("model"),
                             "usage": {"prompt_tokens": tokens, "total_tokens": tokens}})
        except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError, OSError):
            self.close_connection = True  # the client timed out and left

    # -- replies --------------------------------------------------------------------------------

    def _send(self, request: ChatRequest, reply: Reply, body: dict[str, Any]) -> None:
        owner = self.server.owner
        if reply.status != 200:
            self._json(reply.status, {"error": {"message": reply.error or f"HTTP {reply.status}",
                                                "type": "server_error", "code": None}}, reply.headers)
            return
        model = str(body.get("model") or "test-model")
        if request.stream:
            self._stream(request, reply, model, body)
            return
        if owner._sleep(reply.ttft_s + self._decode_time(reply)):
            return
        message: dict[str, Any] = {"role": "assistant", "content": reply.content, "refusal": reply.refusal}
        if reply.tool_calls:
            message["tool_calls"] = [
                {"id": f"call_{i}", "type": "function",
                 "function": {"name": tc["name"], "arguments": _args(tc.get("arguments", ""))}}
                for i, tc in enumerate(reply.tool_calls)
            ]
        self._json(200, {
            "id": f"chatcmpl-{uuid.uuid4().hex[:12]}", "object": "chat.completion", "created": int(time.time()),
            "model": model,
            "choices": [{"index": 0, "message": message, "finish_reason": reply.finish_reason, "logprobs": None}],
            "usage": _usage(request, reply),
        }, reply.headers)

    def _stream(self, request: ChatRequest, reply: Reply, model: str, body: dict[str, Any]) -> None:
        owner = self.server.owner
        ident = f"chatcmpl-{uuid.uuid4().hex[:12]}"
        created = int(time.time())

        def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
            return _sse({"id": ident, "object": "chat.completion.chunk", "created": created, "model": model,
                         "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}]})

        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        for k, v in reply.headers.items():
            self.send_header(k, v)
        self.end_headers()
        if owner._sleep(reply.ttft_s):
            return
        self._chunk(chunk({"role": "assistant", "content": ""}))
        pieces = list(_pieces(reply.content or "", reply.chunk_chars))
        per_piece = self._decode_time(reply) / max(1, len(pieces) + len(reply.tool_calls or []))
        for piece in pieces:
            if per_piece and owner._sleep(per_piece):
                return
            self._chunk(chunk({"content": piece}))
        for i, tc in enumerate(reply.tool_calls or []):
            self._chunk(chunk({"tool_calls": [{"index": i, "id": f"call_{i}", "type": "function",
                                               "function": {"name": tc["name"], "arguments": ""}}]}))
            for piece in _pieces(_args(tc.get("arguments", "")), reply.chunk_chars):
                self._chunk(chunk({"tool_calls": [{"index": i, "function": {"arguments": piece}}]}))
        if reply.refusal:
            self._chunk(chunk({"refusal": reply.refusal}))
        self._chunk(chunk({}, reply.finish_reason))
        if (body.get("stream_options") or {}).get("include_usage"):
            self._chunk(_sse({"id": ident, "object": "chat.completion.chunk", "created": created, "model": model,
                              "choices": [], "usage": _usage(request, reply)}))
        self._chunk(b"data: [DONE]\n\n")
        self._chunk(b"")  # end of the chunked body

    def _decode_time(self, reply: Reply) -> float:
        return reply.out_tokens() / reply.tokens_per_s if reply.tokens_per_s else 0.0

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _json(self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None) -> None:
        self._raw(status, json.dumps(payload).encode(), "application/json", headers or {})

    def _raw(self, status: int, data: bytes, ctype: str, headers: dict[str, str]) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        for k, v in headers.items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()


# What llama-cpp-python 0.3.36 answers (HTTP 500), its stack frame included.
_JSON_SCHEMA_TRACEBACK = """1 validation error:
  {'type': 'literal_error', 'loc': ('body', 'response_format', 'type'), 'msg': "Input should be 'text' or \
'json_object'", 'input': 'json_schema', 'ctx': {'expected': "'text' or 'json_object'"}}

  File "/srv/venv/lib/python3.11/site-packages/llama_cpp/server/app.py", line 376, in create_chat_completion
    POST /v1/chat/completions"""


def _args(arguments: str | dict[str, Any]) -> str:
    return arguments if isinstance(arguments, str) else json.dumps(arguments)


def _pieces(text: str, size: int) -> Iterator[str]:
    for i in range(0, len(text), max(1, size)):
        yield text[i : i + size]


def _sse(payload: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(payload).encode() + b"\n\n"


def _usage(request: ChatRequest, reply: Reply) -> dict[str, int]:
    out = reply.out_tokens()
    return {"prompt_tokens": request.prompt_tokens, "completion_tokens": out,
            "total_tokens": request.prompt_tokens + out}


class OpenAIServer:
    """The server, its script and its record of requests. Use as a context manager."""

    def __init__(self, responder: Responder | None = None, *, reject_json_schema: bool = False,
                 slots: int | None = None, cap_field: str | None = None, n_ctx: int | None = None,
                 embedding_dimensions: int = EMBEDDING_DIMENSIONS, embeddings_status: int = 200,
                 embeddings_delay_s: float = 0.0) -> None:
        self._responder = responder
        self.embedding_dimensions = embedding_dimensions
        self.embeddings_status = embeddings_status
        self.embeddings_delay_s = embeddings_delay_s
        self.embedding_requests: list[EmbeddingsRequest] = []
        self.reject_json_schema = reject_json_schema
        self.slots = slots
        self._slot = threading.Semaphore(slots) if slots else None
        self.cap_field = cap_field
        self.n_ctx = n_ctx
        self._queues: dict[str, deque[Reply]] = {}
        self._last: dict[str, Reply] = {}
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._connections: set[socket.socket] = set()
        self._barrier: threading.Barrier | None = None
        self._barrier_kind = "extract"
        self._barrier_left = 0
        self.barrier_broken = False
        self.requests: list[ChatRequest] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self._httpd: _Server | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle ------------------------------------------------------------------------------

    def start(self) -> OpenAIServer:
        httpd = _Server(("127.0.0.1", 0), _Handler)
        httpd.owner = self
        self._httpd = httpd
        self._thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="openai-test-server", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        if self._barrier is not None:
            self._barrier.abort()
        httpd, self._httpd = self._httpd, None
        if httpd is None:
            return
        httpd.shutdown()
        with self._lock:
            conns = list(self._connections)
        for conn in conns:  # wake handler threads blocked on idle keep-alive connections
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        httpd.server_close()  # joins every handler thread
        if self._thread is not None:
            self._thread.join()

    def __enter__(self) -> OpenAIServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def base_url(self) -> str:
        assert self._httpd is not None, "server not started"
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    # -- scripting ------------------------------------------------------------------------------

    def script(self, *, extract: list[Reply] | None = None, generate: list[Reply] | None = None) -> None:
        """Queue replies per call kind; the last reply of a kind repeats once its queue is empty."""
        with self._lock:
            for kind, replies in (("extract", extract), ("generate", generate)):
                if replies:
                    self._queues.setdefault(kind, deque()).extend(replies)

    def respond_with(self, responder: Responder) -> None:
        self._responder = responder

    def require_parallel(self, parties: int, kind: str = "extract", timeout_s: float = 10.0) -> None:
        """Hold the first `parties` requests of `kind` until all of them are in flight at once (proof
        of a parallel fan-out); later requests pass freely.

        If they never are all in flight, the barrier breaks after `timeout_s`, the requests are
        answered anyway and `barrier_broken` is set; a test asserts on that flag, never on time.
        """
        self._barrier = threading.Barrier(parties, timeout=timeout_s)
        self._barrier_kind = kind
        self._barrier_left = parties

    def of_kind(self, kind: str) -> list[ChatRequest]:
        return [r for r in self.requests if r.kind == kind]

    # -- handler callbacks ------------------------------------------------------------------------

    def _reply_for(self, request: ChatRequest) -> Reply:
        if self._responder is not None:
            return self._responder(request)
        with self._lock:
            queue = self._queues.get(request.kind)
            if queue:
                reply = queue.popleft()
                self._last[request.kind] = reply
                return reply
            last = self._last.get(request.kind)
        if last is not None:
            return last
        return Reply(status=500, error=f"no scripted reply for a {request.kind} call")

    def _wait_barrier(self, request: ChatRequest) -> None:
        with self._lock:
            barrier = self._barrier
            if barrier is None or request.kind != self._barrier_kind or self._barrier_left <= 0:
                return
            self._barrier_left -= 1
        try:
            barrier.wait()
        except threading.BrokenBarrierError:
            self.barrier_broken = True

    def _capped(self, reply: Reply, body: dict[str, Any]) -> Reply:
        """The reply cut at the output cap, if this server honours the field the request used."""
        cap = body.get(self.cap_field) if self.cap_field else None
        if not isinstance(cap, int) or reply.content is None or len(reply.content) <= cap * 4:
            return reply
        return Reply(**{**reply.__dict__, "content": reply.content[: cap * 4], "finish_reason": "length"})

    def _sleep(self, seconds: float) -> bool:
        """Sleep unless the server stops first; True when it stopped (the reply is abandoned)."""
        return bool(seconds > 0 and self._stopping.wait(seconds))

    def _begin(self, request: ChatRequest) -> None:
        with self._lock:
            self.requests.append(request)
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)

    def _end(self, request: ChatRequest) -> None:
        with self._lock:
            self.in_flight -= 1

    def _track(self, conn: socket.socket, *, add: bool) -> None:
        with self._lock:
            (self._connections.add if add else self._connections.discard)(conn)
