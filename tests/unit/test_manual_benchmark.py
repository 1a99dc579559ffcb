"""benchmarks/manual.py: its question file, how it judges an answer, and how it checks the questions
against the manual's text (so the benchmark cannot rot silently when the manual changes)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.support.benchmarks import load_benchmark

manual = load_benchmark("manual")
CORPUS = Path("/cache/corpus")


def _result(answer: str, url: str = "git-gc.html", status: str = "answered", evidence: str = "clear") -> dict[str, Any]:
    full = f"file:///cache/corpus/{url}"
    return {"status": status, "evidence": evidence, "answer": f"{answer} [{full}]", "citations": [{"url": full}]}


QUESTION = {"id": "q", "question": "?", "answerable": True, "fact": [r"6700"],
            "page": ["git-gc.html", "git-config.html"]}
UNANSWERABLE = {"id": "u", "question": "?", "answerable": False, "absent": ["x"]}


def test_the_question_file_has_30_answerable_and_6_unanswerable_questions() -> None:
    questions = manual.load_questions()
    assert sum(q["answerable"] for q in questions) == 30
    assert sum(not q["answerable"] for q in questions) == 6
    for q in questions:
        assert all(p.endswith(".html") for p in q.get("page", []))


@pytest.mark.parametrize(("result", "outcome"), [
    (_result("The default value is 6700."), manual.RIGHT),
    (_result("The default value is 6700.", "git-config.html"), manual.RIGHT),
    (_result("The default value is 6700.", "git-repack.html"), manual.OTHER_PAGE),
    (_result("The default value is 50."), manual.MISLEADING),
    # Hedged is what the answer's `evidence` says, whatever its words (the fact may well be among them).
    (_result("The default value is 6700.", evidence="weak"), manual.HEDGED),
    ({"status": "insufficient", "answer": "Not sufficient information to answer.", "citations": []}, manual.REFUSED),
    ({"status": "error", "answer": "", "citations": []}, manual.ERROR),
])
def test_an_answer_is_judged_by_its_fact_and_its_first_page(result: dict[str, Any], outcome: str) -> None:
    assert manual.judge(QUESTION, result, CORPUS) == outcome


def test_a_fact_only_in_a_citation_mark_is_not_stated() -> None:
    question = {**QUESTION, "fact": [r"git-gc"]}
    assert manual.judge(question, _result("Runs housekeeping tasks."), CORPUS) == manual.MISLEADING


def test_an_unanswerable_question_is_right_only_when_refused_or_hedged() -> None:
    assert manual.judge(UNANSWERABLE, _result("The default value is 6700."), CORPUS) == manual.ANSWERED
    assert manual.judge(UNANSWERABLE, _result("The default value is 6700.", evidence="weak"), CORPUS) == manual.HEDGED
    refused = {"status": "insufficient", "answer": "Not sufficient information to answer.", "citations": []}
    assert manual.judge(UNANSWERABLE, refused, CORPUS) == manual.REFUSED


def _page(folder: Path, name: str, body: str) -> None:
    (folder / name).write_text(f"<html><head><title>{name}</title></head><body>{body}</body></html>",
                               encoding="utf-8")


def test_the_questions_are_checked_against_the_pages_text(tmp_path: Path) -> None:
    _page(tmp_path, "git-gc.html", "<dl><dt>gc.auto</dt><dd><p>The default\n value is 6700.</p></dd></dl>")
    _page(tmp_path, "git-config.html", "<p>The default value is 50.</p>")
    assert manual.check_questions([{**QUESTION, "page": ["git-gc.html"]}], tmp_path) == []
    problems = manual.check_questions([QUESTION, {**UNANSWERABLE, "absent": [r"value is \d+"]},
                                       {**QUESTION, "id": "gone", "page": ["git-nope.html"]}], tmp_path)
    assert problems == [
        "q: git-config.html does not state ['6700']",
        "u: git-config.html matches ['value is \\\\d+']: the manual may answer it",
        "u: git-gc.html matches ['value is \\\\d+']: the manual may answer it",
        "gone: no page git-nope.html in the manual",
    ]


@pytest.mark.parametrize("line", [
    {"id": "a", "question": "?", "answerable": True, "fact": ["x"]},  # no page
    {"id": "a", "question": "?", "answerable": True, "page": "p.html"},  # no fact
    {"id": "a", "question": "?", "answerable": False},  # nothing to check absent
    {"question": "?", "answerable": True, "fact": ["x"], "page": "p.html"},  # no id
])
def test_a_malformed_question_is_named(tmp_path: Path, line: dict[str, Any]) -> None:
    path = tmp_path / "q.jsonl"
    path.write_text(json.dumps(line) + "\n", encoding="utf-8")
    with pytest.raises(manual.QuestionError, match="q.jsonl:1"):
        manual.load_questions(path)


def test_a_missing_manual_says_what_to_install_when_not_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(manual.os, "geteuid", lambda: 1000)
    with pytest.raises(SystemExit, match="apt-get install git-doc"):
        manual.ensure_manual(tmp_path / "nowhere")
    with pytest.raises(SystemExit, match="apt-get install postgresql-doc-15"):
        manual.ensure_manual(tmp_path / "nowhere", manual.MANUALS["postgresql"][0])


def test_the_second_manual_has_its_own_well_formed_questions() -> None:
    package, _, path, _ = manual.MANUALS["postgresql"]
    questions = manual.load_questions(path)
    assert package == "postgresql-doc-15"
    assert (sum(q["answerable"] for q in questions), sum(not q["answerable"] for q in questions)) == (17, 4)
