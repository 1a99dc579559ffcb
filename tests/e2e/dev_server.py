"""`evident serve` as a test or benchmark starts it: on 127.0.0.1, on a free port, with a hermetic copy
of the project's langgraph.json, and always stopped. That is `langgraph dev`, or with a database
(`start_aegra`) one Aegra replica, run by the Python 3.12 environment that `make install-server` makes
(`.venv-server`, or `EVIDENT_TEST_SERVER_PYTHON`).

The copy differs from langgraph.json only where the test needs it to: paths are absolute (the server
runs in a temporary directory, so its `.langgraph_api/` state lands there) and `env` names an empty
file of the test's own, so that a developer's `.env` (a real API key, tracing) never reaches a test.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

from tests.support import ports

ROOT = Path(__file__).resolve().parents[2]
PROJECT_CONFIG = ROOT / "langgraph.json"
SERVER_PYTHON = Path(os.environ.get("EVIDENT_TEST_SERVER_PYTHON") or ROOT / ".venv-server" / "bin" / "python")
# Variables of the developer's machine that would change what the server does or whom it calls
# (Aegra's own among them: where its database and Redis are, how it runs its workers).
SCRUBBED_PREFIXES = ("EVIDENT_", "OPENAI_", "LANGSMITH_", "LANGCHAIN_", "LANGGRAPH_", "AEGRA_", "DATABASE_URL",
                     "POSTGRES_", "REDIS_", "RUN_MIGRATIONS", "WORKER_", "N_JOBS", "LEASE_", "HEARTBEAT_", "REAPER_")
START_TIMEOUT_S = 90.0  # a generous ceiling for a slow CI machine: a deadline, not a timing claim
# Aegra's crash recovery, shortened so that a test can wait for it: a replica's lease on a run lapses after
# 5 s without a heartbeat (every 2 s), and the survivors look for lapsed leases every second. Its defaults
# (30 s, 10 s, 15 s) are the production ones.
AEGRA_RECOVERY = {"LEASE_DURATION_SECONDS": "5", "HEARTBEAT_INTERVAL_SECONDS": "2", "REAPER_INTERVAL_SECONDS": "1"}


def free_port() -> int:
    """A port for a server to bind (tests/support/ports.py: safe when xdist's workers start servers at once)."""
    return ports.free_port()


def _absolute(spec: str) -> str:
    path, _, attr = spec.rpartition(":")
    return f"{(ROOT / path).resolve()}:{attr}" if path.endswith(".py") else spec


def hermetic_config(folder: Path) -> Path:
    """A copy of langgraph.json in `folder`, with absolute paths and an empty env file."""
    config = json.loads(PROJECT_CONFIG.read_text(encoding="utf-8"))
    for graph in config["graphs"].values():
        graph["path"] = _absolute(graph["path"])
    config["http"]["app"] = _absolute(config["http"]["app"])
    if "auth" in config:
        config["auth"]["path"] = _absolute(config["auth"]["path"])
    config["dependencies"] = [str(ROOT)]
    env_file = folder / "server.env"
    env_file.write_text("", encoding="utf-8")
    config["env"] = str(env_file)
    path = folder / "langgraph.json"
    path.write_text(json.dumps(config, indent=2), encoding="utf-8")
    return path


def clean_environment(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(SCRUBBED_PREFIXES)}
    env.update(extra or {})
    return env


@dataclass
class DevServer:
    url: str
    process: subprocess.Popen[bytes]
    log: Path
    server: str = "langgraph-dev"  # or "aegra"

    def output(self) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace") if self.log.exists() else ""

    def stop(self) -> None:
        """SIGTERM to the server's process group, SIGKILL if it does not exit."""
        if self.process.poll() is not None:
            return
        try:
            os.killpg(self.process.pid, signal.SIGTERM)
            self.process.wait(timeout=20)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            try:
                os.killpg(self.process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.process.wait(timeout=20)


def server_python() -> str:
    """The Python that runs Aegra; a clear failure when `make install-server` has not made it."""
    if not SERVER_PYTHON.exists():
        raise RuntimeError(f"{SERVER_PYTHON} is missing: `make install-server` makes the Python 3.12 environment "
                           "with Aegra (or set EVIDENT_TEST_SERVER_PYTHON)")
    return str(SERVER_PYTHON)


def start(folder: Path, *, env: Mapping[str, str] | None = None, jobs: int = 8,
          extra_args: tuple[str, ...] = (), python: str = sys.executable, server: str = "langgraph-dev",
          port: int | None = None, wait: bool = True) -> DevServer:
    """Start `evident serve` on a free port (or `port`); returns once `/ok` answers (so the lifespan ran),
    or at once with `wait=False` (then `wait_until_up`: several servers start side by side)."""
    folder.mkdir(parents=True, exist_ok=True)
    config = hermetic_config(folder)
    port = port or free_port()
    log = folder / "server.log"
    argv = [python, "-m", "evident.cli", "serve", "--langgraph-config", str(config),
            "--host", "127.0.0.1", "--port", str(port), "--jobs", str(jobs), *extra_args]
    with log.open("ab") as out:
        process = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                   env=clean_environment(env), cwd=folder, start_new_session=True)
    started = DevServer(url=f"http://127.0.0.1:{port}", process=process, log=log, server=server)
    return wait_until_up(started) if wait else started


def wait_until_up(server: DevServer) -> DevServer:
    """`server` once its `/ok` answers; stopped, and the error naming its log, if it exits or never does."""
    deadline = time.monotonic() + START_TIMEOUT_S
    try:
        while True:
            if server.process.poll() is not None:
                raise RuntimeError(f"the server exited with {server.process.returncode}:\n{server.output()}")
            try:
                if httpx.get(f"{server.url}/ok", timeout=2.0).status_code == 200:
                    return server
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"the server did not start within {START_TIMEOUT_S:.0f} s:\n{server.output()}")
            time.sleep(0.1)
    except BaseException:
        server.stop()
        raise


@contextmanager
def running(folder: Path, *, env: Mapping[str, str] | None = None) -> Iterator[DevServer]:
    """`start`, and `stop` when the block ends (a test fixture's whole life)."""
    server = start(folder, env=env)
    try:
        yield server
    finally:
        server.stop()


def start_aegra(folder: Path, *, database: str, redis: str | None = None, migrate: bool = True,
                env: Mapping[str, str] | None = None, jobs: int = 8, port: int | None = None,
                wait: bool = True) -> DevServer:
    """One Aegra replica (`evident serve --database`), with crash recovery shortened (AEGRA_RECOVERY)."""
    args = ("--database", database, *(("--redis", redis) if redis else ()), *(() if migrate else ("--no-migrate",)))
    return start(folder, env={**AEGRA_RECOVERY, **(env or {})}, jobs=jobs, extra_args=args, python=server_python(),
                 server="aegra", port=port, wait=wait)


def migrate(database: str, folder: Path) -> None:
    """`evident serve --database URL --migrate-only`: the deployment's one migration step."""
    folder.mkdir(parents=True, exist_ok=True)
    done = subprocess.run([server_python(), "-m", "evident.cli", "serve", "--database", database, "--migrate-only"],
                          capture_output=True, text=True, env=clean_environment(), cwd=folder,
                          timeout=START_TIMEOUT_S, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"the migration failed ({done.returncode}):\n{done.stdout}{done.stderr}")


@contextmanager
def running_aegra(folder: Path, *, database: str, env: Mapping[str, str] | None = None) -> Iterator[DevServer]:
    """`start_aegra` (one replica, no Redis), and `stop` when the block ends."""
    server = start_aegra(folder, database=database, env=env)
    try:
        yield server
    finally:
        server.stop()
