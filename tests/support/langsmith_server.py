"""A stand-in LangSmith API on 127.0.0.1 that records every run a tracer sends it.

Point `LANGSMITH_ENDPOINT` at `server.url` (with `LANGSMITH_TRACING=true` and any API key) and the
LangSmith client of that process (the test's own, or a `langgraph dev` server's) posts its runs here:
`GET /info`, then `POST /runs/multipart` (or `/runs/batch`, `POST /runs`, `PATCH /runs/{id}`).
`runs` merges the create and update parts of each run by id; `bodies` keeps every request body as
received, for checks that some text was never sent at all. Stdlib only.
"""

from __future__ import annotations

import json
import threading
from email.parser import BytesParser
from email.policy import HTTP
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

INFO = {
    "version": "0.0.0-test",
    "batch_ingest_config": {"use_multipart_endpoint": True, "scale_up_qsize_trigger": 1000,
                            "scale_up_nthreads_limit": 16, "scale_down_nempty_trigger": 4,
                            "size_limit": 100, "size_limit_bytes": 20_971_520},
    "instance_flags": {},  # no zstd compression: bodies stay readable for the tests
}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        return

    def _body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _reply(self, status: int, payload: Any) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        self.server.owner._record("GET", self.path, b"", "")
        self._reply(200, INFO if self.path.rstrip("/").endswith("/info") else {})

    def do_POST(self) -> None:
        body = self._body()
        self.server.owner._record("POST", self.path, body, self.headers.get("Content-Type", ""))
        self._reply(200, {})

    def do_PATCH(self) -> None:
        body = self._body()
        self.server.owner._record("PATCH", self.path, body, self.headers.get("Content-Type", ""))
        self._reply(200, {})


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    owner: LangSmithServer


class LangSmithServer:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.requests: list[tuple[str, str]] = []
        self.bodies: list[bytes] = []
        self.runs: dict[str, dict[str, Any]] = {}
        self._httpd: _Server | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> LangSmithServer:
        httpd = _Server(("127.0.0.1", 0), _Handler)
        httpd.owner = self
        self._httpd = httpd
        self._thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        httpd, self._httpd = self._httpd, None
        if httpd is not None:
            httpd.shutdown()
            httpd.server_close()
        if self._thread is not None:
            self._thread.join()

    def __enter__(self) -> LangSmithServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        assert self._httpd is not None
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    # -- what was sent ------------------------------------------------------------------------

    def sent_text(self) -> str:
        with self._lock:
            return "\n".join(b.decode("utf-8", "replace") for b in self.bodies)

    def runs_named(self, name: str) -> list[dict[str, Any]]:
        with self._lock:
            return [dict(r) for r in self.runs.values() if r.get("name") == name]

    def finished(self, name: str) -> list[dict[str, Any]]:
        return [r for r in self.runs_named(name) if r.get("end_time")]

    # -- recording ----------------------------------------------------------------------------

    def _record(self, method: str, path: str, body: bytes, ctype: str) -> None:
        with self._lock:
            self.requests.append((method, path))
            if body:
                self.bodies.append(body)
            route = path.split("?")[0].rstrip("/")
            if method == "POST" and route.endswith("/runs/multipart"):
                self._multipart(body, ctype)
            elif method == "POST" and route.endswith("/runs/batch"):
                batch = json.loads(body or b"{}")
                for run in batch.get("post") or []:
                    self._merge(str(run.get("id")), run)
                for run in batch.get("patch") or []:
                    self._merge(str(run.get("id")), run)
            elif method == "POST" and route.endswith("/runs"):
                run = json.loads(body or b"{}")
                self._merge(str(run.get("id")), run)
            elif method == "PATCH" and "/runs/" in route:
                self._merge(route.rsplit("/", 1)[-1], json.loads(body or b"{}"))

    def _multipart(self, body: bytes, ctype: str) -> None:
        message = BytesParser(policy=HTTP).parsebytes(f"Content-Type: {ctype}\r\n\r\n".encode() + body)
        for part in message.iter_parts():
            name = part.get_param("name", header="content-disposition") or ""
            op, _, rest = str(name).partition(".")
            run_id, _, field = rest.partition(".")
            payload = part.get_payload(decode=True) or b""
            try:
                value = json.loads(payload)
            except ValueError:
                continue
            if op in {"post", "patch"}:
                self._merge(run_id, {field: value} if field else value)

    def _merge(self, run_id: str, fields: dict[str, Any]) -> None:
        run = self.runs.setdefault(run_id, {"id": run_id})
        for key, value in fields.items():
            if key == "extra" and isinstance(value, dict):
                extra = run.setdefault("extra", {})
                for k, v in value.items():
                    if k == "metadata" and isinstance(v, dict):
                        extra.setdefault("metadata", {}).update(v)
                    else:
                        extra[k] = v
            elif value is not None:
                run[key] = value


def metadata(run: dict[str, Any]) -> dict[str, Any]:
    return dict((run.get("extra") or {}).get("metadata") or {})
