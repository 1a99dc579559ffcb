"""A throwaway PostgreSQL cluster on 127.0.0.1, from Debian's `postgresql` (15) package: `initdb` into a
temporary folder, `pg_ctl` to start and stop it (and start it again), trust authentication on loopback only.

PostgreSQL refuses to run as root, so as root the cluster belongs to `nobody` (commands run through
`runuser`); as any other user it is that user's own. Durability is off (`fsync`, `synchronous_commit`):
the tests stop it with `pg_ctl stop -m fast`, a clean shutdown, which loses nothing.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

BIN = Path(os.environ.get("EVIDENT_TEST_PG_BIN", "/usr/lib/postgresql/15/bin"))
RUN_AS = "nobody"  # only when the tests run as root
USER = "evident"
START_TIMEOUT_S = 60  # a deadline for a slow CI machine, not a timing claim


def available() -> str | None:
    """Why no cluster can be made here, or None."""
    if not (BIN / "initdb").exists():
        return f"{BIN / 'initdb'} is missing: `bash scripts/test-deps.sh` installs Debian's postgresql"
    if os.geteuid() == 0 and shutil.which("runuser") is None:
        return "runuser is missing (util-linux): PostgreSQL cannot run as root"
    return None


class PostgresCluster:
    """One cluster: `url(database)` for a database made with `create_database`."""

    def __init__(self, port: int, folder: Path | None = None) -> None:
        self.port = port
        self.folder = folder or Path(tempfile.mkdtemp(prefix="evident-pg-"))
        self.data = self.folder / "data"
        self.log = self.folder / "postgres.log"

    def _run(self, *argv: str) -> subprocess.CompletedProcess[str]:
        prefix = ["runuser", "-u", RUN_AS, "--"] if os.geteuid() == 0 else []
        return subprocess.run([*prefix, *argv], capture_output=True, text=True, timeout=START_TIMEOUT_S, check=False)

    def _checked(self, *argv: str) -> None:
        done = self._run(*argv)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(argv[:2])} failed ({done.returncode}): {done.stdout}{done.stderr}\n"
                               f"{self.log.read_text(errors='replace') if self.log.exists() else ''}")

    def start(self) -> PostgresCluster:
        if os.geteuid() == 0:
            shutil.chown(self.folder, user=RUN_AS)
        if not self.data.exists():
            self._checked(str(BIN / "initdb"), "-D", str(self.data), "-U", USER, "-A", "trust", "-E", "UTF8",
                          "--no-sync", "--no-instructions")
        self._checked(*self._pg_ctl("start"))
        return self

    def _pg_ctl(self, action: str, *extra: str) -> list[str]:
        options = (f"-h 127.0.0.1 -p {self.port} -k {self.folder} -c fsync=off -c synchronous_commit=off "
                   "-c full_page_writes=off -c max_connections=300")
        return [str(BIN / "pg_ctl"), action, "-D", str(self.data), "-l", str(self.log), "-w",
                "-t", str(START_TIMEOUT_S), "-o", options, *extra]

    def shut_down(self) -> None:
        """Stop the server (fast: open connections are cut), keeping its data; `start` brings it back."""
        self._checked(str(BIN / "pg_ctl"), "stop", "-D", str(self.data), "-m", "fast", "-w")

    def stop(self) -> None:
        if self.data.exists():
            self._run(str(BIN / "pg_ctl"), "stop", "-D", str(self.data), "-m", "immediate", "-w")
        shutil.rmtree(self.folder, ignore_errors=True)

    def create_database(self, name: str) -> str:
        self._checked(str(BIN / "psql"), "-h", "127.0.0.1", "-p", str(self.port), "-U", USER, "-d", "postgres",
                      "-v", "ON_ERROR_STOP=1", "-q", "-c", f'CREATE DATABASE "{name}"')
        return self.url(name)

    def url(self, database: str) -> str:
        return f"postgresql://{USER}@127.0.0.1:{self.port}/{database}"

    def __enter__(self) -> PostgresCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
