"""`evident index` and `evident ask` over a folder that holds more than its pages once (issue 50, item 8):
real subprocesses, real files."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from tests.unit.test_loaders import pdf_bytes


def run(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([sys.executable, "-m", "evident.cli", *args], capture_output=True, text=True, timeout=180,
                          env={**os.environ, **env}, stdin=subprocess.DEVNULL)
    assert "Traceback" not in proc.stderr + proc.stdout, proc.stderr
    assert proc.returncode == 0, proc.stderr
    return proc


def test_index_once_warn_once_and_keep_library_chatter_off_the_terminal(tmp_path: Path) -> None:
    corpus = tmp_path / "manual"
    (corpus / "_sources").mkdir(parents=True)
    (corpus / "drafts").mkdir()
    (corpus / "backup.html").write_text("<html><head><title>Backups</title></head><body><h1>Backups</h1>"
                                        "<p>Backups run every night and are kept for thirty days.</p></body></html>")
    (corpus / "_sources" / "backup.rst.txt").write_text("Backups\n=======\n\nBackups run every night and are kept "
                                                       "for thirty days.\n")
    (corpus / "drafts" / "idea.md").write_text("# Idea\n\nBackups every hour, one day.")
    (corpus / "cafe.txt").write_bytes("Le caf\u00e9 ouvre \u00e0 huit heures.".encode("latin-1"))
    (corpus / "image.txt").write_bytes(b"\x89PNG\x00\x00")
    # A PDF whose startxref pointer is off by three: pypdf reads it and logs its own warnings.
    pdf = pdf_bytes(["Remote work is allowed two days a week"])
    (corpus / "remote.pdf").write_bytes(
        re.sub(rb"startxref\n(\d+)", lambda m: b"startxref\n" + str(int(m.group(1)) + 3).encode(), pdf))
    log = tmp_path / "evident.log"
    env = {"EVIDENT_INDEX_DIR": str(tmp_path / "indexes"), "EVIDENT_LOG_FILE": str(log), "EVIDENT_EMBEDDINGS": "none",
           "EVIDENT_MODE": "offline"}

    indexed = run("index", str(corpus), "--index", str(tmp_path / "other.sqlite3"), "--exclude", "drafts", "--json",
                  env=env)
    out = json.loads(indexed.stdout)
    # backup.html, cafe.txt, remote.pdf; image.txt skipped, and the page's source, which `--exclude drafts`
    # (in place of the default _sources, _static) leaves in the walk, recognised as a copy of the page.
    assert (out["documents"], out["skipped"]) == (3, 2), indexed.stderr
    assert "image.txt: binary file" in indexed.stderr
    assert "backup.rst.txt: the same page as backup.html, in another format" in indexed.stderr
    assert "startxref" not in indexed.stderr  # pypdf's own words go to the log
    assert "incorrect startxref pointer" in log.read_text(encoding="utf-8")

    # The default settings (as `ask` reads them): drafts indexed, _sources left out; warned at indexing.
    indexed = run("index", str(corpus), "--json", env=env)
    assert (json.loads(indexed.stdout)["documents"], indexed.stderr.count("skipped")) == (4, 1)
    for question in ("When does the café open?", "How long are backups kept?"):
        asked = run("ask", "--corpus", str(corpus), question, "--json", env=env)
        assert "skipped" not in asked.stderr  # warned at indexing, not on every question
        answer = json.loads(asked.stdout)
        urls = [c["url"] for c in answer["citations"]]
        assert all("_sources" not in url and "drafts" not in url for url in urls)
        if "backups" in question:
            assert len({c["quote"] for c in answer["citations"]}) == len(answer["citations"])  # each quote once
