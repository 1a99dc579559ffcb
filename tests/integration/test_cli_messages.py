"""What the command line says (issue 29, item 6): the port really served, where an answer comes from,
JSON for every error under `--json`, config errors that name the file, the key and the nearest valid
key, string batch ids, one span notation, help without stray type markers. Real subprocesses."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from evident.cli import app
from evident.connectors.index.embedded import default_index_path

Q = "How many days do I have to submit an expense report after a trip?"
EXAMPLES_NOTE = "answering from the bundled examples"


def run(*args: str, cwd: Path | None = None, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("EVIDENT_", "OPENAI_"))}
    return subprocess.run([sys.executable, "-m", "evident.cli", *args], capture_output=True, text=True,
                          timeout=timeout, env=env, stdin=subprocess.DEVNULL, cwd=cwd)


def clean(proc: subprocess.CompletedProcess[str]) -> None:
    assert "Traceback" not in proc.stderr + proc.stdout and "internal error" not in proc.stderr, proc.stderr


def json_error(proc: subprocess.CompletedProcess[str], command: str) -> str:
    """The error of a failed `--json` command: stdout is exactly one JSON error object."""
    clean(proc)
    assert proc.returncode != 0
    out = json.loads(proc.stdout)
    # A question the graph refused is answered in the `ask --json` shape, which has no "command".
    assert out["status"] == "error" and out.get("command", command) == command, out
    return str(out["error"])


@pytest.fixture(scope="module")
def index_file(tmp_path_factory: pytest.TempPathFactory, examples: Path) -> Path:
    # The examples' index where the session keeps it (tests/conftest.py's EVIDENT_INDEX_DIR), built with the
    # local model as a user's install builds it: embedding the examples costs ~30 s, so once per session,
    # whichever test of the session (here, or one marked `embeddings` that asks about the examples) is first.
    path = tmp_path_factory.getbasetemp() / "indexes" / default_index_path([examples]).name
    proc = run("index", str(examples), "--index", str(path))
    assert proc.returncode == 0, proc.stderr
    return path


# -- serve: the port -------------------------------------------------------------------------------


def test_serve_refuses_a_taken_port_clearly() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        human = run("serve", "--port", str(port), timeout=60)
        machine = run("serve", "--port", str(port), "--json", timeout=60)
    clean(human)
    assert human.returncode == 2 and human.stdout == ""
    assert f"port {port} on 127.0.0.1 is already in use" in human.stderr and "--port" in human.stderr
    assert f"port {port}" in json_error(machine, "serve")


def test_serve_port_0_prints_the_port_really_served(monkeypatch: pytest.MonkeyPatch) -> None:
    started: list[list[str]] = []

    def execve(path: str, argv: list[str], env: dict[str, str]) -> None:
        started.append(argv)
        raise SystemExit(0)

    monkeypatch.setattr("evident.commands.serve.os.execve", execve)
    monkeypatch.setattr("evident.commands.serve.os.chdir", lambda path: None)
    result = CliRunner().invoke(app, ["serve", "--port", "0", "--json"])
    assert result.exit_code == 0, result.output
    ((argv,),) = [started]
    port = int(argv[argv.index("--port") + 1])
    assert port > 0 and json.loads(result.stdout.splitlines()[0])["url"] == f"http://127.0.0.1:{port}"


# -- ask: where the answer comes from ----------------------------------------------------------------


def test_ask_without_corpus_says_it_answers_from_the_examples(index_file: Path, examples: Path,
                                                              tmp_path: Path) -> None:
    bundled = run("ask", Q, "--index", str(index_file), cwd=tmp_path)
    clean(bundled)
    assert bundled.returncode == 0, bundled.stderr
    (note,) = [line for line in bundled.stderr.splitlines() if EXAMPLES_NOTE in line]
    assert note.startswith("evident ask: ") and "--corpus" in note
    own = run("ask", Q, "--corpus", str(examples), "--index", str(index_file), "--json", cwd=tmp_path)
    assert own.returncode == 0 and EXAMPLES_NOTE not in own.stderr
    assert json.loads(own.stdout)["status"] == "answered"


# -- --json: errors are JSON too ---------------------------------------------------------------------


def test_model_check_json_without_a_model_prints_a_json_error(tmp_path: Path) -> None:
    error = json_error(run("model", "check", "--json", cwd=tmp_path), "model check")
    assert "no model is configured" in error


@pytest.mark.parametrize(
    ("args", "command", "needle"),
    [
        (["ask", "--json"], "ask", "missing QUESTION"),
        (["ask", "", "--json"], "ask", "the query is empty"),
        (["ask", "hi", "--corpus", "/definitely/not/here", "--json"], "ask", "does not exist"),
        (["ask", "hi", "--bogus", "--json"], "ask", "No such option: --bogus"),
        (["ask", "--json", "--corpus"], "evident", "requires an argument"),
        (["verify", "--json", "--docs", "/no/docs.jsonl", "--passages", "/no/p.jsonl"], "verify", "/no/docs.jsonl"),
        (["verify", "--json", "--n", "five", "--docs", "a", "--passages", "b"], "verify", "--n"),
        (["index", "/definitely/not/here", "--json"], "index", "no such file or directory"),
        (["eval", "--json", "--dataset", "/no/q.jsonl", "--method", "nope"], "eval", "unknown method"),
    ],
)
def test_bad_input_with_json_is_a_json_error(args: list[str], command: str, needle: str, tmp_path: Path) -> None:
    proc = run(*args, cwd=tmp_path)
    assert needle in json_error(proc, command)
    if "command" in json.loads(proc.stdout):
        assert needle in proc.stderr  # the line for people stays on stderr


# -- evident.toml: the file, the key, the nearest valid key ------------------------------------------


@pytest.mark.parametrize(
    ("toml", "key", "nearest"),
    [
        ("[retrieval]\ntop_nn = 3\n", "'top_nn' in [retrieval]", "top_n"),
        ("top_nn = 3\n", "'top_nn'", "top_n"),
        ("[retreival]\ntop_n = 3\n", "'retreival'", "retrieval"),
        ('[model]\nnmae = "x"\n', "'nmae' in [model]", "name"),
        ('[embeddings]\nprovidr = "none"\n', "'providr' in [embeddings]", "provider"),
        ("[offline]\nwindow_unit = 2\n", "'window_unit' in [offline]", "window_units"),
        ('[server]\ncors_origin = ["http://a.test"]\n', "'cors_origin' in [server]", "cors_origins"),
    ],
)
def test_a_misspelt_key_names_the_file_the_key_and_the_nearest_key(tmp_path: Path, toml: str, key: str,
                                                                  nearest: str) -> None:
    config = tmp_path / "evident.toml"
    config.write_text(toml, encoding="utf-8")
    command = "serve" if "[server]" in toml else "ask"
    args = ["serve", "--config", str(config)] if command == "serve" else ["ask", Q, "--config", str(config)]
    proc = run(*args, cwd=tmp_path)
    clean(proc)
    assert proc.returncode == 2
    assert f"evident {command}: {config}: unknown key {key}; did you mean {nearest!r}?" in proc.stderr
    assert f"did you mean {nearest!r}?" in json_error(run(*args, "--json", cwd=tmp_path), command)


def test_a_bad_value_names_where_it_was_written(tmp_path: Path) -> None:
    config = tmp_path / "evident.toml"
    config.write_text('[retrieval]\ntop_n = "many"\n', encoding="utf-8")
    proc = run("ask", Q, "--config", str(config), cwd=tmp_path)
    clean(proc)
    assert proc.returncode == 2 and f"{config}: invalid setting top_n" in proc.stderr


# -- batch ids, verify spans and reasons, help --------------------------------------------------------


def test_a_batch_line_without_id_gets_a_string_id(tmp_path: Path, index_file: Path, examples: Path) -> None:
    batch = tmp_path / "q.jsonl"
    batch.write_text(json.dumps({"query": Q}) + "\n" + json.dumps({"id": 7, "query": Q}) + "\n", encoding="utf-8")
    proc = run("ask", "--batch", str(batch), "--corpus", str(examples), "--index", str(index_file), "--json")
    clean(proc)
    first, second = (json.loads(line) for line in proc.stdout.splitlines())
    assert first["id"] == "1"  # its line number
    assert second["id"] == 7  # a given id is echoed as given, so that callers can match it


def test_verify_writes_spans_as_ask_does_and_shows_each_reason(tmp_path: Path) -> None:
    text = "Intro line. Expense reports must be submitted within 30 days of the end of a trip."
    docs, passages = tmp_path / "docs.jsonl", tmp_path / "passages.jsonl"
    docs.write_text(json.dumps({"url": "KB-1", "content": text}) + "\n", encoding="utf-8")
    passages.write_text(
        json.dumps({"passage_id": "p1", "url": "KB-1", "content": text[12:]}) + "\n"
        + json.dumps({"passage_id": "p2", "url": "KB-1", "content": "The moon is made of green cheese."}) + "\n",
        encoding="utf-8")
    proc = subprocess.run([sys.executable, "-m", "evident.cli", "verify", "--docs", str(docs), "--passages",
                           str(passages)], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "COLUMNS": "200"})
    clean(proc)
    assert proc.returncode == 0, proc.stderr
    assert f"[12:{len(text)}]" in proc.stdout and "–" not in proc.stdout
    assert "reason" in proc.stdout and "verbatim in the cited document" in proc.stdout
    assert "no retrieved document supports" in proc.stdout


@pytest.mark.parametrize("command", [[], ["ask"], ["verify"], ["index"], ["serve"], ["eval"], ["sources"],
                                     ["model", "check"]])
def test_help_has_no_stray_type_markers(command: list[str]) -> None:
    result = CliRunner().invoke(app, [*command, "--help"], env={"COLUMNS": "120"})
    assert result.exit_code == 0
    assert "<bool>" not in result.output, result.output
    options = [line for line in result.output.splitlines() if line.lstrip().startswith("--")]
    assert options and not [line for line in options if "list[" in line], result.output
    assert "--json" in result.output or not command
