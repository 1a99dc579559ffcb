"""HTTP plumbing shared by the live connectors (MediaWiki, Confluence, the docs crawler).

Each connector writes its protocol once, as a generator that yields `httpx.Request`s and receives
`httpx.Response`s (a "flow"); `run_flow` drives it with a blocking client under `invoke`, and
`arun_flow` with an asyncio client under `ainvoke`. Transport problems become `SourceFailure`s
whose messages name the host and the problem, never a credential or a query string.
"""

from __future__ import annotations

import json
from collections.abc import Generator, Iterator
from contextlib import contextmanager
from typing import Any, Generic, TypeVar
from urllib.parse import urlsplit

import httpx
from pydantic import SecretStr

from evident.connectors.source import SourceConfigError, SourceFailure
from evident.settings import environment_value

T = TypeVar("T")
Flow = Generator[httpx.Request, httpx.Response, T]

USER_AGENT = "EvidenT/0.1 (federated retrieval; +https://github.com/evident-rag/evident)"
MAX_RESPONSE_BYTES = 20_000_000  # an API page of search hits is far below this; more is an error


def host(url: str | httpx.URL) -> str:
    parts = urlsplit(str(url))
    return parts.netloc or str(url)


def check_base_url(source: str, url: str, what: str = "url") -> str:
    """An absolute http(s) URL, without trailing slash; a configuration error otherwise."""
    if not isinstance(url, str) or not url.strip():
        raise SourceConfigError(source, f"missing {what}")
    url = url.strip()
    parts = urlsplit(url)
    if parts.scheme not in {"http", "https"} or not parts.netloc:
        raise SourceConfigError(source, f"{what} must be an absolute http(s) URL, got {url!r}")
    if parts.username or parts.password:
        raise SourceConfigError(source, f"{what} must not contain credentials; use the *_env settings")
    return url.rstrip("/")


def read_secret(source: str, env_var: str | None, what: str) -> SecretStr | None:
    """The credential in environment variable `env_var`; a configuration error when it is unset."""
    if not env_var:
        return None
    value = environment_value(env_var)
    if not value:
        raise SourceConfigError(source, f"missing credential: environment variable {env_var} ({what}) is not set")
    return SecretStr(value)


def transport_failure(exc: httpx.HTTPError, request: httpx.Request, timeout_s: float | None) -> SourceFailure:
    where = host(request.url)
    if isinstance(exc, httpx.TimeoutException):
        limit = f" within {timeout_s:g} s" if timeout_s else ""
        return SourceFailure(f"{where} did not answer{limit}", kind="timeout")
    if isinstance(exc, httpx.ConnectError):
        return SourceFailure(f"cannot connect to {where} (host unreachable or connection refused)")
    if isinstance(exc, httpx.RemoteProtocolError):
        return SourceFailure(f"{where} closed the connection or sent an invalid HTTP response")
    return SourceFailure(f"request to {where} failed ({type(exc).__name__})")


class _FlowDriver(Generic[T]):
    """The sans-IO half of running a flow: the next request to send, and the flow's result once it returns.

    `run_flow` and `arun_flow` only send the requests; everything else about driving a flow is here.
    """

    result: T  # set when the flow returns, i.e. once `request` is None

    def __init__(self, flow: Flow[T], client: httpx.Client | httpx.AsyncClient) -> None:
        self._flow = flow
        self._client = client
        self.request: httpx.Request | None = None

    def __enter__(self) -> _FlowDriver[T]:
        self._step(None)
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._flow.close()

    def _step(self, response: httpx.Response | None) -> None:
        try:
            request = next(self._flow) if response is None else self._flow.send(response)
        except StopIteration as stop:
            self.request, self.result = None, stop.value
            return
        # `send` does not apply the client's default headers (only `build_request` does); flows build
        # their requests themselves, so the defaults (User-Agent, Accept) are added here.
        for name, value in self._client.headers.items():
            if name not in request.headers:
                request.headers[name] = value
        self.request = request

    def advance(self, response: httpx.Response) -> None:
        """Give the flow the answer to its request; its next request (or its result) follows."""
        self._step(response)

    @contextmanager
    def sending(self, request: httpx.Request) -> Iterator[None]:
        """Around sending `request`: a transport problem becomes a `SourceFailure` naming the host."""
        try:
            yield
        except httpx.HTTPError as exc:
            raise transport_failure(exc, request, self._client.timeout.read) from None


def run_flow(flow: Flow[T], client: httpx.Client) -> T:
    """Drive `flow` with a blocking client; returns the flow's result."""
    with _FlowDriver(flow, client) as driver:
        while (request := driver.request) is not None:
            with driver.sending(request):
                response = client.send(request)
            driver.advance(response)
    return driver.result


async def arun_flow(flow: Flow[T], client: httpx.AsyncClient) -> T:
    """Drive `flow` with an asyncio client; returns the flow's result."""
    with _FlowDriver(flow, client) as driver:
        while (request := driver.request) is not None:
            with driver.sending(request):
                response = await client.send(request)
            driver.advance(response)
    return driver.result


def http_error(response: httpx.Response, *, credential_hint: str = "") -> SourceFailure:
    """A failure for an HTTP error status: the status and, for auth errors, which setting to check."""
    where = host(response.request.url)
    status = response.status_code
    if status in {401, 403}:
        hint = f"; check {credential_hint}" if credential_hint else ""
        word = "authentication failed" if status == 401 else "access denied"
        return SourceFailure(f"{where}: {word} (HTTP {status}){hint}")
    if status == 429:
        after = response.headers.get("retry-after", "")
        return SourceFailure(f"{where}: rate limited (HTTP 429)" + (f", retry after {after} s" if after else ""))
    if 300 <= status < 400:
        return SourceFailure(f"{where}: unexpected redirect (HTTP {status}); is the URL the API endpoint?")
    return SourceFailure(f"{where}: HTTP {status} {response.reason_phrase}".rstrip())


def json_body(response: httpx.Response, *, what: str, credential_hint: str = "") -> Any:
    """The decoded JSON of a successful API response, or a `SourceFailure` saying what was wrong."""
    if response.status_code >= 300:
        raise http_error(response, credential_hint=credential_hint)
    if len(response.content) > MAX_RESPONSE_BYTES:
        raise SourceFailure(f"{host(response.request.url)}: {what} response too large ({len(response.content)} bytes)")
    ctype = response.headers.get("content-type", "").split(";")[0].strip().lower()
    try:
        return json.loads(response.content)
    except (json.JSONDecodeError, UnicodeDecodeError):
        got = f"got {ctype}" if ctype else "got no content type"
        raise SourceFailure(
            f"{host(response.request.url)}: malformed {what} response (expected JSON, {got})"
        ) from None


def one_line(text: str, limit: int = 300) -> str:
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"
