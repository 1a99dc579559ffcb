"""`evident serve --database postgresql://…`: the graph on Aegra, threads, runs and checkpoints in PostgreSQL.

Aegra (PyPI `aegra-api`, Apache-2.0) serves the LangGraph API from `langgraph.json` on PostgreSQL; with
Redis (`--redis`) any number of replicas share one database, each running its share of the runs, and a
replica that dies mid-run has its runs re-run by another. LangGraph's own PostgreSQL server is not on
PyPI (and needs a licence key to self-host); docs/deployment.md says where it fits.

This module builds the command line and environment; `evident serve` (evident/commands/serve.py)
checks the options and runs it. What Aegra does not read from langgraph.json is supplied here: the
`env` file (loaded into the server's environment, as `langgraph dev` does) and the runs executed at
once (`--jobs`). The `http.disable_*` keys it ignores need nothing: the route allowlist
(evident/web/routes.py) refuses the store, crons and every route it does not name, on both servers.
"""

from __future__ import annotations

import importlib.util
import json
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from evident.context import PACKAGE_ROOT
from evident.settings import export_environment

ASGI_APP = "aegra_api.main:app"
INSTALL_HINT = "pip install 'evident-rag[server]' (Aegra needs Python 3.12 or newer)"
# For an installed package with no checkout around it: Aegra imports graphs by file path only.
GENERATED_CONFIG: dict[str, Any] = {
    "dependencies": [str(PACKAGE_ROOT.parent)],
    "graphs": {"evident": {"path": f"{PACKAGE_ROOT / 'graph' / 'builder.py'}:graph",
                           "description": "EvidenT: verified, span-cited answers from your documents."},
               "evident_agent": {"path": f"{PACKAGE_ROOT / 'agent' / 'graph.py'}:graph",
                                 "description": "An agent that asks EvidenT, its final answer verified."}},
    "auth": {"path": f"{PACKAGE_ROOT / 'web' / 'auth.py'}:auth"},
    "http": {"app": f"{PACKAGE_ROOT / 'web' / 'app.py'}:app", "cors": {"allow_origins": []}},
}


def missing() -> str | None:
    """Why Aegra cannot run from this Python, or None."""
    if sys.version_info < (3, 12):
        return (f"the production server (Aegra) needs Python 3.12 or newer; this is "
                f"{sys.version_info.major}.{sys.version_info.minor}: {INSTALL_HINT}")
    if importlib.util.find_spec("aegra_api") is None:
        return f"the production server (Aegra) is not installed: {INSTALL_HINT}"
    return None


def generated_config(config: Mapping[str, Any] = GENERATED_CONFIG) -> Path:
    """A langgraph.json of `config` in a folder of its own."""
    folder = Path(tempfile.mkdtemp(prefix="evident-serve-"))
    path = folder / "langgraph.json"
    path.write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    return path


def env_file_values(langgraph_config: Path) -> dict[str, str]:
    """The variables of langgraph.json's `env` (a file relative to it, or an object), which `langgraph
    dev` loads and Aegra does not read. A missing file is no variables, as for `langgraph dev`."""
    try:
        config = json.loads(langgraph_config.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}  # Aegra reports an unreadable config itself, naming it
    env = config.get("env") if isinstance(config, dict) else None
    if isinstance(env, dict):
        return {str(k): str(v) for k, v in env.items()}
    if not isinstance(env, str):
        return {}
    path = Path(env) if Path(env).is_absolute() else langgraph_config.parent / env
    if not path.is_file():
        return {}
    # optional dependency: python-dotenv comes with the [server] extra
    from dotenv import dotenv_values

    return {k: v for k, v in dotenv_values(path).items() if v is not None}


def aegra_environment(
    base: Mapping[str, str], *, langgraph_config: Path, database: str, redis: str | None, migrate: bool, jobs: int
) -> dict[str, str]:
    """Aegra's settings for one replica, over `base` (which the env file's values override, as under
    `langgraph dev`; evident serve's own quieting is applied by the caller afterwards)."""
    env = {**base, **env_file_values(langgraph_config)}
    env.update({
        "AEGRA_CONFIG": str(langgraph_config),
        "DATABASE_URL": database,
        "RUN_MIGRATIONS_ON_STARTUP": "true" if migrate else "false",
        # One worker loop taking up to `jobs` runs at once: `--jobs` means runs per replica, as it does
        # for `langgraph dev`.
        "WORKER_COUNT": "1",
        "N_JOBS_PER_WORKER": str(jobs),
        "REDIS_BROKER_ENABLED": "true" if redis else "false",
        # Crons are refused (the auth handler and the route allowlist): their scheduler has nothing to do.
        "CRON_ENABLED": "false",
    })
    if redis:
        env["REDIS_URL"] = redis
    return env


def aegra_argv(python: str, *, host: str, port: int) -> list[str]:
    """One replica: Aegra's ASGI app under uvicorn, one process (replicas are processes of their own)."""
    return [python, "-m", "uvicorn", ASGI_APP, "--host", host, "--port", str(port), "--no-server-header"]


def run_migrations(database: str) -> None:
    """Bring the database to Aegra's schema, once, under Aegra's advisory lock (the deployments's
    migration step: docs/deployment.md). Raises what Aegra raises."""
    export_environment("DATABASE_URL", database)
    # optional dependency: the [server] extra; it reads DATABASE_URL when imported, so after the export above
    from aegra_api.core.migrations import run_migrations as upgrade

    upgrade()
