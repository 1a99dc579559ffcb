"""Debian's nginx running deploy/nginx.conf, the reverse proxy of deploy/docker-compose.yml, in front of
replicas on loopback. Only what differs between a container and a test changes: the upstream
addresses, the listening address and the folders nginx writes to; every proxy setting is the file's own.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from tests.support import processes

CONFIG = Path(__file__).resolve().parents[2] / "deploy" / "nginx.conf"
START_TIMEOUT_S = 30


def available() -> str | None:
    if shutil.which("nginx") is None:
        return "nginx is missing: `bash scripts/test-deps.sh` installs Debian's nginx-light"
    return None


def adapted(config: str, *, upstreams: Sequence[str], port: int, folder: Path) -> str:
    """deploy/nginx.conf with the compose file's replica names replaced by `upstreams`."""
    names = re.findall(r"^\s*server (evident-\d+:2024)", config, flags=re.M)
    if len(names) != len(upstreams):
        raise ValueError(f"deploy/nginx.conf lists {len(names)} replicas, the test has {len(upstreams)}")
    for name, address in zip(names, upstreams, strict=True):
        config = config.replace(f"server {name}", f"server {address}")
    config, listens = re.subn(r"^(\s*)listen 80;", rf"\1listen 127.0.0.1:{port};", config, flags=re.M)
    if listens != 1:
        raise ValueError("deploy/nginx.conf must listen on port 80 once")
    writes = "".join(f"\n    {kind}_temp_path {folder / kind};" for kind in ("client_body", "proxy", "fastcgi",
                                                                             "uwsgi", "scgi"))
    return config.replace("http {", f"http {{{writes}\n    access_log {folder / 'access.log'};", 1)


class Nginx:
    def __init__(self, upstreams: Sequence[str], port: int) -> None:
        self.port = port
        self.folder = Path(tempfile.mkdtemp(prefix="evident-nginx-"))
        # As root nginx's workers run as nobody: they write their temporary files here.
        os.chmod(self.folder, 0o777)
        (self.folder / "nginx.conf").write_text(
            adapted(CONFIG.read_text(encoding="utf-8"), upstreams=upstreams, port=port, folder=self.folder),
            encoding="utf-8")
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> Nginx:
        self.process = subprocess.Popen(
            ["nginx", "-p", str(self.folder), "-c", str(self.folder / "nginx.conf"), "-e",
             str(self.folder / "error.log"), "-g", f"daemon off; pid {self.folder / 'nginx.pid'};"],
            stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return self
            except OSError:
                pass
            if self.process.poll() is not None or time.monotonic() > deadline:
                errors = self.folder / "error.log"
                log = errors.read_text(errors="replace") if errors.exists() else ""
                self.stop()
                raise RuntimeError(f"nginx did not start on port {self.port}: {log}")
            time.sleep(0.05)

    def stop(self) -> None:
        processes.stop(self.process)
        shutil.rmtree(self.folder, ignore_errors=True)

    def __enter__(self) -> Nginx:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
