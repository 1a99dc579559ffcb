"""`evident index` and `evident ask` against hostile corpora, damaged indexes and hostile queries
(issue 9, items 5 and 6): real subprocesses, real files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import unicodedata
from pathlib import Path

import pytest
from filelock import FileLock

from evident.connectors.index.embedded import LocalIndex

SECRET = "zebracorn-7731"
DOCS = {
    "leave.md": "---\nurl: KB-leave\n---\n# Leave policy\n\nEmployees receive 25 vacation days per year. "
    "Unused vacation days carry over until March.\n",
    "expenses.md": "---\nurl: https://wiki.example/expenses\n---\n# Expenses\n\nSubmit expense reports within 30 days "
    "of the trip. Receipts are required for every expense.\n",
}


def run(*args: str | bytes, timeout: float = 120, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "evident.cli", *args], capture_output=True, text=True, timeout=timeout,
        env=dict(os.environ), stdin=subprocess.DEVNULL, cwd=cwd, errors="surrogateescape",
    )


def clean(proc: subprocess.CompletedProcess[str]) -> None:
    assert "Traceback" not in proc.stderr + proc.stdout and "internal error" not in proc.stderr, proc.stderr


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    root = tmp_path / "corpus"
    root.mkdir()
    for name, text in DOCS.items():
        (root / name).write_text(text, encoding="utf-8")
    return root


def index_json(*args: str) -> dict[str, int]:
    proc = run("index", *args, "--json")
    clean(proc)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


# -- item 5: the corpus ------------------------------------------------------------------------------


def test_fifo_does_not_hang_index(corpus: Path, tmp_path: Path) -> None:
    os.mkfifo(corpus / "pipe.md")
    os.mkfifo(corpus / "pipe.txt")
    proc = run("index", str(corpus), "--index", str(tmp_path / "i.sqlite3"), timeout=60)
    clean(proc)
    assert proc.returncode == 0, proc.stderr
    assert "pipe.md: a named pipe, not a regular file (never opened)" in proc.stderr
    assert "2 documents" in proc.stdout


def test_link_to_a_secret_outside_the_corpus_is_neither_indexed_nor_cited(corpus: Path, tmp_path: Path) -> None:
    secret = tmp_path / "private" / "passwords.md"
    secret.parent.mkdir()
    secret.write_text(f"# Vault\n\nThe vault code word is {SECRET}.\n")
    os.symlink(secret, corpus / "vault.md")
    target = tmp_path / "i.sqlite3"
    stats = index_json(str(corpus), "--index", str(target))
    assert stats["documents"] == 2 and stats["skipped"] == 1
    proc = run("ask", f"What is the vault code word {SECRET}?", "--corpus", str(corpus), "--index", str(target),
               "--json")
    clean(proc)
    out = json.loads(proc.stdout)
    # The only places the word may appear: the question itself, and the same question as answered.
    assert out.pop("standalone_query") == out.pop("query")
    assert SECRET not in json.dumps(out) and "vault.md" not in json.dumps(out)
    followed = index_json(str(corpus), "--index", str(target), "--follow-symlinks")
    assert followed["documents"] == 3  # the owner may opt in


def test_oversized_file_is_skipped_with_a_warning(corpus: Path, tmp_path: Path) -> None:
    (corpus / "big.txt").write_text("padding words " * 200_000)  # 2.8 MB
    proc = run("index", str(corpus), "--index", str(tmp_path / "i.sqlite3"), "--max-file-mb", "1")
    clean(proc)
    assert proc.returncode == 0
    assert "big.txt: 2.8 MB is over the 1 MB limit per file (raise max_file_mb to index it)" in proc.stderr


def test_javascript_url_is_rejected_naming_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "docs.jsonl"
    path.write_text(json.dumps({"url": "KB-1", "text": "Fine text."}) + "\n"
                    + json.dumps({"url": "javascript:fetch('//evil')", "text": "Click me."}) + "\n")
    proc = run("index", str(path), "--index", str(tmp_path / "i.sqlite3"))
    clean(proc)
    assert proc.returncode == 2
    assert f"{path}:2: id \"javascript:fetch('//evil')\" has the scheme 'javascript'" in proc.stderr


def test_big_document_is_cited_by_section_with_spans_into_the_section(tmp_path: Path) -> None:
    chapters = [f"# Chapter {i}\n\n" + " ".join(f"Filler sentence {i}.{j} about routine matters." for j in range(60))
                + "\n\n" for i in range(30)]
    chapters[17] = ("# Chapter 17\n\nThe pelican budget is reviewed every April by the finance board.\n\n"
                    + chapters[17].split("\n\n", 1)[1])
    root = tmp_path / "big"
    root.mkdir()
    (root / "manual.md").write_text("---\nurl: https://wiki.example/manual\n---\n" + "".join(chapters))
    config = tmp_path / "evident.toml"
    config.write_text("section_chars = 4000\n")
    target = tmp_path / "i.sqlite3"
    proc = run("ask", "When is the pelican budget reviewed?", "--corpus", str(root), "--index", str(target),
               "--config", str(config), "--json")
    clean(proc)
    out = json.loads(proc.stdout)
    assert out["status"] == "answered", out
    cited = {c["url"] for c in out["citations"]}
    [url] = cited
    assert url.startswith("https://wiki.example/manual#section-")
    assert f"[{url}]" in out["answer"]
    with LocalIndex(target, read_only=True) as index:
        section = index.get(url)
        assert section is not None and len(section.content) <= 4000
        assert section.metadata["section_of"] == "https://wiki.example/manual"
        for c in out["citations"]:
            assert [section.content[s:e] for s, e in c["spans"]] and "pelican budget" in c["quote"]
            assert all(section.content[s:e] in c["quote"] for s, e in c["spans"])
        assert index.count() > 10


# -- item 5: the index -------------------------------------------------------------------------------


def test_damaged_tantivy_directory_is_rebuilt_and_the_query_answers(corpus: Path, tmp_path: Path) -> None:
    target = tmp_path / "i.sqlite3"
    index_json(str(corpus), "--index", str(target))
    for file in Path(f"{target}.tantivy").iterdir():
        if file.suffix in {".idx", ".term", ".store", ".fieldnorm", ".pos"}:
            with file.open("r+b") as handle:
                handle.write(b"\xde\xad\xbe\xef" * max(1, file.stat().st_size // 4))
    proc = run("ask", "How many vacation days do employees receive?", "--corpus", str(corpus),
               "--index", str(target), "--json")
    clean(proc)
    out = json.loads(proc.stdout)
    assert out["status"] == "answered" and {c["url"] for c in out["citations"]} == {"KB-leave"}
    assert "Tantivy index damaged, rebuilding it from SQLite" in proc.stderr
    marker = json.loads((Path(f"{target}.tantivy") / "evident-sync.json").read_text())
    assert marker["documents"] == 2  # rebuilt from SQLite


def test_damaged_sqlite_file_gets_a_rebuild_hint_and_rebuild_works(corpus: Path, tmp_path: Path) -> None:
    target = tmp_path / "i.sqlite3"
    index_json(str(corpus), "--index", str(target))
    with target.open("r+b") as handle:
        handle.write(b"this is not an sqlite header any more")
    proc = run("index", str(corpus), "--index", str(target))
    clean(proc)
    assert proc.returncode == 2
    assert "damaged" in proc.stderr and f"evident index --rebuild SOURCE... --index {target}" in proc.stderr
    asked = run("ask", "vacation days?", "--corpus", str(corpus), "--index", str(target))
    clean(asked)
    assert asked.returncode == 2 and "--rebuild" in asked.stderr
    stats = index_json(str(corpus), "--index", str(target), "--rebuild")
    assert stats["documents"] == 2 and stats["added"] == 2


def test_two_concurrent_index_runs_both_succeed(corpus: Path, tmp_path: Path) -> None:
    target = tmp_path / "i.sqlite3"
    logs = [tmp_path / f"run{i}.err" for i in range(2)]
    lock = FileLock(f"{target}.lock")
    lock.acquire()  # both runs must now wait for the lock, as for a long first run
    try:
        procs = []
        for log in logs:
            with log.open("w") as err:
                procs.append(subprocess.Popen(
                    [sys.executable, "-m", "evident.cli", "index", str(corpus), "--index", str(target), "--json"],
                    stdout=subprocess.PIPE, stderr=err, text=True, stdin=subprocess.DEVNULL))
        # Release only once both say they wait (bounded: a run that fails instead ends the loop).
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and all(p.poll() is None for p in procs):
            if all("another process is writing this index; waiting" in log.read_text() for log in logs):
                break
            time.sleep(0.1)
        waited = [log.read_text() for log in logs]
    finally:
        lock.release()
    outputs = [p.communicate(timeout=120)[0] for p in procs]
    for proc, stdout, log in zip(procs, outputs, logs, strict=True):
        assert proc.returncode == 0, log.read_text()
        assert "database is locked" not in log.read_text()
        assert json.loads(stdout)["documents"] == 2
    assert all("waiting up to" in text for text in waited)


def test_removed_corpus_path_is_an_error_and_the_old_index_is_kept(corpus: Path, tmp_path: Path) -> None:
    target = tmp_path / "i.sqlite3"
    other = tmp_path / "other"
    other.mkdir()
    (other / "a.md").write_text("---\nurl: KB-a\n---\n# A\n\nText of a.\n")
    index_json(str(corpus), str(other), "--index", str(target))
    for file in other.iterdir():
        file.unlink()
    other.rmdir()
    proc = run("index", str(corpus), str(other), "--index", str(target))
    clean(proc)
    assert proc.returncode == 2 and f"{other}: no such file or directory" in proc.stderr
    with LocalIndex(target, read_only=True) as index:
        assert index.count() == 3


def test_renamed_corpus_folder_does_not_empty_the_index(corpus: Path, tmp_path: Path) -> None:
    target = tmp_path / "i.sqlite3"
    index_json(str(corpus), "--index", str(target))
    renamed = corpus.rename(tmp_path / "handbook")
    stats = index_json(str(renamed), "--index", str(target))
    assert stats["documents"] == 2 and stats["added"] == 2 and stats["removed"] == 2


# -- item 6: queries and terminal output -------------------------------------------------------------


def test_invalid_utf8_query_is_a_clear_error(corpus: Path, tmp_path: Path) -> None:
    proc = run("ask", b"vacation \xff\xfe days", "--corpus", str(corpus), "--index", str(tmp_path / "i.sqlite3"),
               "--json")
    clean(proc)
    assert proc.returncode == 2 and json.loads(proc.stdout)["error"] == "the query is not valid UTF-8 text"
    assert "evident ask: the query is not valid UTF-8 text" in proc.stderr


def test_control_characters_in_a_query_give_clean_json(corpus: Path, tmp_path: Path) -> None:
    proc = run("ask", "How many vacation\x1b[31m days\x07 do\x01 employees\x9b receive?", "--corpus", str(corpus),
               "--index", str(tmp_path / "i.sqlite3"), "--json")
    clean(proc)
    out = json.loads(proc.stdout)
    assert out["query"] == "How many vacation days do employees receive?"
    assert out["status"] == "answered"


def test_batch_lines_with_bad_bytes_or_controls_give_one_valid_json_line_each(corpus: Path, tmp_path: Path) -> None:
    batch = tmp_path / "q.jsonl"
    batch.write_bytes(b'{"id": 1, "query": "vacation days\\u001b[2J per year?"}\n'
                      b'{"id": 2, "query": "vacation \xff days"}\n'
                      b'{"id": 3, "query": "bad \\udcff surrogate"}\n')
    proc = run("ask", "--batch", str(batch), "--corpus", str(corpus), "--index", str(tmp_path / "i.sqlite3"), "--json")
    clean(proc)
    lines = [json.loads(line) for line in proc.stdout.splitlines()]
    assert [line.get("id") for line in lines] == [1, None, 3]
    assert lines[0]["query"] == "vacation days per year?" and lines[0]["status"] == "answered"
    assert lines[1]["status"] == "error" and lines[1]["error"] == f"{batch}:2: not valid UTF-8 text"
    assert lines[2]["status"] == "error" and lines[2]["error"].endswith("the query is not valid UTF-8 text")


def test_escape_sequences_from_documents_never_reach_the_terminal(tmp_path: Path) -> None:
    path = tmp_path / "docs.jsonl"
    text = ("Employees receive \x1b[2J\x1b]0;pwned\x07 25 vacation days per year.\r"
            "Unused vacation days \x1b[1A carry over until March.")
    path.write_text(json.dumps({"url": "KB-esc", "title": "Leave \x1b[31mpolicy", "text": text}) + "\n")
    for extra in ([], ["--stream"]):
        proc = run("ask", "How many vacation days do employees receive?\x1b[5m", "--corpus", str(path),
                   "--index", str(tmp_path / "i.sqlite3"), *extra)
        clean(proc)
        assert proc.returncode == 0, proc.stderr
        assert "25 vacation days" in proc.stdout
        for output in (proc.stdout, proc.stderr):
            assert "\x1b" not in output and "\x07" not in output and "\r" not in output
        assert "\\x1b[2J" in proc.stdout  # shown, harmless


def _hidden_characters(output: str) -> list[str]:
    return [c for c in output if c not in "\n\t" and unicodedata.category(c) in {"Cc", "Cf", "Cs", "Co", "Cn"}]


def test_bidi_overrides_and_escapes_from_documents_are_shown_escaped(tmp_path: Path) -> None:
    corpus = tmp_path / "docs"
    corpus.mkdir()
    (corpus / "leave.md").write_text(
        "---\nurl: KB-rlo\ntitle: Leave \u202epolicy\x1b[31m\n---\n"
        "Employees receive \u202e25 vacation days\u202c per year.\x1b[2J Unused vacation days\u200b carry over.\n",
        encoding="utf-8")
    (corpus / "evil.md").write_text("---\nurl: KB-\u202eevil\x1b[5m\n---\nVacation days are unlimited.\n",
                                    encoding="utf-8")
    index = str(tmp_path / "i.sqlite3")
    question = "How many vacation days do employees receive?"
    for extra in ([], ["--stream"], ["--json"]):
        proc = run("ask", question, "--corpus", str(corpus), "--index", index, *extra)
        clean(proc)
        assert proc.returncode == 0, proc.stderr
        assert _hidden_characters(proc.stdout) == [] and _hidden_characters(proc.stderr) == []
        assert "\\u202e" in proc.stdout  # the answer quotes it
        # evil.md's id is named by the first ask, which indexes it (the skip is warned once).
        assert ("\\u202e" in proc.stderr) == (extra == [])
        if extra == ["--json"]:
            result = json.loads(proc.stdout)
            assert "\u202e25 vacation days" in result["answer"]  # the data is unchanged, only its spelling
    docs, passages = tmp_path / "d.jsonl", tmp_path / "p.jsonl"
    docs.write_text(json.dumps({"url": "KB-\u202erlo", "content": "Employees receive \u202e25 days\x1b[2J."}) + "\n")
    passages.write_text(json.dumps({"passage_id": "p\u2066", "url": "KB-\u202erlo",
                                    "content": "Employees receive \u202e25 days"}) + "\n")
    for extra in ([], ["--json"]):
        proc = run("verify", "--docs", str(docs), "--passages", str(passages), *extra)
        clean(proc)
        assert proc.returncode == 0, proc.stderr
        assert _hidden_characters(proc.stdout) == [] and "\\u202e" in proc.stdout


def test_url_claimed_by_two_files_is_a_one_line_error_and_the_index_is_kept(tmp_path: Path) -> None:
    corpus = tmp_path / "docs"
    (corpus / "restricted").mkdir(parents=True)
    (corpus / "restricted" / "salaries.md").write_text("---\nurl: https://wiki/salaries\n---\nThe salary bands.\n")
    index = str(tmp_path / "i.sqlite3")
    proc = run("index", str(corpus), "--index", index)
    assert proc.returncode == 0, proc.stderr
    (corpus / "public.md").write_text("---\nurl: https://wiki/salaries\n---\nAn impostor page about salaries.\n")
    for args in (["index", str(corpus), "--index", index],
                 ["ask", "What are the salary bands?", "--corpus", str(corpus), "--index", index]):
        proc = run(*args)
        clean(proc)
        assert proc.returncode != 0
        [line] = proc.stderr.strip().splitlines()
        assert "url https://wiki/salaries is also claimed by" in line
        assert str(corpus / "public.md") in line and "salaries.md" in line
        with LocalIndex(index, read_only=True) as kept:
            assert kept.count() == 1 and kept.get("https://wiki/salaries").content == "The salary bands.\n"  # type: ignore[union-attr]
