"""503 for a lost database (evident/web/unavailable.py), on a small FastAPI app: a route that raises a
driver's connection error, and a wait route that loses it while it sends keep-alive newlines. The real
PostgreSQL restart is replayed in tests/e2e/test_replicas.py."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from types import SimpleNamespace

from fastapi import FastAPI
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, StreamingResponse
from starlette.routing import Route
from starlette.testclient import TestClient

from evident.web.unavailable import DETAIL, HeldWhileWaiting, loaded_connection_errors, unavailable_handlers


class DriverConnectionError(Exception):
    """Stands for a driver's own class, e.g. asyncpg's PostgresConnectionError."""


class DriverStateError(Exception):
    """Stands for asyncpg's InternalClientError: a pooled connection the shutdown caught mid-statement."""


class WrappedError(Exception):
    """Stands for SQLAlchemy's generic `DBAPIError`, which wraps what its driver raised."""

    def __init__(self, message: str, connection_invalidated: bool = False) -> None:
        super().__init__(message)
        self.connection_invalidated = connection_invalidated


def _wrapped(cause: Exception) -> WrappedError:
    try:
        raise WrappedError("(sqlalchemy.dialects.postgresql.asyncpg.Error) …") from cause
    except WrappedError as exc:
        return exc


async def shutting_down(request: Request) -> JSONResponse:
    raise _wrapped(DriverConnectionError("the database system is shutting down"))


async def broken_state(request: Request) -> JSONResponse:
    raise _wrapped(DriverStateError("cannot switch to state 11; another operation (2) is in progress"))


async def invalidated(request: Request) -> JSONResponse:
    raise WrappedError("connection is closed", connection_invalidated=True)


async def query_error(request: Request) -> JSONResponse:
    raise _wrapped(ValueError("duplicate key value violates unique constraint"))


def _waiting(outcome: Exception | bytes) -> StreamingResponse:
    async def body() -> AsyncIterator[bytes]:
        for _ in range(3):
            yield b"\n"
            await asyncio.sleep(0)
        if isinstance(outcome, Exception):
            raise outcome
        yield outcome

    return StreamingResponse(body(), media_type="application/json")


async def lost(request: Request) -> JSONResponse:
    raise DriverConnectionError("connection to server at 127.0.0.1 failed")


async def wait_lost(request: Request) -> StreamingResponse:
    return _waiting(ConnectionRefusedError(111, "Connect call failed"))


async def wait_done(request: Request) -> StreamingResponse:
    return _waiting(b'{"status": "answered"}')


async def wait_bug(request: Request) -> StreamingResponse:
    return _waiting(KeyError("a bug, not an outage"))


def _client() -> TestClient:
    modules = {"asyncpg.exceptions": SimpleNamespace(PostgresConnectionError=DriverConnectionError,
                                                     InternalClientError=DriverStateError)}
    app = FastAPI(exception_handlers=unavailable_handlers(modules),
                  middleware=[Middleware(HeldWhileWaiting, modules=modules)],
                  routes=[Route("/threads", lost, methods=["POST"]), Route("/runs/wait", wait_lost, methods=["POST"]),
                          Route("/threads/t1/runs/wait", wait_done, methods=["POST"]),
                          Route("/threads/t1/runs/r1/join", wait_bug, methods=["GET"]),
                          Route("/threads/t2", shutting_down, methods=["GET"]),
                          Route("/threads/t3/runs/wait", broken_state, methods=["POST"]),
                          Route("/threads/t4", invalidated, methods=["PATCH"]),
                          Route("/threads/t5", query_error, methods=["GET"])])
    return TestClient(app, raise_server_exceptions=False)


def test_only_loaded_drivers_classes_are_handled() -> None:
    assert loaded_connection_errors({}) == [ConnectionError]
    fake = {"psycopg": SimpleNamespace(OperationalError=DriverConnectionError), "redis.exceptions": object()}
    assert loaded_connection_errors(fake) == [ConnectionError, DriverConnectionError]


def test_a_lost_database_is_a_503_with_retry_after() -> None:
    response = _client().post("/threads", json={})
    assert response.status_code == 503 and response.json() == {"detail": DETAIL}
    assert response.headers["retry-after"] == "5" and "127.0.0.1" not in response.text


def test_a_wait_that_loses_its_database_is_a_503_not_a_cut_off_body() -> None:
    response = _client().post("/runs/wait", json={})
    assert response.status_code == 503 and response.json() == {"detail": DETAIL}


def test_a_wait_that_ends_is_its_whole_answer_and_a_bug_stays_a_500() -> None:
    client = _client()
    done = client.post("/threads/t1/runs/wait", json={})
    assert done.status_code == 200 and done.json() == {"status": "answered"}  # the newlines lead the JSON
    assert client.get("/threads/t1/runs/r1/join").status_code == 500


def test_a_lost_database_behind_a_wrapper_of_another_class_is_a_503() -> None:
    # What a PostgreSQL shutting down under load raised in Aegra (tests/e2e/test_replicas.py): SQLAlchemy's
    # generic error from the driver's refusal, the next statement's broken connection state, and an error
    # SQLAlchemy itself judged a disconnect.
    client = _client()
    for response in (client.get("/threads/t2"), client.post("/threads/t3/runs/wait", json={}),
                     client.patch("/threads/t4", json={})):
        assert response.status_code == 503 and response.json() == {"detail": DETAIL}, response.text
        assert response.headers["retry-after"] == "5"


def test_an_error_of_the_query_itself_stays_a_500() -> None:
    assert _client().get("/threads/t5").status_code == 500
