"""Stopping a server process the tests started: politely, then for sure."""

from __future__ import annotations

import subprocess

STOP_TIMEOUT_S = 10


def stop(process: subprocess.Popen[bytes] | None) -> None:
    if process is None or process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout=STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=STOP_TIMEOUT_S)
