"""`evident serve`: the EvidenT graph behind the LangGraph API server, offline.

The process becomes `langgraph dev --no-browser` (in memory, one process), or with a database
(`--database`, `[server] database`) one Aegra replica keeping threads, runs and checkpoints in
PostgreSQL (evident/commands/aegra.py). Either way it is an exec, so signals and the exit status are
the server's own, in the directory of the langgraph.json it serves, with the environment that keeps
it from contacting anything: no CLI analytics, no version check, and no LangSmith tracing unless the
user configured tracing (LANGSMITH_TRACING=true and an API key).

Without authentication configured (`[server]`, evident/settings.py) the server is for this machine only:
binding another address needs `--insecure`, which says loudly what it means.
"""

from __future__ import annotations

import errno
import ipaddress
import json
import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import ValidationError

from evident.commands import aegra
from evident.commands.common import fail, warn
from evident.context import PACKAGE_ROOT
from evident.settings import (
    ConfigError,
    DeployedServerSettings,
    ServerSettings,
    environment_value,
    process_environment,
)

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 2024
DEFAULT_JOBS = 8  # concurrent runs; `langgraph dev` itself runs one at a time
INSTALL_HINT = "pip install 'evident-rag[serve]'"

# Every name under which LangSmith reads "tracing on" (LangChain's older names included).
TRACING_VARS = ("LANGSMITH_TRACING", "LANGSMITH_TRACING_V2", "LANGCHAIN_TRACING", "LANGCHAIN_TRACING_V2")
KEY_VARS = ("LANGSMITH_API_KEY", "LANGCHAIN_API_KEY")
QUIET = {"LANGGRAPH_CLI_NO_ANALYTICS": "1", "LANGGRAPH_NO_VERSION_CHECK": "true"}

# For an installed package with no checkout around it: the same graph and routes, by module.
GENERATED_CONFIG = {
    "dependencies": ["."],
    "graphs": {"evident": {"path": "evident.graph.builder:graph",
                           "description": "EvidenT: verified, span-cited answers from your documents."},
               "evident_agent": {"path": "evident.agent.graph:graph",
                                 "description": "An agent that asks EvidenT, its final answer verified."}},
    "auth": {"path": "evident.web.auth:auth", "disable_studio_auth": True},
    "http": {"app": "evident.web.app:app", "cors": {"allow_origins": []}, "disable_webhooks": True,
             "disable_mcp": True, "disable_a2a": True, "disable_store": True, "disable_ui": True},
}
WILDCARD_WARNING = ("serving {host}: only requests whose Host header is a loopback name or an allowed_hosts "
                    "entry are answered (a rebound DNS name is refused); list the names clients use in "
                    "[server] allowed_hosts or EVIDENT_ALLOWED_HOSTS")
INSECURE_WARNING = ("serving {host} without authentication (--insecure): anyone who can reach this "
                    "address can query every public document as an anonymous caller")


@dataclass
class Invocation:
    """What `evident serve` runs: argv, environment and working directory."""

    argv: list[str]
    env: dict[str, str]
    cwd: Path
    url: str
    notes: list[str] = field(default_factory=list)


def tracing_configured(env: Mapping[str, str]) -> bool:
    """Whether the user set LangSmith tracing up: a tracing flag is "true" and a key is set."""
    on = any(env.get(var, "").strip().lower() == "true" for var in TRACING_VARS)
    return on and any(env.get(var, "").strip() for var in KEY_VARS)


def server_environment(
    base: Mapping[str, str], *, config: Path | None = None, corpus: list[Path] | None = None
) -> tuple[dict[str, str], list[str]]:
    """The server's environment (and notes for the user): quiet, and traced only if configured."""
    env = dict(base)
    notes: list[str] = []
    for key, value in QUIET.items():
        env.setdefault(key, value)
    if tracing_configured(env):
        notes.append(f"LangSmith tracing is on (project {env.get('LANGSMITH_PROJECT') or 'default'})")
    else:
        if any(env.get(var, "").strip().lower() == "true" for var in TRACING_VARS):
            notes.append("LANGSMITH_TRACING is set but no LANGSMITH_API_KEY: tracing stays off")
        for var in TRACING_VARS:
            if var in env or var == "LANGSMITH_TRACING":
                env[var] = "false"
        # With a LangSmith key in its environment the LangGraph server reports usage counters to
        # LangSmith even when tracing is off: no key, no connection.
        for var in (*KEY_VARS, "LANGSMITH_CONTROL_PLANE_API_KEY"):
            env.pop(var, None)
    if config is not None:
        env["EVIDENT_CONFIG"] = str(config.resolve())
    if corpus:
        env["EVIDENT_CORPUS"] = os.pathsep.join(str(p.resolve()) for p in corpus)
    return env, notes


def is_loopback(host: str) -> bool:
    if host.strip("[]").lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_exposure(host: str, *, insecure: bool, auth_configured: bool) -> str | None:
    """Why `evident serve` must not bind `host`, or None. A warning is the caller's to print."""
    if is_loopback(host) or auth_configured or insecure:
        return None
    return (f"refusing to serve {host} without authentication: configure tokens or JWTs "
            "(docs/serving.md) or pass --insecure")


def find_langgraph_config(explicit: Path | None = None, cwd: Path | None = None) -> Path | None:
    """The langgraph.json to serve: the one given, else ./langgraph.json, else the source
    checkout's; None for an installed package (a config is then generated)."""
    if explicit is not None:
        return explicit.resolve()
    for candidate in ((cwd or Path.cwd()) / "langgraph.json", PACKAGE_ROOT.parent / "langgraph.json"):
        if candidate.is_file():
            return candidate.resolve()
    return None


def _server_settings(config: Path | None) -> ServerSettings:
    """The server's settings as it will read them (a broken [server] section ends here, clearly)."""
    try:
        return DeployedServerSettings.load(config)
    except ConfigError as exc:
        fail("serve", str(exc))


def is_wildcard(host: str) -> bool:
    """Whether `host` binds every address of the machine (no one name that clients would send)."""
    try:
        return ipaddress.ip_address(host.strip("[]")).is_unspecified
    except ValueError:
        return False


def served_host_names(host: str, env: Mapping[str, str]) -> str | None:
    """`EVIDENT_ALLOWED_HOSTS` for a server bound to `host`: the configured names plus `host` itself
    when it is one address or name (the `Host` header a client then sends); None to leave it as is."""
    if is_loopback(host) or is_wildcard(host):
        return None
    configured = [name.strip() for name in env.get("EVIDENT_ALLOWED_HOSTS", "").split(",") if name.strip()]
    name = f"[{host.strip('[]')}]" if ":" in host else host
    return ",".join(dict.fromkeys([*configured, name]))


def port_problem(host: str, port: int) -> str | None:
    """Why `port` on `host` cannot be served now, or None. Checked before the server starts because
    `langgraph dev` moves to another free port on its own when the one asked for is taken, and the
    address `evident serve` printed would then be another program's."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host.strip("[]"), port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
    except (OSError, UnicodeError) as exc:
        return f"cannot listen on {host}: {exc}"
    with socket.socket(family, kind, proto) as probe:
        # As the server binds: SO_REUSEADDR, so a port left in TIME_WAIT by a stopped server is free.
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(address)
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                return (f"port {port} on {host} is already in use (another server?): stop it, "
                        "or pass --port N (--port 0 picks a free one)")
            return f"cannot listen on {host}:{port}: {exc.strerror or exc}"
    return None


def free_port(host: str) -> int:
    """A port of `host` that nothing listens on now (what `--port 0` serves)."""
    family, kind, proto, _, address = socket.getaddrinfo(
        host.strip("[]"), 0, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
    with socket.socket(family, kind, proto) as probe:
        probe.bind(address)
        return int(probe.getsockname()[1])


def langgraph_executable() -> str | None:
    """The `langgraph` CLI of this environment (next to this Python first), if installed."""
    here = Path(sys.executable).parent
    return shutil.which("langgraph", path=os.pathsep.join([str(here), environment_value("PATH") or ""]))


def build_invocation(
    *,
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    reload: bool = False,
    jobs: int = DEFAULT_JOBS,
    config: Path | None = None,
    corpus: list[Path] | None = None,
    langgraph_config: Path | None = None,
    executable: str = "langgraph",
    base_env: Mapping[str, str] | None = None,
    insecure: bool = False,
) -> Invocation:
    """The `langgraph dev` command line for these options (no side effects but a generated config)."""
    lg_config = find_langgraph_config(langgraph_config) or aegra.generated_config(GENERATED_CONFIG)
    env, notes = _deployment_environment(process_environment() if base_env is None else base_env, host=host,
                                         config=config, corpus=corpus, insecure=insecure)
    argv = [executable, "dev", "--no-browser", "--config", str(lg_config), "--host", host, "--port", str(port),
            "--n-jobs-per-worker", str(jobs)]
    if not reload:
        argv.append("--no-reload")
    return Invocation(argv=argv, env=env, cwd=lg_config.parent, url=f"http://{host}:{port}", notes=notes)


def build_aegra_invocation(
    *,
    database: str,
    redis: str | None = None,
    migrate: bool = True,
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    jobs: int = DEFAULT_JOBS,
    config: Path | None = None,
    corpus: list[Path] | None = None,
    langgraph_config: Path | None = None,
    python: str = sys.executable,
    base_env: Mapping[str, str] | None = None,
    insecure: bool = False,
) -> Invocation:
    """One Aegra replica for these options (no side effects but a generated config)."""
    lg_config = find_langgraph_config(langgraph_config) or aegra.generated_config()
    base = aegra.aegra_environment(process_environment() if base_env is None else base_env, langgraph_config=lg_config,
                                   database=database, redis=redis, migrate=migrate, jobs=jobs)
    env, notes = _deployment_environment(base, host=host, config=config, corpus=corpus, insecure=insecure)
    if redis is None:
        notes.append("no --redis: this replica runs its runs itself; several replicas of one database need Redis")
    return Invocation(argv=aegra.aegra_argv(python, host=host, port=port), env=env, cwd=lg_config.parent,
                      url=f"http://{host}:{port}", notes=notes)


def _deployment_environment(base: Mapping[str, str], *, host: str, config: Path | None, corpus: list[Path] | None,
                            insecure: bool) -> tuple[dict[str, str], list[str]]:
    env, notes = server_environment(base, config=config, corpus=corpus)
    if insecure:
        env["EVIDENT_INSECURE"] = "1"
    if (names := served_host_names(host, env)) is not None:
        env["EVIDENT_ALLOWED_HOSTS"] = names
    return env, notes


def run(
    *,
    host: str,
    port: int,
    reload: bool,
    jobs: int,
    config: Path | None,
    corpus: list[Path] | None,
    langgraph_config: Path | None,
    json_out: bool,
    insecure: bool = False,
    database: str | None = None,
    redis: str | None = None,
    migrate: bool = True,
    migrate_only: bool = False,
) -> int:
    if config is not None and not config.is_file():
        fail("serve", f"{config}: config file not found")
    for path in corpus or []:
        if not path.exists():
            fail("serve", f"{path}: corpus path does not exist")
    if langgraph_config is not None and not langgraph_config.is_file():
        fail("serve", f"{langgraph_config}: no such file")
    settings = _server_settings(config)
    database, redis = _storage(settings, database, redis, reload=reload, migrate=migrate, migrate_only=migrate_only)
    if database is not None and migrate_only:
        return _migrate(database)
    auth_configured = settings.auth_configured
    problem = check_exposure(host, insecure=insecure, auth_configured=auth_configured)
    if problem:
        fail("serve", problem)
    if not 0 <= port <= 65535:
        fail("serve", f"--port must be within 0..65535 (got {port})")
    if port == 0:
        try:
            port = free_port(host)
        except OSError as exc:
            fail("serve", f"cannot listen on {host}: {exc.strerror or exc}")
    elif (taken := port_problem(host, port)) is not None:
        fail("serve", taken)
    if database is not None:
        inv = build_aegra_invocation(database=database, redis=redis, migrate=migrate, host=host, port=port,
                                     jobs=jobs, config=config, corpus=corpus, langgraph_config=langgraph_config,
                                     insecure=insecure)
        served_config = inv.env["AEGRA_CONFIG"]
    else:
        executable = langgraph_executable()
        if executable is None:
            fail("serve", f"the LangGraph server is not installed: {INSTALL_HINT}")
        inv = build_invocation(host=host, port=port, reload=reload, jobs=jobs, config=config, corpus=corpus,
                               langgraph_config=langgraph_config, executable=executable, insecure=insecure)
        served_config = inv.argv[inv.argv.index("--config") + 1]
    if insecure and not auth_configured and not is_loopback(host):
        warn("serve", INSECURE_WARNING.format(host=host))
    if is_wildcard(host) and not settings.allowed_hosts:
        warn("serve", WILDCARD_WARNING.format(host=host))
    server = "langgraph-dev" if database is None else "aegra"
    info = {"url": inv.url, "api_docs": f"{inv.url}/docs", "health": f"{inv.url}/health",
            "assistant_id": "evident", "langgraph_config": served_config, "server": server,
            "replicas_share_runs": redis is not None}
    if json_out:
        print(json.dumps(info), flush=True)
    else:
        where = "" if database is None else " on Aegra, threads and runs in PostgreSQL"
        print(f"evident serve: {inv.url}{where} (API docs {inv.url}/docs, health {inv.url}/health)", file=sys.stderr)
    for note in inv.notes:
        if "stays off" in note:
            warn("serve", note)
        else:
            print(f"evident serve: {note}", file=sys.stderr)
    sys.stdout.flush()
    sys.stderr.flush()
    if os.name == "posix":
        os.chdir(inv.cwd)
        os.execve(inv.argv[0], inv.argv, inv.env)  # never returns
    return subprocess.call(inv.argv, env=inv.env, cwd=inv.cwd)  # pragma: no cover - Windows


def _storage(settings: ServerSettings, database: str | None, redis: str | None, *, reload: bool, migrate: bool,
             migrate_only: bool) -> tuple[str | None, str | None]:
    """Where threads and runs are kept: the options, else `[server] database` / `redis` (checked the same
    way); None for the development server's memory. Options that need a database end here without one."""
    if database is not None or redis is not None:
        try:
            checked = ServerSettings(database=database, redis=redis)
        except ValidationError as exc:
            fail("serve", str(exc.errors()[0]["msg"]).removeprefix("Value error, "))
        database, redis = checked.database, checked.redis
    database = database or settings.database
    redis = redis or settings.redis
    if database is None:
        if redis is not None:
            fail("serve", "--redis shares the runs of one database between replicas: give --database too")
        if migrate_only or not migrate:
            fail("serve", "--migrate-only and --no-migrate are for a database: give --database too")
        return None, None
    if reload:
        fail("serve", "--reload is for the development server (without --database)")
    if (problem := aegra.missing()) is not None:
        fail("serve", problem)
    return database, redis


def _migrate(database: str) -> int:
    try:
        aegra.run_migrations(database)
    except Exception as exc:  # the database's own message (it names no password), then exit 1
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        print(f"evident serve: the database could not be migrated: {reason}", file=sys.stderr)
        return 1
    print("evident serve: the database is at Aegra's current schema", file=sys.stderr)
    return 0
