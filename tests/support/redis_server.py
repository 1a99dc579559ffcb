"""A throwaway Redis on 127.0.0.1, from Debian's `redis-server`: no persistence, no password, stopped
with its test session."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time

from tests.support import processes

START_TIMEOUT_S = 30


def available() -> str | None:
    if shutil.which("redis-server") is None:
        return "redis-server is missing: `bash scripts/test-deps.sh` installs Debian's redis-server"
    return None


class RedisServer:
    def __init__(self, port: int) -> None:
        self.port = port
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> RedisServer:
        self.process = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
             "--protected-mode", "yes", "--loglevel", "warning"],
            stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1) as conn:
                    conn.sendall(b"PING\r\n")
                    if conn.recv(16).startswith(b"+PONG"):
                        return self
            except OSError:
                pass
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"redis-server did not start on port {self.port}")
            time.sleep(0.05)

    def stop(self) -> None:
        processes.stop(self.process)

    def __enter__(self) -> RedisServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
