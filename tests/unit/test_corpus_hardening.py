"""A corpus folder cannot reach outside itself: links, special files, huge files, hostile ids, long documents."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from evident.alignment.models import SourceDocument
from evident.connectors.index.doc_ids import DocumentIdError, validate_document_id
from evident.connectors.index.embedded import LocalIndex
from evident.connectors.index.loaders import CorpusError, CorpusLimits, load_corpus
from evident.connectors.index.sections import split_sections

SECRET = "zebracorn-7731"


class Skips(list[tuple[str, str]]):
    def __call__(self, path: Path, reason: str) -> None:
        self.append((path.name, reason))


def load(path: Path, limits: CorpusLimits | None = None) -> tuple[list[SourceDocument], Skips]:
    skips = Skips()
    return list(load_corpus(path, on_skip=skips, limits=limits or CorpusLimits())), skips


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A folder next to the corpus holding a secret file and a secret folder."""
    folder = tmp_path / "outside"
    (folder / "private").mkdir(parents=True)
    (folder / "secret.md").write_text(f"# Secret\n\nThe code word is {SECRET}.\n")
    (folder / "private" / "also.md").write_text(f"# Also secret\n\nIt is {SECRET}.\n")
    return folder


@pytest.fixture
def corpus(tmp_path: Path, outside: Path) -> Path:
    root = tmp_path / "corpus"
    (root / "sub").mkdir(parents=True)
    (root / "public.md").write_text("# Public\n\nThe office opens at nine.\n")
    (root / "sub" / "inner.md").write_text("# Inner\n\nThe canteen closes at two.\n")
    os.symlink(outside / "secret.md", root / "leak.md")
    os.symlink(outside / "private", root / "linked-folder")
    os.symlink(root / "sub" / "inner.md", root / "alias.md")  # a link that stays inside
    return root


# -- links -------------------------------------------------------------------------------------------


def test_links_leaving_the_corpus_are_skipped_with_a_warning(corpus: Path) -> None:
    docs, skips = load(corpus)
    assert all(SECRET not in d.content for d in docs)
    reasons = dict(skips)
    assert "outside the corpus folder" in reasons["leak.md"] and "follow_symlinks" in reasons["leak.md"]
    assert "outside the corpus folder" in reasons["linked-folder"]
    # A link inside the folder is harmless: it is read (as the same document as its target).
    assert sorted(d.content.split("\n")[0] for d in docs) == ["# Inner", "# Public"]


def test_links_are_followed_only_when_asked(corpus: Path) -> None:
    docs, _ = load(corpus, CorpusLimits(follow_symlinks=True))
    texts = [d.content for d in docs if SECRET in d.content]
    assert len(texts) == 2  # the linked file and the file of the linked folder


def test_a_link_cycle_ends_when_following_links(tmp_path: Path) -> None:
    root = tmp_path / "loop"
    (root / "a").mkdir(parents=True)
    (root / "a" / "doc.md").write_text("# Doc\n\nText.\n")
    os.symlink(root, root / "a" / "back")
    docs, _ = load(root, CorpusLimits(follow_symlinks=True))
    assert [d.metadata["path"] for d in docs] == ["a/doc.md"]


def test_secret_behind_a_link_is_not_indexed_nor_found(corpus: Path, tmp_path: Path) -> None:
    with LocalIndex(tmp_path / "i.sqlite3") as index:
        index.refresh([corpus], on_skip=lambda *_: None)
        assert index.search(SECRET) == []
        assert all(SECRET not in doc.content for doc, _ in index.search("code word secret also"))


# -- special files and sizes ---------------------------------------------------------------------------


@pytest.mark.timeout(30)
def test_named_pipe_is_skipped_without_being_opened(tmp_path: Path) -> None:
    root = tmp_path / "c"
    root.mkdir()
    (root / "ok.md").write_text("# Ok\n\nFine.\n")
    os.mkfifo(root / "pipe.md")  # opening it for reading would block until a writer appears
    docs, skips = load(root)
    assert [d.metadata["path"] for d in docs] == ["ok.md"]
    assert skips == [("pipe.md", "a named pipe, not a regular file (never opened)")]


def test_oversized_file_is_skipped_with_a_warning_naming_it(tmp_path: Path) -> None:
    root = tmp_path / "c"
    root.mkdir()
    (root / "small.md").write_text("# Small\n\nShort text.\n")
    (root / "huge.md").write_text("# Huge\n\n" + "word " * 1000)
    docs, skips = load(root, CorpusLimits(max_file_bytes=2000))
    assert [d.metadata["path"] for d in docs] == ["small.md"]
    [(name, reason)] = skips
    assert name == "huge.md" and "over the 0.002 MB limit per file" in reason and "max_file_mb" in reason


def test_oversized_jsonl_line_is_skipped_and_the_rest_loaded(tmp_path: Path) -> None:
    path = tmp_path / "docs.jsonl"
    records = [{"url": "a", "text": "short"}, {"url": "b", "text": "x" * 5000}, {"url": "c", "text": "short too"}]
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    docs, skips = load(path, CorpusLimits(max_file_bytes=1000))
    assert [d.url for d in docs] == ["a", "c"]
    assert skips[0][0] == "docs.jsonl" and skips[0][1].startswith("line 2: ")


# -- document ids ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "doc_id",
    ["KB-1042", "hr/leave.md", "3f9a1c0e77d2-1200-2400", "urn:isbn:0451450523", "https://wiki.example/badges",
     "http://intranet/a?b=c#d", "Ürlaubsregeln-2024", "休暇/規程", "https://w/page#section-3"],
)
def test_plain_ids_paths_urns_and_web_urls_are_accepted(doc_id: str) -> None:
    assert validate_document_id(doc_id) == doc_id


@pytest.mark.parametrize(
    ("doc_id", "reason"),
    [("javascript:alert(1)", "scheme 'javascript'"), ("JavaScript:alert(1)", "scheme 'javascript'"),
     ("data:text/html,<b>x</b>", "scheme 'data'"), ("vbscript:msgbox", "scheme 'vbscript'"),
     ("file:///etc/passwd", "scheme 'file'"), ("KB 1042", "whitespace"), ("KB-1042\n", "whitespace"),
     ("a\x1b[31mb", "control"), ("a\u202eb", "control"), ("see[1]", "square bracket"), ("https:///x", "without a host"),
     ("urn:", "not a URN"), ("", "empty")],
)
def test_hostile_ids_are_rejected(doc_id: str, reason: str) -> None:
    with pytest.raises(DocumentIdError, match=reason.replace("[", r"\[")):
        validate_document_id(doc_id)


@pytest.mark.parametrize(
    ("doc_id", "reason"),
    [("//evil.test/x", "starts with '//'"), ("/\\evil.test/x", "starts with '/\\\\'"),
     ("\\\\host\\share", "starts with a backslash: a UNC path"), ("\\evil", "starts with a backslash"),
     ("https://user:pass@host/x", "userinfo"), ("https://wiki.example@evil.test/", "userinfo"),
     ("https://good&#64;evil.test/", "userinfo"), ("https://a\\b/x", "backslash"), ("https:\\\\evil.test", "backslash"),
     ("http://host/a&#92;b", "backslash"), ("jav&#x61;script:alert(1)", "decode to the scheme 'javascript'"),
     ("javascript&colon;alert(1)", "decode to the scheme 'javascript'"),
     ("&#106;avascript:x", "decode to the scheme 'javascript'"), ("jav&#x61script:x", "decode to the scheme"),
     ("jav&amp;#x61;script:x", "decode to the scheme 'javascript'"), ("java&#x09;script:x", "decode to the scheme"),
     ("javascript%3Aalert(1)", "decode to the scheme 'javascript'"), ("jav%61script:x", "decode to the scheme"),
     ("https&#58;//evil.test", "decode to the scheme 'https'")],
)
def test_ids_a_browser_or_renderer_reads_as_another_link_are_rejected(doc_id: str, reason: str) -> None:
    with pytest.raises(DocumentIdError, match=re.escape(reason)) as caught:
        validate_document_id(doc_id, allow_file=True)
    assert "\n" not in str(caught.value) and repr(doc_id) in str(caught.value)


@pytest.mark.parametrize(
    "doc_id",
    ["/docs/a", "R&D-handbook", "docs/r%C3%A9sum%C3%A9.md", "https://x/a?b=1&copy=2", "https://x/p?who=a@b",
     "https://evil.test#@good", "Q%26A", "docs/a%3Ab", "wiki\\page", "https://w/a%20b"],
)
def test_ids_with_ampersands_percent_escapes_and_at_signs_elsewhere_are_accepted(doc_id: str) -> None:
    assert validate_document_id(doc_id) == doc_id


def test_scheme_relative_id_in_jsonl_is_an_error_naming_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "docs.jsonl"
    path.write_text(json.dumps({"url": "KB-1", "text": "fine"}) + "\n"
                    + json.dumps({"url": "//evil.test/login", "text": "evil"}) + "\n")
    with pytest.raises(CorpusError) as caught:
        load(path)
    assert str(caught.value).startswith(f"{path}:2: id '//evil.test/login' starts with '//'")


def test_userinfo_and_entity_urls_in_front_matter_skip_their_files(tmp_path: Path) -> None:
    root = tmp_path / "c"
    root.mkdir()
    (root / "a.md").write_text("---\nurl: https://user:secret@wiki.example/a\n---\nText.\n")
    (root / "b.md").write_text("---\nurl: jav&#x61;script:alert(1)\n---\nText.\n")
    (root / "c.md").write_text("---\nurl: KB-7\n---\nText.\n")
    docs, skips = load(root)
    assert [d.url for d in docs] == ["KB-7"]
    assert [(name, reason.split(":")[0]) for name, reason in skips] == [("a.md", "line 2"), ("b.md", "line 2")]
    assert "userinfo" in skips[0][1] and "decode to the scheme 'javascript'" in skips[1][1]


def test_file_urls_are_accepted_for_folder_documents_only() -> None:
    assert validate_document_id("file:///srv/docs/a.md", allow_file=True) == "file:///srv/docs/a.md"


def test_javascript_url_in_jsonl_is_an_error_naming_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "docs.jsonl"
    path.write_text(json.dumps({"url": "KB-1", "text": "fine"}) + "\n"
                    + json.dumps({"url": "javascript:alert(document.cookie)", "text": "evil"}) + "\n")
    with pytest.raises(CorpusError) as caught:
        load(path)
    assert str(caught.value).startswith(f"{path}:2: id 'javascript:alert(document.cookie)' has the scheme 'javascript'")


def test_javascript_url_in_front_matter_skips_the_file_naming_the_line(tmp_path: Path) -> None:
    root = tmp_path / "c"
    root.mkdir()
    (root / "evil.md").write_text("---\ntitle: Evil\nurl: javascript:alert(1)\n---\n# Evil\n\nText.\n")
    (root / "good.md").write_text("---\nurl: KB-7\n---\n# Good\n\nText.\n")
    docs, skips = load(root)
    assert [d.url for d in docs] == ["KB-7"]
    assert skips == [("evil.md", "line 3: id 'javascript:alert(1)' has the scheme 'javascript'; allowed are "
                                 "http, https, urn, file or a plain id without a scheme")]


def test_bracket_id_in_jsonl_is_rejected(tmp_path: Path) -> None:
    path = tmp_path / "docs.jsonl"
    path.write_text(json.dumps({"url": "a]b", "text": "t"}) + "\n")
    with pytest.raises(CorpusError, match=r"docs.jsonl:1: .*square bracket"):
        load(path)


def test_html_canonical_javascript_link_falls_back_to_the_file_url(tmp_path: Path) -> None:
    root = tmp_path / "c"
    root.mkdir()
    (root / "page.html").write_text('<html><head><title>P</title><link rel="canonical" href="javascript:alert(1)">'
                                    "</head><body><p>Body text here.</p></body></html>")
    [doc], _ = load(root)
    assert doc.url == (root / "page.html").resolve().as_uri()


# -- sections ----------------------------------------------------------------------------------------


def long_markdown(chapters: int, words: int) -> str:
    parts = [f"# Chapter {i}\n\n" + " ".join(f"w{i}x{j}" for j in range(words)) + "\n\n" for i in range(chapters)]
    return "".join(parts)


def test_long_document_becomes_exact_slices_with_their_own_ids() -> None:
    text = long_markdown(12, 300)
    doc = SourceDocument(url="https://w/manual", title="Manual", content=text, metadata={"path": "m.md"})
    sections = split_sections(doc, 4000)
    assert len(sections) > 1 and all(len(s.content) <= 4000 for s in sections)
    assert [s.url for s in sections] == [f"https://w/manual#section-{i}" for i in range(1, len(sections) + 1)]
    assert "".join(s.content for s in sections) == text  # the slices cover the document, in order
    for s in sections:
        start = s.metadata["section_start"]
        assert text[start : start + len(s.content)] == s.content
        assert s.metadata["section_of"] == "https://w/manual" and s.metadata["path"] == "m.md"
        assert s.content.startswith("# Chapter")  # cut before headings when one is in reach
        assert s.title == "Manual"  # the page's name, not the heading the cut fell before


def test_short_document_is_left_whole() -> None:
    doc = SourceDocument(url="KB-1", content="short")
    assert split_sections(doc, 1000) == [doc]


def test_text_without_breaks_is_still_cut_within_budget() -> None:
    doc = SourceDocument(url="KB-1", content="x" * 10_500)
    sections = split_sections(doc, 1000)
    assert [len(s.content) for s in sections] == [1000] * 10 + [500]


def test_loader_sections_a_long_file(tmp_path: Path) -> None:
    root = tmp_path / "c"
    root.mkdir()
    (root / "manual.md").write_text("---\nurl: https://w/manual\n---\n" + long_markdown(10, 300))
    docs, _ = load(root, CorpusLimits(section_chars=5000))
    assert len(docs) > 1 and all(d.url.startswith("https://w/manual#section-") for d in docs)
