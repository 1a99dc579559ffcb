"""A stand-in LangSmith API on 127.0.0.1 that records every run a tracer sends it.

Point `LANGSMITH_ENDPOINT` at `server.url` (with `LANGSMITH_TRACING=true` and any API key) and the
LangSmith client of that process (the test's own, or a `langgraph dev` server's) posts its runs here:
`GET /info`, then `POST /runs/multipart` (or `/runs/batch`, `POST /runs`, `PATCH /runs/{id}`).
`runs` merges the create and update parts of each run by id; `bodies` keeps every request body as
received, for checks that some text was never sent at all.

It also keeps, in memory, what `langsmith.evaluate` needs to run an experiment: datasets
(`/datasets`), their examples (`/examples/bulk`, `GET /examples`), experiments (`/sessions`) and
feedback (`POST /feedback`, or `feedback.*` parts of a multipart upload): `datasets`, `examples`,
`sessions` and `feedback`. Stdlib only.
"""

from __future__ import annotations

import json
import threading
import uuid
from datetime import UTC, datetime
from email.parser import BytesParser
from email.policy import HTTP
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

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
        owner = self.server.owner
        owner._record("GET", self.path, b"", "")
        if self.path.split("?")[0].rstrip("/").endswith("/info"):
            self._reply(200, INFO)
            return
        status, payload = owner._api("GET", self.path, b"")
        self._reply(status, payload)

    def do_POST(self) -> None:
        body = self._body()
        owner = self.server.owner
        owner._record("POST", self.path, body, self.headers.get("Content-Type", ""))
        self._reply(*owner._api("POST", self.path, body))

    def do_PATCH(self) -> None:
        body = self._body()
        owner = self.server.owner
        owner._record("PATCH", self.path, body, self.headers.get("Content-Type", ""))
        self._reply(*owner._api("PATCH", self.path, body))


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    owner: LangSmithServer


class LangSmithServer:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.requests: list[tuple[str, str]] = []
        self.bodies: list[bytes] = []
        self.runs: dict[str, dict[str, Any]] = {}
        self.datasets: dict[str, dict[str, Any]] = {}
        self.examples: dict[str, dict[str, Any]] = {}
        self.sessions: dict[str, dict[str, Any]] = {}
        self.feedback: list[dict[str, Any]] = []
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

    def experiment_feedback(self, session_name: str) -> list[dict[str, Any]]:
        """Feedback on the runs of the experiment (session) of that name."""
        with self._lock:
            ids = {sid for sid, sess in self.sessions.items() if sess["name"] == session_name}
            runs = {rid for rid, run in self.runs.items() if str(run.get("session_id")) in ids}
            return [dict(f) for f in self.feedback
                    if str(f.get("session_id")) in ids or str(f.get("run_id")) in runs]

    # -- the dataset / experiment API -----------------------------------------------------------

    def _api(self, method: str, path: str, body: bytes) -> tuple[int, Any]:
        """In-memory datasets, examples, sessions and feedback; anything else answers {} as before."""
        parts = urlsplit(path)
        route = [p for p in parts.path.split("/") if p and p not in ("api", "v1")]
        query = {k: v for k, v in parse_qs(parts.query).items()}
        data = json.loads(body) if body and method != "GET" and body[:1] in (b"{", b"[") else {}
        with self._lock:
            if route[:1] == ["datasets"]:
                return self._datasets(method, route[1:], query, data)
            if route[:1] == ["examples"]:
                return self._examples(method, route[1:], query, data)
            if route[:1] == ["sessions"]:
                return self._sessions(method, route[1:], query, data)
            if route == ["feedback"] and method == "POST" and isinstance(data, dict):
                self.feedback.append(data)
                return 200, {**data, "created_at": _now(), "modified_at": _now()}
        return 200, {}

    def _datasets(self, method: str, rest: list[str], query: dict[str, list[str]], data: Any) -> tuple[int, Any]:
        if method == "POST" and not rest:
            if any(d["name"] == data.get("name") for d in self.datasets.values()):
                return 409, {"detail": "dataset already exists"}
            ds = {"id": str(data.get("id") or uuid.uuid4()), "name": data.get("name"), "created_at": _now(),
                  "modified_at": _now(), "data_type": data.get("data_type") or "kv", "tenant_id": TENANT,
                  "description": data.get("description"), "example_count": 0, "session_count": 0}
            self.datasets[ds["id"]] = ds
            return 200, ds
        if method == "GET" and not rest:
            return 200, _select(self.datasets, query, {"name": "name", "id": "id"})
        if method == "GET" and len(rest) == 1:
            ds = self.datasets.get(rest[0])
            return (200, ds) if ds else (404, {"detail": "dataset not found"})
        if method == "GET" and rest[1:] == ["version"]:
            return 200, {"as_of": _now(), "tags": []}
        return 200, {}

    def _examples(self, method: str, rest: list[str], query: dict[str, list[str]], data: Any) -> tuple[int, Any]:
        if method == "POST" and rest == ["bulk"] and isinstance(data, list):
            made = []
            for item in data:
                ex = {"id": str(item.get("id") or uuid.uuid4()), "dataset_id": str(item.get("dataset_id")),
                      "inputs": item.get("inputs") or {}, "outputs": item.get("outputs"),
                      "metadata": item.get("metadata"), "created_at": _now(), "modified_at": _now()}
                self.examples[ex["id"]] = ex
                made.append(ex)
            return 200, made
        if method == "GET" and not rest:
            return 200, _select(self.examples, query, {"dataset": "dataset_id", "id": "id"})
        if method == "GET" and len(rest) == 1:
            ex = self.examples.get(rest[0])
            return (200, ex) if ex else (404, {"detail": "example not found"})
        return 200, {}

    def _sessions(self, method: str, rest: list[str], query: dict[str, list[str]], data: Any) -> tuple[int, Any]:
        if method == "POST" and not rest:
            if any(x["name"] == data.get("name") for x in self.sessions.values()):
                return 409, {"detail": "session already exists"}
            sess = {"id": str(data.get("id") or uuid.uuid4()), "name": data.get("name"),
                    "start_time": data.get("start_time") or _now(), "tenant_id": TENANT,
                    "reference_dataset_id": data.get("reference_dataset_id"), "extra": data.get("extra"),
                    "description": data.get("description")}
            self.sessions[sess["id"]] = sess
            return 200, sess
        if method == "GET" and not rest:
            return 200, _select(self.sessions, query, {"name": "name", "id": "id"})
        if len(rest) == 1 and rest[0] in self.sessions:
            sess = self.sessions[rest[0]]
            if method == "PATCH" and isinstance(data, dict):
                sess.update({k: v for k, v in data.items() if v is not None})
            return 200, sess
        return 404 if len(rest) == 1 else 200, {"detail": "session not found"} if len(rest) == 1 else {}

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
            elif op == "feedback" and isinstance(value, dict):
                self.feedback.append(value)

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


TENANT = "00000000-0000-0000-0000-000000000001"


def _now() -> str:
    return datetime.now(UTC).isoformat()


def _select(
    store: dict[str, dict[str, Any]], query: dict[str, list[str]], filters: dict[str, str]
) -> list[dict[str, Any]]:
    """A list endpoint: the items whose `field` is among the query's values for each `param`, one page."""
    found = [item for item in store.values()
             if all(item.get(field) in query[param] for param, field in filters.items() if param in query)]
    offset = int((query.get("offset") or ["0"])[0])
    limit = int((query.get("limit") or ["100"])[0])
    return found[offset : offset + limit]


def metadata(run: dict[str, Any]) -> dict[str, Any]:
    return dict((run.get("extra") or {}).get("metadata") or {})
