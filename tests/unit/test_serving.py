"""Serving pieces that need no server: langgraph.json, the `evident serve` command line and
environment, the extra HTTP routes, the served context's defaults, and the step descriptions."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
from fastapi import FastAPI
from starlette.testclient import TestClient

from evident.commands import aegra
from evident.commands.serve import (
    GENERATED_CONFIG,
    build_aegra_invocation,
    build_invocation,
    check_exposure,
    served_host_names,
    server_environment,
    tracing_configured,
)
from evident.context import EvidentContext
from evident.graph.tracing import describe, progress, summarize
from evident.request_settings import ContextWithDefaults
from evident.settings import ConfigError, forget_file_defaults

ROOT = Path(__file__).resolve().parents[2]


def _load(spec: str, root: Path) -> object:
    path, _, attr = spec.rpartition(":")
    module_spec = importlib.util.spec_from_file_location(f"loaded_{Path(path).stem}", root / path)
    assert module_spec is not None and module_spec.loader is not None
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    return getattr(module, attr)


def test_langgraph_json_exposes_the_graph_its_environment_and_the_routes() -> None:
    config = json.loads((ROOT / "langgraph.json").read_text(encoding="utf-8"))
    assert config["dependencies"] == ["."] and config["python_version"] == "3.11"
    assert config["env"] == ".env"
    assert set(config["graphs"]) == {"evident", "evident_agent"}  # docs/agents.md: the agent beside EvidenT
    for graph_id, entry in config["graphs"].items():
        assert entry["description"]
        assert getattr(_load(entry["path"], ROOT), "name", None) == graph_id
    app = _load(config["http"]["app"], ROOT)
    assert isinstance(app, FastAPI)  # what Aegra requires; LangGraph's server takes any Starlette app
    assert (ROOT / ".env.example").is_file()  # what `env` expects, documented


def test_langgraph_json_authenticates_and_closes_what_the_graph_does_not_use() -> None:
    from langgraph_sdk import Auth

    for config in (json.loads((ROOT / "langgraph.json").read_text(encoding="utf-8")), GENERATED_CONFIG):
        # Studio's "x-auth-scheme: langsmith" would otherwise skip our authentication on `langgraph dev`.
        assert config["auth"]["disable_studio_auth"] is True
        http = config["http"]
        assert http["cors"] == {"allow_origins": []}  # no wildcard: evident/web/browser.py answers CORS
        assert all(http[f"disable_{name}"] for name in ("webhooks", "mcp", "a2a", "store", "ui"))
    auth = _load(json.loads((ROOT / "langgraph.json").read_text(encoding="utf-8"))["auth"]["path"], ROOT)
    assert isinstance(auth, Auth) and auth._authenticate_handler is not None and auth._global_handlers


# -- evident serve --------------------------------------------------------------------------------------


def test_the_server_is_quiet_and_untraced_by_default() -> None:
    env, notes = server_environment({"PATH": "/bin", "LANGSMITH_API_KEY": "ls-key", "LANGCHAIN_TRACING_V2": "true"})
    assert env["LANGGRAPH_CLI_NO_ANALYTICS"] == "1" and env["LANGGRAPH_NO_VERSION_CHECK"] == "true"
    # LANGCHAIN_TRACING_V2=true and a key count as configured...
    assert tracing_configured({"LANGCHAIN_TRACING_V2": "true", "LANGSMITH_API_KEY": "k"})
    # ...but a flag alone does not, and every flag LangSmith reads is then switched off.
    env, notes = server_environment({"PATH": "/bin", "LANGCHAIN_TRACING_V2": "true"})
    assert env["LANGSMITH_TRACING"] == "false" and env["LANGCHAIN_TRACING_V2"] == "false"
    assert any("stays off" in n for n in notes)
    # A key without tracing is removed: the LangGraph server would report usage to LangSmith with it.
    env, _ = server_environment({"LANGSMITH_API_KEY": "k", "LANGSMITH_CONTROL_PLANE_API_KEY": "c"})
    assert "LANGSMITH_API_KEY" not in env and "LANGSMITH_CONTROL_PLANE_API_KEY" not in env
    assert env["LANGSMITH_TRACING"] == "false"


def test_configured_tracing_is_left_on() -> None:
    base = {"LANGSMITH_TRACING": "true", "LANGSMITH_API_KEY": "k", "LANGSMITH_PROJECT": "p",
            "LANGGRAPH_NO_VERSION_CHECK": "false"}
    env, notes = server_environment(base)
    assert env["LANGSMITH_TRACING"] == "true" and env["LANGSMITH_API_KEY"] == "k"
    assert env["LANGGRAPH_NO_VERSION_CHECK"] == "false"  # the user's explicit choice is kept
    assert notes == ["LangSmith tracing is on (project p)"]


def test_the_command_line(tmp_path: Path) -> None:
    config = tmp_path / "evident.toml"
    config.write_text("", encoding="utf-8")
    inv = build_invocation(port=3001, config=config, corpus=[tmp_path], executable="/venv/bin/langgraph",
                           base_env={})
    assert inv.argv[:3] == ["/venv/bin/langgraph", "dev", "--no-browser"]
    assert inv.argv[inv.argv.index("--config") + 1] == str(ROOT / "langgraph.json")
    assert inv.argv[inv.argv.index("--port") + 1] == "3001" and "--no-reload" in inv.argv
    assert inv.argv[inv.argv.index("--host") + 1] == "127.0.0.1"
    assert inv.argv[inv.argv.index("--n-jobs-per-worker") + 1] == "8"
    assert inv.cwd == ROOT and inv.url == "http://127.0.0.1:3001"
    assert inv.env["EVIDENT_CONFIG"] == str(config.resolve()) and inv.env["EVIDENT_CORPUS"] == str(tmp_path.resolve())
    assert "--no-reload" not in build_invocation(reload=True, base_env={}).argv


def test_an_installed_package_gets_a_generated_config(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr("evident.commands.serve.find_langgraph_config", lambda explicit=None, cwd=None: None)
    inv = build_invocation(base_env={})
    generated = json.loads(Path(inv.argv[inv.argv.index("--config") + 1]).read_text(encoding="utf-8"))
    assert generated["graphs"]["evident"]["path"] == "evident.graph.builder:graph"
    assert generated["graphs"]["evident_agent"]["path"] == "evident.agent.graph:graph"
    assert generated["http"]["app"] == "evident.web.app:app"


def test_another_address_needs_authentication_or_insecure(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    from evident.cli import app

    assert check_exposure("127.0.0.1", insecure=False, auth_configured=False) is None
    assert check_exposure("::1", insecure=False, auth_configured=False) is None
    assert check_exposure("localhost", insecure=False, auth_configured=False) is None
    assert "--insecure" in (check_exposure("0.0.0.0", insecure=False, auth_configured=False) or "")
    assert check_exposure("0.0.0.0", insecure=False, auth_configured=True) is None
    refused = CliRunner().invoke(app, ["serve", "--host", "0.0.0.0"])
    assert refused.exit_code == 2 and "without authentication" in refused.output

    started: list[tuple[list[str], dict[str, str]]] = []

    def execve(path: str, argv: list[str], env: dict[str, str]) -> None:
        started.append((argv, env))
        raise SystemExit(0)

    monkeypatch.setattr("evident.commands.serve.os.execve", execve)
    monkeypatch.setattr("evident.commands.serve.os.chdir", lambda path: None)
    # --port 0: a free port, whatever else runs on this machine (a taken port is refused).
    insecure = CliRunner().invoke(app, ["serve", "--host", "0.0.0.0", "--port", "0", "--insecure"])
    assert insecure.exit_code == 0 and "warning" in insecure.output and "anyone" in insecure.output
    ((argv, env),) = started
    assert argv[argv.index("--host") + 1] == "0.0.0.0" and env["EVIDENT_INSECURE"] == "1"
    tokens = tmp_path / "tokens.json"
    config = tmp_path / "evident.toml"
    config.write_text(f'[server]\ntokens_file = "{tokens.name}"\n', encoding="utf-8")
    authed = CliRunner().invoke(app, ["serve", "--host", "0.0.0.0", "--port", "0", "--config", str(config)])
    assert authed.exit_code == 0 and "anyone" not in authed.output
    assert "EVIDENT_INSECURE" not in started[-1][1]
    # Every address, so no one name: the operator is told that only allowed_hosts are answered.
    assert "allowed_hosts" in authed.output
    config.write_text(f'[server]\ntokens_file = "{tokens.name}"\nallowed_hosts = ["evident.corp"]\n', encoding="utf-8")
    named = CliRunner().invoke(app, ["serve", "--host", "0.0.0.0", "--port", "0", "--config", str(config)])
    assert named.exit_code == 0 and "warning" not in named.output


def test_a_bound_address_is_an_allowed_host_name() -> None:
    assert served_host_names("127.0.0.1", {}) is None and served_host_names("0.0.0.0", {}) is None
    assert served_host_names("::", {}) is None
    assert served_host_names("10.1.2.3", {}) == "10.1.2.3"
    assert served_host_names("fd00::5", {"EVIDENT_ALLOWED_HOSTS": "a.lan, b.lan"}) == "a.lan,b.lan,[fd00::5]"
    inv = build_invocation(host="evident.corp", base_env={"EVIDENT_ALLOWED_HOSTS": "evident.corp"})
    assert inv.env["EVIDENT_ALLOWED_HOSTS"] == "evident.corp"


def test_serve_reports_missing_files(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from evident.cli import app

    result = CliRunner().invoke(app, ["serve", "--corpus", str(tmp_path / "nope")])
    assert result.exit_code == 2 and "does not exist" in result.output


# -- with a database: Aegra ---------------------------------------------------------------------------


def test_a_database_serves_one_aegra_replica(tmp_path: Path) -> None:
    inv = build_aegra_invocation(database="postgresql://u:p@db:5432/evident", redis="redis://cache:6379/0",
                                 migrate=False, port=3002, jobs=4, base_env={"LANGSMITH_API_KEY": "k"})
    assert inv.argv[1:4] == ["-m", "uvicorn", "aegra_api.main:app"]
    assert inv.argv[inv.argv.index("--port") + 1] == "3002" and inv.argv[inv.argv.index("--host") + 1] == "127.0.0.1"
    env = inv.env
    assert env["AEGRA_CONFIG"] == str(ROOT / "langgraph.json") and inv.cwd == ROOT
    assert env["DATABASE_URL"] == "postgresql://u:p@db:5432/evident" and env["RUN_MIGRATIONS_ON_STARTUP"] == "false"
    assert env["REDIS_BROKER_ENABLED"] == "true" and env["REDIS_URL"] == "redis://cache:6379/0"
    assert env["N_JOBS_PER_WORKER"] == "4" and env["WORKER_COUNT"] == "1" and env["CRON_ENABLED"] == "false"
    # As quiet as `langgraph dev`: no tracing, and no LangSmith key for usage reports.
    assert env["LANGSMITH_TRACING"] == "false" and "LANGSMITH_API_KEY" not in env
    alone = build_aegra_invocation(database="postgresql://db/e", base_env={})
    assert alone.env["REDIS_BROKER_ENABLED"] == "false" and "REDIS_URL" not in alone.env
    assert alone.env["RUN_MIGRATIONS_ON_STARTUP"] == "true" and any("Redis" in note for note in alone.notes)


def test_aegra_gets_the_env_file_it_does_not_read_itself(tmp_path: Path) -> None:
    (tmp_path / "server.env").write_text("EVIDENT_TOP_N=3\nLANGSMITH_API_KEY=from-the-file\n", encoding="utf-8")
    config = tmp_path / "langgraph.json"
    config.write_text(json.dumps({"graphs": {}, "env": "server.env"}), encoding="utf-8")
    inv = build_aegra_invocation(database="postgresql://db/e", langgraph_config=config,
                                 base_env={"EVIDENT_TOP_N": "9", "EVIDENT_K": "2"})
    # The file wins over the inherited environment, as under `langgraph dev`; the quieting applies to it too.
    assert inv.env["EVIDENT_TOP_N"] == "3" and inv.env["EVIDENT_K"] == "2"
    assert "LANGSMITH_API_KEY" not in inv.env
    config.write_text(json.dumps({"graphs": {}, "env": {"EVIDENT_K": "5"}}), encoding="utf-8")
    assert aegra.env_file_values(config) == {"EVIDENT_K": "5"}
    config.write_text(json.dumps({"graphs": {}, "env": "missing.env"}), encoding="utf-8")
    assert aegra.env_file_values(config) == {}


def test_an_installed_package_gets_an_aegra_config_of_file_paths() -> None:
    graphs = [g["path"] for g in aegra.GENERATED_CONFIG["graphs"].values()]
    assert len(graphs) == 2  # EvidenT and evident_agent
    for entry in (*graphs, aegra.GENERATED_CONFIG["auth"]["path"], aegra.GENERATED_CONFIG["http"]["app"]):
        path, _, attr = entry.rpartition(":")
        assert Path(path).is_file() and attr  # Aegra imports graphs by file path only


def test_serving_on_a_database_checks_its_options(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    from evident.cli import app

    def refused(*args: str) -> str:
        result = CliRunner().invoke(app, ["serve", *args])
        assert result.exit_code == 2 and "Traceback" not in result.output, result.output
        return result.output

    assert "give --database too" in refused("--redis", "redis://127.0.0.1:6379/0")
    assert "give --database too" in refused("--migrate-only")
    assert "a PostgreSQL URL is needed" in refused("--database", "mysql://db/e")
    assert "a Redis URL is needed" in refused("--database", "postgresql://db/e", "--redis", "http://cache")
    assert "--reload is for the development server" in refused("--database", "postgresql://db/e", "--reload")
    if aegra.missing() is not None:  # this Python cannot run Aegra: the command says why, and how to fix it
        assert "evident-rag[server]" in refused("--database", "postgresql://db/e")
    monkeypatch.setattr("evident.commands.aegra.missing", lambda: None)
    started: list[list[str]] = []

    def execve(path: str, argv: list[str], env: dict[str, str]) -> None:
        started.append([*argv, env["DATABASE_URL"]])
        raise SystemExit(0)

    monkeypatch.setattr("evident.commands.serve.os.execve", execve)
    monkeypatch.setattr("evident.commands.serve.os.chdir", lambda path: None)
    config = tmp_path / "evident.toml"
    config.write_text('[server]\ndatabase = "postgresql://evident@db:5432/threads"\n', encoding="utf-8")
    served = CliRunner().invoke(app, ["serve", "--config", str(config), "--json", "--port", "0"])
    assert served.exit_code == 0, served.output
    assert started[-1][-1] == "postgresql://evident@db:5432/threads" and "aegra_api.main:app" in started[-1]
    info = json.loads(served.stdout.splitlines()[0])
    assert info["server"] == "aegra" and info["replicas_share_runs"] is False
    assert "postgresql://" not in served.output  # a database URL may hold a password: never printed


# -- the extra routes ------------------------------------------------------------------------------------


def test_health_and_version_routes(examples: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from evident.web.app import app

    monkeypatch.setenv("EVIDENT_CORPUS", str(examples))
    # The block runs the lifespan: the index is opened before any request.
    with TestClient(app, base_url="http://127.0.0.1:2024", client=("127.0.0.1", 50000)) as client:
        health = client.get("/health")
        assert health.status_code == 200
        assert health.json()["retriever"]["ready"] is True and health.json()["mode"] == "offline"
        assert client.get("/version").json()["packages"]["langsmith"]


def test_health_says_what_is_wrong(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from evident.web.app import app

    monkeypatch.setenv("EVIDENT_CORPUS", str(tmp_path / "missing"))
    with TestClient(app, base_url="http://127.0.0.1:2024", client=("127.0.0.1", 50000)) as client:
        health = client.get("/health")
        assert health.status_code == 503 and health.json()["retriever"]["ready"] is False
        monkeypatch.setenv("EVIDENT_THRESHOLD", "2")
        broken = client.get("/health")
        assert broken.status_code == 503 and "threshold" in broken.json()["error"]


def test_mcp_serves_the_tool_while_the_app_runs(examples: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from evident.web.app import app

    monkeypatch.setenv("EVIDENT_CORPUS", str(examples))
    headers = {"Accept": "application/json, text/event-stream"}
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "evident_search", "arguments": {"query": "Who approves expense reports?"}}}
    outside = TestClient(app, base_url="http://127.0.0.1:2024", client=("127.0.0.1", 50000))
    assert outside.post("/mcp", json=call, headers=headers).status_code == 503  # no lifespan, no MCP server
    with TestClient(app, base_url="http://127.0.0.1:2024", client=("127.0.0.1", 50000)) as client:
        answered = client.post("/mcp", json=call, headers=headers)
        assert answered.status_code == 200, answered.text
        result = answered.json()["result"]
        assert result["structuredContent"]["status"] == "answered" and not result["isError"]
        assert result["structuredContent"]["evidence"] == "clear"  # a hedged answer would say "weak"
        assert "Sources:" in result["content"][0]["text"]
        unknown = client.post("/mcp", json={**call, "params": {"name": "shell", "arguments": {}}}, headers=headers)
        assert unknown.json()["result"]["isError"] and "unknown tool 'shell'" in unknown.text
        empty = client.post("/mcp", json={**call, "params": {"name": "evident_search", "arguments": {}}},
                            headers=headers)
        assert empty.json()["result"]["isError"] and "invalid arguments: query" in empty.text


# -- a request's context on the server ---------------------------------------------------------------


def test_a_dict_context_keeps_the_deployment_settings(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The LangGraph server builds every run's context from a dict: the environment and evident.toml
    must still apply under what the request says."""
    config = tmp_path / "evident.toml"
    config.write_text('top_n = 3\nk = 5\n[model]\nname = "from-toml"\n', encoding="utf-8")
    monkeypatch.setenv("EVIDENT_CONFIG", str(config))
    monkeypatch.setenv("EVIDENT_K", "7")
    forget_file_defaults()
    try:
        ctx = ContextWithDefaults(top_n=2)
        assert (ctx.top_n, ctx.k, ctx.model) == (2, 7, "from-toml")  # request > environment > file
        assert isinstance(ctx, EvidentContext)
        with pytest.raises(ConfigError, match="threshold"):
            ContextWithDefaults(threshold=3)
    finally:
        forget_file_defaults()


# -- progress lines ---------------------------------------------------------------------------------------


def test_descriptions_of_steps() -> None:
    retrieve = summarize("retrieve", {"documents": [], "source_runs": [
        {"source": "wiki", "status": "empty", "documents": 0, "denied": 2, "latency_ms": 3.0}],
        "source_errors": [{"source": "docs", "kind": "timeout", "message": "slow"}], "timings_ms": {"retrieve": 4.0}})
    # The stream shows these lines to the caller: no count of hidden documents.
    assert describe("retrieve", retrieve) == "retrieve: 0 documents from 1 source, failed: docs [4 ms]"
    assert "denied" not in retrieve["sources"][0] and "acl_dropped" not in retrieve
    align = summarize("align", {"alignment": [{"action": "kept"}, {"action": "dropped"}], "verified": [1]})
    assert describe("align", align) == "align: 1 kept, 0 corrected, 0 truncated, 0 relinked, 1 dropped"
    assert describe("postprocess", summarize("postprocess", {"status": "insufficient", "citations": []})) == (
        "postprocess: insufficient, 0 citations")
    hedged = summarize("postprocess", {"status": "answered", "evidence": "weak", "citations": [{"url": "u"}]})
    assert describe("postprocess", hedged) == "postprocess: answered, 1 citation, weak evidence"
    assert progress("postprocess", hedged)["evidence"] == "weak"  # a label the custom stream may carry
    assert summarize("unknown-node", {"x": 1}) == {}
