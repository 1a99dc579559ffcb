"""What a corpus folder holds is indexed once: `exclude` globs, a page's other formats, text in another
encoding, and a skipped file warned about once."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from evident.connectors.index.corpus import CorpusLimits
from evident.connectors.index.embedded import LocalIndex
from evident.connectors.index.excluded import Exclusions, same_page_key
from evident.connectors.index.loaders import corpus_files, load_corpus
from evident.context import EvidentContext
from evident.settings import ConfigError

PAGE_TEXT = ("Backups run every night at two. A backup is kept for thirty days, then deleted. "
             "To restore a file, open a ticket with the storage team and name the file and the day.")


class Skips(list[tuple[str, str]]):
    def __call__(self, path: Path, reason: str) -> None:
        self.append((path.name, reason))


def files(root: Path, **limits: object) -> list[str]:
    return [f.relative_to(root).as_posix() for f in corpus_files(root, limits=CorpusLimits(**limits))]


def sphinx_build(root: Path) -> None:
    """The layout of a Sphinx HTML build: each page, its source under _sources/, static files."""
    (root / "_sources" / "guide").mkdir(parents=True)
    (root / "_static").mkdir()
    (root / "guide").mkdir()
    (root / "guide" / "backup.html").write_text(
        f"<html><head><title>Backups</title></head><body><h1>Backups</h1><p>{PAGE_TEXT}</p></body></html>")
    (root / "_sources" / "guide" / "backup.rst.txt").write_text(f"Backups\n=======\n\n{PAGE_TEXT}\n")
    (root / "_static" / "notes.txt").write_text("theme notes, not documentation")
    (root / "index.html").write_text("<html><body><h1>Manual</h1><p>Start here.</p></body></html>")


def test_a_sphinx_builds_sources_and_static_files_are_left_out_by_default(tmp_path: Path) -> None:
    sphinx_build(tmp_path)
    assert files(tmp_path) == ["guide/backup.html", "index.html"]
    assert files(tmp_path, exclude=()) == [
        "_sources/guide/backup.rst.txt", "_static/notes.txt", "guide/backup.html", "index.html"]
    assert EvidentContext().exclude == ["_sources", "_static"]


def test_exclude_globs(tmp_path: Path) -> None:
    for name in ("a/drafts/x.md", "a/keep.md", "b/old.txt", "b/new.md", "drafts.md", "c/d/e/deep.html"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("text")
    assert files(tmp_path, exclude=("drafts",)) == ["a/keep.md", "b/new.md", "b/old.txt", "c/d/e/deep.html",
                                                    "drafts.md"]
    assert files(tmp_path, exclude=("*.txt", "drafts.*")) == ["a/drafts/x.md", "a/keep.md", "b/new.md",
                                                              "c/d/e/deep.html"]
    assert files(tmp_path, exclude=("c/**/*.html", "a/*")) == ["b/new.md", "b/old.txt", "drafts.md"]
    assert files(tmp_path, exclude=("**/keep.md", "b/[!n]*")) == ["a/drafts/x.md", "b/new.md", "c/d/e/deep.html",
                                                                  "drafts.md"]
    assert Exclusions(["_sources/"]).matches(("x", "_sources")) and not Exclusions(["_sources"]).matches(("y",))


def test_the_setting_and_the_command_line_option(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "evident.toml").write_text('exclude = ["drafts"]\nfallback_encoding = "latin-1"\n')
    settings = EvidentContext.from_env(tmp_path / "evident.toml")
    assert settings.exclude == ["drafts"] and settings.fallback_encoding == "iso8859-1"
    limits = CorpusLimits.from_settings(settings)
    assert limits.exclude == ("drafts",) and limits.fallback_encoding == "iso8859-1"
    for bad in ("no-such-codec", "base64"):
        with pytest.raises(ConfigError, match="fallback_encoding"):
            EvidentContext.from_env(None, fallback_encoding=bad)


def test_a_page_and_its_source_are_one_document(tmp_path: Path) -> None:
    sphinx_build(tmp_path)
    (tmp_path / "guide" / "restore.html").write_text(f"<html><body><h1>Restore</h1><p>{PAGE_TEXT}</p></body></html>")
    (tmp_path / "guide" / "restore.md").write_text(f"# Restore\n\n*{PAGE_TEXT}*\n")
    # The same name, another page: both kept.
    (tmp_path / "guide" / "faq.html").write_text("<html><body><p>Questions people ask about the VPN.</p></body></html>")
    (tmp_path / "guide" / "faq.txt").write_text("Notes for the editors of the FAQ: update it every quarter.")
    skips = Skips()
    with LocalIndex(tmp_path / "i.sqlite3", limits=CorpusLimits(exclude=())) as index:
        index.refresh([tmp_path / "guide"], on_skip=skips)
        paths = sorted(doc.metadata["path"] for doc, _ in index.search("backup restore ticket FAQ VPN editors", 10))
    assert paths == ["backup.html", "faq.html", "faq.txt", "restore.html"]
    assert skips == [("restore.md", "the same page as restore.html, in another format")]
    # `_sources/x.rst.txt` beside `x.html` (the default exclude off): the rendered page is kept.
    skips = Skips()
    with LocalIndex(tmp_path / "j.sqlite3", limits=CorpusLimits(exclude=())) as index:
        index.refresh([tmp_path], on_skip=skips)
        assert index.get((tmp_path / "_sources" / "guide" / "backup.rst.txt").resolve().as_uri()) is None
    assert ("backup.rst.txt", "the same page as guide/backup.html, in another format") in skips
    # A corpus read without the index (a `postgres` source's refresh) reads the page once too.
    skips = Skips()
    loaded = sorted(doc.metadata["path"] for doc in load_corpus(tmp_path, on_skip=skips, limits=CorpusLimits(
        exclude=())))
    assert "_sources/guide/backup.rst.txt" not in loaded and "guide/backup.html" in loaded
    assert "guide/restore.md" not in loaded and {"guide/faq.html", "guide/faq.txt"} <= set(loaded)
    assert sorted(skips) == [("backup.rst.txt", "the same page as guide/backup.html, in another format"),
                             ("restore.md", "the same page as guide/restore.html, in another format")]
    assert same_page_key("_sources/guide/backup.rst.txt") == ("guide/backup", ".txt")
    assert same_page_key("guide/backup.html") == ("guide/backup", ".html")


def test_a_file_in_latin1_or_cp1252_is_read(tmp_path: Path) -> None:
    (tmp_path / "menu.txt").write_bytes("Caf\u00e9 cr\u00e8me \u2013 \u201cfresh\u201d daily \u20ac3".encode("cp1252"))
    (tmp_path / "odd.txt").write_bytes(b"byte \x81 undefined in cp1252, read as latin-1 reads it")
    (tmp_path / "legacy.html").write_bytes(
        '<html><head><meta charset="koi8-r"></head><body><p>\u041f\u0440\u0438\u0432\u0435\u0442</p></body></html>'
        .encode("koi8-r"))
    skips = Skips()
    docs = {doc.metadata["path"]: doc.content for doc in load_corpus(tmp_path, on_skip=skips)}
    assert skips == []
    assert docs["menu.txt"] == "Caf\u00e9 cr\u00e8me \u2013 \u201cfresh\u201d daily \u20ac3"
    assert docs["odd.txt"] == "byte \x81 undefined in cp1252, read as latin-1 reads it"
    assert docs["legacy.html"] == "\u041f\u0440\u0438\u0432\u0435\u0442"
    (tmp_path / "ru.txt").write_bytes("\u0421\u043a\u043b\u0430\u0434".encode("koi8-r"))
    koi8 = CorpusLimits(fallback_encoding="koi8-r")
    assert {d.metadata["path"]: d.content for d in load_corpus(tmp_path / "ru.txt", limits=koi8)} == {
        "ru.txt": "\u0421\u043a\u043b\u0430\u0434"}


def test_a_skipped_file_is_warned_about_once(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    corpus = tmp_path / "c"
    corpus.mkdir()
    (corpus / "good.md").write_text("# Good\n\nReadable text.")
    binary = corpus / "image.txt"
    binary.write_bytes(b"\x89PNG\x00\x00")
    (corpus / "empty.md").write_text("")
    runs: list[Skips] = []

    def refresh(**limits: object) -> None:
        skips = Skips()
        with LocalIndex(tmp_path / "i.sqlite3", limits=CorpusLimits(**limits)) as index:
            stats = index.refresh([corpus], on_skip=skips)
        assert stats.skipped == 2  # still counted as skipped
        runs.append(skips)

    with caplog.at_level(logging.INFO, logger="evident.connectors.index.skip_records"):
        refresh()
        refresh()  # every `evident ask` refreshes: nothing new to say
        refresh()
        os.utime(binary, ns=(1, 1))  # changed: looked at again
        refresh()
        refresh(max_file_bytes=10_000)  # other settings: looked at again
    assert [sorted(r) for r in runs] == [
        [("empty.md", "empty file"), ("image.txt", "binary file (contains NUL bytes)")], [], [],
        [("image.txt", "binary file (contains NUL bytes)")],
        [("empty.md", "empty file"), ("image.txt", "binary file (contains NUL bytes)")],
    ]
    assert "skipped" in caplog.text and "as at the last refresh" in caplog.text  # the log still has them
