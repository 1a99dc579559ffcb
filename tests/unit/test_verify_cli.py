"""`evident verify`: decisions as a table or JSON, one-line errors with exit code 2 on bad input."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from evident.cli import app
from evident.commands.verify import run

REFUND_PAGE = (
    "# Refunds &amp; credits\r\n\r\n"
    "Refunds are issued within 10\u00a0days of the request being received by our billing team. "
    "Customers on the Annual plan may also ask for service credits instead.\r\n\r\n"
    "| Plan | Refund window |\r\n|---|---|\r\n| Annual | 30 days |\r\n| Monthly | none |\r\n"
)
SLA_PAGE = (
    "<h1>Service level agreement</h1>\n<p>The SLA guarantees 99.9% uptime per calendar month for all "
    "paid plans, excluding scheduled maintenance windows announced in advance.</p>"
)
DOCS = [
    {"url": "https://docs.example.com/billing/refunds", "content": REFUND_PAGE},
    {"url": "https://docs.example.com/sla", "text": SLA_PAGE},  # `text` is accepted for `content`
]
PASSAGES = [
    {"passage_id": "p1", "url": DOCS[0]["url"],
     "content": "Refunds are issued within 10 days of the request being received by our billing team."},
    {"passage_id": 2, "url": DOCS[0]["url"],
     "content": "Refunds are issued within 10 days of the request being received by our billing team, "
                "and every customer gets a complimentary hamper with each refund they request."},
    {"passage_id": "p3", "url": DOCS[0]["url"],
     "content": "The SLA guarantees 99.9% uptime per calendar month for all paid plans."},
    {"passage_id": "p4", "url": DOCS[0]["url"], "content": "Refunds are issued within 14 days."},
    {"passage_id": "p5", "url": DOCS[0]["url"],
     "content": "Refunds are issued within 14 days of the request being received by our billing team."},
]
EXPECTED_ACTIONS = ["kept", "truncated", "relinked", "dropped", "corrected"]
DECISION_KEYS = {"passage_id", "action", "url", "original_url", "overlap", "final_overlap", "spans",
                 "quote", "substitutions", "reason", "content", "heading_path"}


def write_jsonl(path: Path, rows: list[object], *, blank_lines: bool = False) -> Path:
    lines = [json.dumps(r, ensure_ascii=False) for r in rows]
    if blank_lines:
        lines = ["", *[x for line in lines for x in (line, "   ")]]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.fixture()
def files(tmp_path: Path) -> tuple[Path, Path]:
    return (write_jsonl(tmp_path / "docs.jsonl", DOCS),
            write_jsonl(tmp_path / "passages.jsonl", PASSAGES, blank_lines=True))


runner = CliRunner()


def invoke(*args: str):  # type: ignore[no-untyped-def]
    return runner.invoke(app, ["verify", *args])


def stderr_of(result) -> str:  # type: ignore[no-untyped-def]
    # Click >= 8.2 keeps stderr apart; older versions mix it into output.
    try:
        return result.stderr
    except ValueError:
        return result.output


# --- happy path ---------------------------------------------------------------------------------


def test_json_output_shape_and_decisions(files: tuple[Path, Path]) -> None:
    docs, passages = files
    result = invoke("--docs", str(docs), "--passages", str(passages), "--json")
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert list(payload) == ["decisions"]
    decisions = payload["decisions"]
    assert [d["passage_id"] for d in decisions] == ["p1", "2", "p3", "p4", "p5"]
    assert [d["action"] for d in decisions] == EXPECTED_ACTIONS
    for d in decisions:
        assert set(d) == DECISION_KEYS
        text = {doc["url"]: doc.get("content", doc.get("text")) for doc in DOCS}.get(d["url"], "")
        assert all(isinstance(s, list) and len(s) == 2 for s in d["spans"])
        if d["action"] != "dropped":
            assert d["quote"] == " … ".join(text[s:e] for s, e in d["spans"])
    kept, truncated, relinked, dropped, corrected = decisions
    assert kept["quote"] == "Refunds are issued within 10\u00a0days of the request being received by our billing team."
    assert "hamper" not in truncated["quote"] and truncated["quote"].endswith("billing team")
    assert relinked["url"] == DOCS[1]["url"] and relinked["original_url"] == DOCS[0]["url"]
    assert dropped["url"] == "" and dropped["spans"] == [] and dropped["quote"] == ""
    # The quote is the source's text; the decision says what the passage had instead.
    assert corrected["quote"] == kept["quote"]
    assert corrected["substitutions"] == [{"passage": "14", "source": "10"}]
    assert all(d["substitutions"] == [] for d in (kept, truncated, relinked, dropped))


def test_table_output(files: tuple[Path, Path]) -> None:
    docs, passages = files
    result = runner.invoke(app, ["verify", "--docs", str(docs), "--passages", str(passages)],
                           env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    out = result.stdout
    for word in ("passage", "action", "overlap", "p1", "kept", "corrected", "truncated", "relinked", "dropped"):
        assert word in out
    assert "passage: 14 → source: 10" in out
    assert "5 passages: 1 kept, 1 corrected, 1 truncated, 1 relinked, 1 dropped" in out


def test_options_reach_the_aligner(files: tuple[Path, Path], tmp_path: Path) -> None:
    docs, _ = files
    # Shares a fragment with the cited page, exists whole on the SLA page: relinked by default,
    # truncated under the paper's rule (search only at overlap 0).
    passage = {"passage_id": "d", "url": DOCS[0]["url"],
               "content": "Refunds are issued within 10 days. The SLA guarantees 99.9% uptime per calendar "
                          "month for all paid plans, excluding scheduled maintenance windows announced in advance."}
    passages = write_jsonl(tmp_path / "drift.jsonl", [passage])
    actions = {}
    for mode in ("extended", "paper"):
        result = invoke("--docs", str(docs), "--passages", str(passages), "--drift", mode, "--json")
        assert result.exit_code == 0, result.output
        actions[mode] = json.loads(result.stdout)["decisions"][0]["action"]
    assert actions == {"extended": "relinked", "paper": "truncated"}
    # --threshold 1.0: nothing is above the threshold, so even a verbatim passage is truncated.
    result = invoke("--docs", str(docs), "--passages", str(files[1]), "--threshold", "1", "--json")
    assert json.loads(result.stdout)["decisions"][0]["action"] == "truncated"
    # --n 1 makes single words count: the invented tail of passage 2 still cannot reach the quote.
    result = invoke("--docs", str(docs), "--passages", str(files[1]), "--n", "1", "--json")
    assert "hamper" not in json.loads(result.stdout)["decisions"][1]["quote"]


def test_run_returns_exit_code(files: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    docs, passages = files
    assert run(docs, passages, n=5, threshold=0.7, drift="extended", json_out=True) == 0
    assert json.loads(capsys.readouterr().out)["decisions"][0]["action"] == "kept"


# --- bad input: one line on stderr, exit 2 ------------------------------------------------------


def _bad_files(tmp_path: Path) -> dict[str, tuple[list[str], str]]:
    """name -> (arguments after --docs D --passages P replacement, expected stderr line)."""
    good_docs = write_jsonl(tmp_path / "docs.jsonl", DOCS)
    good_passages = write_jsonl(tmp_path / "passages.jsonl", PASSAGES)
    d, p = str(good_docs), str(good_passages)

    def f(name: str, text: str | bytes) -> str:
        path = tmp_path / name
        if isinstance(text, bytes):
            path.write_bytes(text)
        else:
            path.write_text(text, encoding="utf-8")
        return str(path)

    ok_line = json.dumps(PASSAGES[0])
    return {
        "missing file": (["--docs", str(tmp_path / "nope.jsonl"), "--passages", p],
                         f"evident verify: {tmp_path / 'nope.jsonl'}: no such file"),
        "directory": (["--docs", d, "--passages", str(tmp_path)],
                      f"evident verify: {tmp_path}: is a directory, expected a JSONL file"),
        "invalid json": (["--docs", d, "--passages", f("p1.jsonl", f"{ok_line}\n\n{{\"passage_id\": \n")],
                         f"evident verify: {tmp_path / 'p1.jsonl'}:3: invalid JSON: Expecting value (column 16)"),
        "not an object": (["--docs", f("d1.jsonl", '["https://x", "text"]\n'), "--passages", p],
                          f"evident verify: {tmp_path / 'd1.jsonl'}:1: expected a JSON object, got an array"),
        "missing url": (["--docs", d, "--passages",
                         f("p2.jsonl", f'{ok_line}\n{ok_line}\n{{"passage_id": "x", "content": "y"}}\n')],
                        f'evident verify: {tmp_path / "p2.jsonl"}:3: missing field "url"'),
        "missing content": (["--docs", f("d2.jsonl", '{"url": "https://x"}\n'), "--passages", p],
                            f'evident verify: {tmp_path / "d2.jsonl"}:1: missing field "content" (or "text")'),
        "wrong type": (["--docs", d, "--passages", f("p3.jsonl", '{"passage_id": "a", "url": "u", "content": 5}\n')],
                       f'evident verify: {tmp_path / "p3.jsonl"}:1: field "content" must be a string, got a number'),
        "empty docs": (["--docs", f("d3.jsonl", ""), "--passages", p],
                       f"evident verify: {tmp_path / 'd3.jsonl'}: no documents (the file is empty)"),
        "blank passages": (["--docs", d, "--passages", f("p4.jsonl", "\n  \n")],
                           f"evident verify: {tmp_path / 'p4.jsonl'}: no passages (the file is empty)"),
        "not utf-8": (["--docs", f("d4.jsonl", b'{"url": "u", "content": "caf\xe9"}\n'), "--passages", p],
                      f"evident verify: {tmp_path / 'd4.jsonl'}:1: not valid UTF-8"),
        "n < 1": (["--docs", d, "--passages", p, "--n", "0"],
                  "evident verify: --n must be at least 1 (got 0)"),
        "threshold > 1": (["--docs", d, "--passages", p, "--threshold", "1.5"],
                          "evident verify: --threshold must be within [0, 1] (got 1.5)"),
        "threshold < 0": (["--docs", d, "--passages", p, "--threshold", "-0.1"],
                          "evident verify: --threshold must be within [0, 1] (got -0.1)"),
        "drift": (["--docs", d, "--passages", p, "--drift", "sideways"],
                  "evident verify: --drift must be 'extended' or 'paper' (got 'sideways')"),
    }


BAD_CASES = ["missing file", "directory", "invalid json", "not an object", "missing url", "missing content",
             "wrong type", "empty docs", "blank passages", "not utf-8", "n < 1", "threshold > 1",
             "threshold < 0", "drift"]


@pytest.mark.parametrize("case", BAD_CASES)
def test_bad_input_is_one_line_and_exit_2(case: str, tmp_path: Path) -> None:
    args, expected = _bad_files(tmp_path)[case]
    result = invoke(*args, "--json")
    assert result.exit_code == 2, (result.output, result.exception)
    assert result.exception is None or isinstance(result.exception, SystemExit)
    # --json: stdout is the error as one JSON object, the line for people is on stderr.
    assert json.loads(result.stdout) == {"command": "verify", "status": "error",
                                         "error": expected.removeprefix("evident verify: ")}
    assert stderr_of(result).splitlines() == [expected]


def test_bom_and_integer_ids_are_accepted(tmp_path: Path) -> None:
    docs = tmp_path / "docs.jsonl"
    docs.write_bytes(b"\xef\xbb\xbf" + json.dumps(DOCS[0]).encode() + b"\r\n")
    passages = write_jsonl(tmp_path / "p.jsonl", [{"passage_id": 7, "url": DOCS[0]["url"],
                                                    "passage": PASSAGES[0]["content"]}])
    result = invoke("--docs", str(docs), "--passages", str(passages), "--json")
    assert result.exit_code == 0, result.output
    [d] = json.loads(result.stdout)["decisions"]
    assert (d["passage_id"], d["action"]) == ("7", "kept")


# --- a real process -----------------------------------------------------------------------------


def _subprocess(*args: str, code: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONIOENCODING": "utf-8", "COLUMNS": "200"}
    cmd = [sys.executable, "-c", code, *args] if code else [sys.executable, "-m", "evident.cli", *args]
    return subprocess.run(cmd, capture_output=True, text=True, encoding="utf-8", env=env, timeout=60)


def test_real_process_json_errors_and_no_langchain(files: tuple[Path, Path], tmp_path: Path) -> None:
    docs, passages = files
    ok = _subprocess("verify", "--docs", str(docs), "--passages", str(passages), "--json")
    assert ok.returncode == 0, ok.stderr
    assert [d["action"] for d in json.loads(ok.stdout)["decisions"]] == EXPECTED_ACTIONS
    assert ok.stderr == ""

    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(PASSAGES[0]) + '\n{"passage_id": "x", "content": "y"}\n', encoding="utf-8")
    err = _subprocess("verify", "--docs", str(docs), "--passages", str(bad))
    assert err.returncode == 2
    assert err.stdout == ""
    assert err.stderr.splitlines() == [f'evident verify: {bad}:2: missing field "url"']
    assert "Traceback" not in err.stderr

    # Running the command (table output) must not import LangChain or LangGraph.
    probe = (
        "import sys\n"
        "from evident.commands.verify import run\n"
        "code = run(sys.argv[1], sys.argv[2])\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('langchain_core', 'langgraph', 'langchain'))\n"
        "print('HEAVY', heavy, 'CODE', code)\n"
    )
    res = _subprocess(str(docs), str(passages), code=probe)
    assert res.returncode == 0, res.stderr
    assert "HEAVY [] CODE 0" in res.stdout
    assert "relinked" in res.stdout
