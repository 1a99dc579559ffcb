"""`evident verify --answer`: an answer `evident ask --json` gave from a folder corpus, re-checked after the
cited file is edited on disk, made restricted, and deleted. Each run is its own process, as a user runs them:
the index is refreshed from the folder, and the cited document is read back by its id as the caller sees it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from evident.alignment import content_hash
from evident.connectors.index.embedded import LocalIndex

QUESTION = "How many days of paid vacation do employees receive?"
QUOTE = "Employees receive 30 days of paid vacation per calendar year."
LEAVE = f"# Leave policy\n\n{QUOTE} Unused days may be carried over until March 31.\n"
TRAVEL = "# Travel policy\n\nEconomy class is required for flights under six hours.\n"


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(("EVIDENT_", "OPENAI_", "LANGSMITH_"))}


def _cli(folder: Path, *args: str) -> tuple[int, dict[str, Any]]:
    done = subprocess.run([sys.executable, "-m", "evident.cli", *args, "--corpus", str(folder / "corpus"),
                           "--index", str(folder / "index.sqlite3"), "--json"],
                          capture_output=True, text=True, timeout=180, env=_env(), stdin=subprocess.DEVNULL)
    assert done.returncode in (0, 1), done.stderr
    return done.returncode, dict(json.loads(done.stdout))


def _edit(path: Path, text: str) -> None:
    before = path.stat().st_mtime_ns
    path.write_text(text, encoding="utf-8")
    # A later mtime even on a file system with coarse timestamps: the index notices a file by (mtime, size).
    os.utime(path, ns=(before + 2_000_000_000, before + 2_000_000_000))


@pytest.fixture
def answered(tmp_path: Path) -> tuple[Path, dict[str, Any]]:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "leave.md").write_text(LEAVE, encoding="utf-8")
    (corpus / "travel.md").write_text(TRAVEL, encoding="utf-8")
    code, answer = _cli(tmp_path, "ask", QUESTION)
    assert code == 0 and answer["status"] == "answered"
    (tmp_path / "answer.json").write_text(json.dumps(answer), encoding="utf-8")
    return tmp_path, answer


def _verify(folder: Path, *who: str) -> tuple[int, list[dict[str, Any]]]:
    code, out = _cli(folder, "verify", "--answer", str(folder / "answer.json"), *who)
    return code, out["checks"]


def test_each_outcome_after_real_edits_of_the_cited_file(answered: tuple[Path, dict[str, Any]]) -> None:
    folder, answer = answered
    leave = folder / "corpus" / "leave.md"
    [citation] = [c for c in answer["citations"] if c["url"].endswith("leave.md")]
    with LocalIndex(folder / "index.sqlite3", read_only=True) as index:
        indexed = index.get(citation["url"])
    assert indexed is not None
    body = indexed.content
    stat = leave.stat()
    assert citation["content_hash"] == content_hash(body) == indexed.content_hash
    assert citation["revision"] == f"mtime_ns={stat.st_mtime_ns};size={stat.st_size}"
    [(start, end)] = citation["spans"]
    assert body[start:end] == citation["quote"] and QUOTE in citation["quote"]

    code, [check] = _verify(folder)
    assert code == 0 and check["outcome"] == "unchanged" and check["spans_now"] == citation["spans"]

    _edit(leave, LEAVE.replace("# Leave policy\n\n", "# Leave policy\n\nRead this first.\n\n"))
    code, [check] = _verify(folder)
    assert code == 0 and check["outcome"] == "moved"
    with LocalIndex(folder / "index.sqlite3", read_only=True) as index:
        now = index.get(citation["url"])
    assert now is not None and now.content != body
    assert [now.content[s:e] for s, e in check["spans_now"]] == [citation["quote"]]
    assert check["spans_now"] != citation["spans"]
    assert check["revision_now"] != citation["revision"] and check["content_hash_now"] == content_hash(now.content)

    _edit(leave, LEAVE.replace("30 days", "25 days"))
    code, [check] = _verify(folder)
    assert code == 1 and check["outcome"] == "changed"
    assert check["nearest"] == citation["quote"].replace("30 days", "25 days")
    assert [(s["passage"], s["source"]) for s in check["substitutions"]] == [("30", "25")]

    leave.unlink()
    code, [check] = _verify(folder)
    assert code == 1 and check["outcome"] == "gone"


def test_a_file_made_restricted_reads_as_gone_to_whoever_may_no_longer_see_it(
        answered: tuple[Path, dict[str, Any]]) -> None:
    folder, _ = answered
    leave = folder / "corpus" / "leave.md"
    _edit(leave, "---\nacl: [group:hr]\n---\n" + LEAVE)
    anonymous = _verify(folder)
    outsider = _verify(folder, "--user", "bob", "--group", "staff")
    for code, [check] in (anonymous, outsider):
        assert code == 1 and check["outcome"] == "gone"
        # Exactly what a deleted document gives: nothing about the text now.
        assert (check["content_hash_now"], check["revision_now"], check["nearest"]) == ("", "", "")
    code, [check] = _verify(folder, "--user", "ann", "--group", "hr")
    assert code == 0 and check["outcome"] == "unchanged"


def test_bad_answers_are_clear_errors(tmp_path: Path) -> None:
    cases = {"not json": ("{", "invalid JSON"), "no citations": ("{}", 'no "citations" list'),
             "bad citation": ('{"citations": [{"url": "u"}]}', "citation 0: sentence: Field required")}
    for name, (text, message) in cases.items():
        path = tmp_path / f"{name}.json"
        path.write_text(text, encoding="utf-8")
        done = subprocess.run([sys.executable, "-m", "evident.cli", "verify", "--answer", str(path)],
                              capture_output=True, text=True, timeout=120, env=_env(), stdin=subprocess.DEVNULL)
        assert done.returncode == 2 and message in done.stderr and "Traceback" not in done.stderr, name
