"""deploy/: the files of the docker-compose deployment (docs/deployment.md), checked here without a Docker
engine (none runs on these machines): the compose file's roles and start order, the proxy's replicas
against the compose file's, and EvidenT's settings file read by the real `evident index` and `ask`.
nginx itself runs deploy/nginx.conf in tests/e2e/test_replicas.py."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.main import get_command

from evident.cli import app
from evident.settings import DeployedServerSettings
from tests.integration.test_cli import Q, no_traceback, run

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    loaded = yaml.safe_load((DEPLOY / "docker-compose.yml").read_text(encoding="utf-8"))
    assert isinstance(loaded, dict)
    return loaded


def replicas(compose: dict[str, Any]) -> list[str]:
    return sorted(name for name in compose["services"] if re.fullmatch(r"evident-\d+", name))


def image_command() -> list[str]:
    cmd = next(line for line in (DEPLOY / "Dockerfile").read_text(encoding="utf-8").splitlines()
               if line.startswith("CMD "))
    found = json.loads(cmd.removeprefix("CMD "))
    assert isinstance(found, list)
    return [str(part) for part in found]


def options_of(*command: str) -> set[str]:
    click_command: Any = get_command(app)
    for name in command:
        click_command = click_command.commands[name]
    return {opt for param in click_command.params for opt in (*param.opts, *param.secondary_opts)}


def test_migrations_run_once_before_the_replicas_which_start_one_after_the_other(compose: dict[str, Any]) -> None:
    services = compose["services"]
    assert services["migrate"]["command"] == ["evident", "serve", "--migrate-only"]
    assert services["migrate"]["restart"] == "no"
    names = replicas(compose)
    assert len(names) >= 2
    first, *others = names
    for name in names:
        assert "command" not in services[name]  # the image's command: a replica that does not migrate
        assert services[name]["restart"] == "unless-stopped"
    assert services[first]["depends_on"]["migrate"] == {"condition": "service_completed_successfully"}
    assert services[first]["depends_on"]["index"] == {"condition": "service_completed_successfully"}
    # Aegra 0.11's replicas race on a new database: each waits for the one before it.
    for before, name in zip(names, others, strict=False):
        assert services[name]["depends_on"] == {before: {"condition": "service_healthy"}}
    assert set(services["proxy"]["depends_on"]) == set(names)


def test_the_image_runs_a_replica_that_authenticates_and_never_migrates(compose: dict[str, Any]) -> None:
    command = image_command()
    assert command[:2] == ["evident", "serve"] and "--no-migrate" in command
    assert {arg for arg in command if arg.startswith("--")} <= options_of("serve")
    assert command[command.index("--host") + 1] == "0.0.0.0"  # refused at start without authentication
    assert set(compose["services"]["index"]["command"][2:]) - {"/etc/evident/evident.toml"} <= options_of("index")
    # Secrets travel in the environment, never on a command line that `ps` shows.
    for service in compose["services"].values():
        assert "postgresql://" not in shlex.join(service.get("command") or [])


def test_the_proxy_balances_over_exactly_the_compose_files_replicas(compose: dict[str, Any]) -> None:
    config = (DEPLOY / "nginx.conf").read_text(encoding="utf-8")
    upstream = re.findall(r"^\s*server (evident-\d+):2024", config, flags=re.M)
    assert sorted(upstream) == replicas(compose)
    for line in ("proxy_buffering off;", "proxy_set_header Host $host;", "client_max_body_size 1m;",
                 "proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;"):
        assert line in config
    # A run is never sent twice: nginx retries only what failed before a replica answered, and not a POST.
    assert "non_idempotent" not in config


def test_the_settings_file_indexes_and_answers_as_shipped(tmp_path: Path, examples: Path) -> None:
    shipped = (DEPLOY / "config" / "evident.toml").read_text(encoding="utf-8")
    assert '"/srv/corpus"' in shipped and '"/etc/evident/tokens.json"' in shipped
    config = tmp_path / "evident.toml"
    config.write_text(shipped.replace("/srv/corpus", str(examples))
                      .replace("/etc/evident/tokens.json", str(DEPLOY / "config" / "tokens.json")), encoding="utf-8")
    assert DeployedServerSettings.load(config).auth_configured
    env = {"EVIDENT_INDEX_DIR": str(tmp_path / "index")}
    indexed = run("index", "--config", str(config), env=env)
    no_traceback(indexed)
    assert indexed.returncode == 0, indexed.stderr
    asked = run("ask", Q, "--config", str(config), "--json", env=env)
    assert asked.returncode == 0, asked.stderr
    out = json.loads(asked.stdout)
    assert out["status"] == "answered" and out["citations"]
