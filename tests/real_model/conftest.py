"""The real model of `make test-real-model`: llama-cpp-python serving Gemma 3 270M on 127.0.0.1.

`scripts/real-model.sh install` has built the cache (the Makefile runs it first); this starts the
server for the session and stops it at the end. Not part of `make test`: pyproject's addopts ignore
this folder unless it is named on the command line.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "real-model.sh"
MODEL = "gemma3-270m"
CONTEXT_WINDOW = 8192
STARTUP_S = 180.0


def _exit_on_sigterm(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)  # unwinds through the fixture's `finally`, which stops the server


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="session")
def real_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    gguf = subprocess.run(["bash", str(SCRIPT), "gguf"], capture_output=True, text=True, check=True).stdout.strip()
    if not Path(gguf).is_file():
        pytest.fail(f"{gguf} is missing: run `bash scripts/real-model.sh install` (make test-real-model does)")
    port = _free_port()
    log = tmp_path_factory.mktemp("real-model") / "server.log"
    env = {**os.environ, "EVIDENT_REAL_MODEL_PORT": str(port), "EVIDENT_REAL_MODEL_CTX": str(CONTEXT_WINDOW)}
    with log.open("w") as out:
        proc = subprocess.Popen(["bash", str(SCRIPT), "serve"], stdout=out, stderr=subprocess.STDOUT, env=env,
                                start_new_session=True)
    base_url = f"http://127.0.0.1:{port}/v1"
    previous = signal.signal(signal.SIGTERM, _exit_on_sigterm)  # `timeout` or a CI stop must not orphan it
    try:
        deadline = time.monotonic() + STARTUP_S
        while True:
            if proc.poll() is not None:
                pytest.fail(f"the model server exited ({proc.returncode}):\n{log.read_text()[-2000:]}")
            try:
                if httpx.get(base_url + "/models", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"the model server did not start within {STARTUP_S:.0f} s:\n{log.read_text()[-2000:]}")
            time.sleep(1)
        yield base_url
    finally:
        signal.signal(signal.SIGTERM, previous)
        proc.terminate()  # uvicorn waits for a running generation: give it a moment, then kill
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
