"""A real PostgreSQL 15 (Debian's `postgresql` package) for the tests: a throwaway cluster in a temporary
folder, on a free loopback port, with password (SCRAM) authentication, stopped at the end of the session.

PostgreSQL refuses to run as root: under root the cluster belongs to `nobody` and its commands run through
`runuser`. `make test` installs the package when missing (scripts/test-deps.sh).
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

import psycopg
from psycopg import sql

from tests.support import ports

BIN = Path("/usr/lib/postgresql/15/bin")
USER = "evident"
# Characters a URI must escape, so the tests see the password survive parsing and never leak in any form.
PASSWORD = "pg:S3cr@t/pw?x#1"


@dataclass
class PostgresServer:
    folder: Path
    port: int

    def dsn(self, *, password: str = PASSWORD, database: str = "postgres") -> str:
        return f"postgresql://{USER}:{quote(password, safe='')}@127.0.0.1:{self.port}/{database}"

    def connect(self) -> psycopg.Connection:
        return psycopg.connect(self.dsn(), autocommit=True)

    def _run(self, *args: str) -> None:
        command = [str(BIN / args[0]), *args[1:]]
        if os.geteuid() == 0:
            command = ["runuser", "-u", "nobody", "--", *command]
        done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"{args[0]} failed ({done.returncode}): {done.stderr.strip() or done.stdout.strip()}")

    @classmethod
    def start(cls, kept: Path | None = None) -> PostgresServer:
        """A new cluster in a temporary folder; with `kept`, the cluster in that folder (created when it holds
        none), which `stop(keep=True)` leaves there for the next run (benchmarks/scale.py --keep)."""
        if not (BIN / "initdb").exists():
            raise RuntimeError(f"{BIN / 'initdb'} is missing: install Debian's postgresql (scripts/test-deps.sh)")
        folder = Path(tempfile.mkdtemp(prefix="evident-pg-")) if kept is None else kept
        server = cls(folder, ports.free_port())
        if not (folder / "data").exists():
            folder.mkdir(parents=True, exist_ok=True)
            (folder / "pw").write_text(PASSWORD + "\n", encoding="utf-8")
            if os.geteuid() == 0:
                nobody = pwd.getpwnam("nobody")
                os.chown(folder, nobody.pw_uid, nobody.pw_gid)
                os.chown(folder / "pw", nobody.pw_uid, nobody.pw_gid)
            server._run("initdb", "-D", str(folder / "data"), "-U", USER, f"--pwfile={folder / 'pw'}",
                        "-A", "scram-sha-256", "-E", "UTF8", "--locale=C.UTF-8", "--no-sync")  # fmt: skip
        server.resume()
        return server

    def resume(self) -> None:
        """Start (again) on the same port: a test that stopped the server gives it back running."""
        # Aegra's replicas each keep a pool: the load tests open a few hundred connections at once.
        options = (f"-p {self.port} -k {self.folder} -c listen_addresses=127.0.0.1 -c fsync=off"
                   " -c synchronous_commit=off -c full_page_writes=off -c max_connections=300")
        self._run("pg_ctl", "-D", str(self.folder / "data"), "-l", str(self.folder / "log"), "-o", options,
                  "-w", "-t", "30", "start")  # fmt: skip

    def pause(self) -> None:
        self._run("pg_ctl", "-D", str(self.folder / "data"), "-m", "fast", "-w", "stop")

    def create_database(self, name: str) -> str:
        """A new empty database (for one server deployment), and its DSN."""
        with self.connect() as connection:
            connection.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        return self.dsn(database=name)

    def stop(self, *, keep: bool = False) -> None:
        try:
            self.pause()
        finally:
            if not keep:
                shutil.rmtree(self.folder, ignore_errors=True)
