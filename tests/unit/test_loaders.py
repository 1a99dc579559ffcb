"""Corpus loaders on real files: front matter, HTML text, PDF, JSONL, folders and skips."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

import pytest

from evident.alignment.models import SourceDocument, content_hash
from evident.connectors.index.corpus import CorpusLimits
from evident.connectors.index.loaders import CorpusError, corpus_files, load_corpus


class Skips(list[tuple[str, str]]):
    """An `on_skip` handler that records (file name, reason)."""

    def __call__(self, path: Path, reason: str) -> None:
        self.append((path.name, reason))


def load(path: Path) -> tuple[list[SourceDocument], Skips]:
    skips = Skips()
    return list(load_corpus(path, on_skip=skips)), skips


def pdf_bytes(pages: list[str], title: str | None = None) -> bytes:
    """A minimal valid PDF written by hand: one Helvetica text line per page, correct xref offsets."""
    page_count = len(pages)
    # Objects: 1 catalog, 2 pages, 3 font, 4 info, then (page, content) pairs.
    kids = " ".join(f"{5 + 2 * i} 0 R" for i in range(page_count))
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        f"<< /Type /Pages /Kids [{kids}] /Count {page_count} >>".encode(),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
        f"<< /Title ({title}) >>".encode() if title else b"<< >>",
    ]
    for i, text in enumerate(pages):
        stream = f"BT /F1 12 Tf 72 720 Td ({text}) Tj ET".encode()
        objects.append(
            f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents {6 + 2 * i} 0 R"
            " /Resources << /Font << /F1 3 0 R >> >> >>".encode()
        )
        objects.append(b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream")
    out = b"%PDF-1.4\n"
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R /Info 4 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return out


# -- Markdown and text ---------------------------------------------------------------------------


def test_front_matter_gives_fields_and_body_is_exact_suffix(tmp_path: Path) -> None:
    raw = (
        "---\n"
        "url: https://wiki.example.com/leave\n"
        'title: "Leave policy"\n'
        "source_type: wiki\n"
        "owner: hr\n"
        "tags: [leave, hr]\n"
        "groups:\n"
        "  - staff\n"
        "  - contractors\n"
        "---\n"
        "\n"
        "# Leave\n\nEmployees get **25 days** of leave.\n\n| a | b |\n|---|---|\n"
    )
    (tmp_path / "policies").mkdir()
    (tmp_path / "policies" / "leave.md").write_text(raw, encoding="utf-8")
    [doc], skips = load(tmp_path)
    assert skips == []
    assert doc.url == "https://wiki.example.com/leave"
    assert doc.title == "Leave policy"
    assert doc.source == "local"
    assert doc.source_type == "wiki"
    assert doc.content == "# Leave\n\nEmployees get **25 days** of leave.\n\n| a | b |\n|---|---|\n"
    assert raw.endswith(doc.content)
    assert doc.content_hash == content_hash(doc.content)
    assert doc.metadata == {
        "owner": "hr",
        "tags": ["leave", "hr"],
        "groups": ["staff", "contractors"],
        "path": "policies/leave.md",
    }


def test_title_falls_back_to_first_heading_outside_code_then_stem(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("```\n# not a title\n```\nintro\n\n# Real Title #\n\ntext\n")
    (tmp_path / "b.txt").write_text("no heading here\n")
    a, b = load(tmp_path)[0]
    assert a.title == "Real Title"
    assert b.title == "b"
    assert a.url == (tmp_path / "a.md").resolve().as_uri()
    assert b.url.startswith("file:///") and b.url.endswith("/b.txt")
    assert a.source_type == "local"


def test_leading_rule_that_is_not_front_matter_keeps_the_text(tmp_path: Path) -> None:
    text = "---\nThis is just a paragraph after a rule.\n---\nmore\n"
    (tmp_path / "rule.md").write_text(text)
    [doc], _ = load(tmp_path)
    assert doc.content == text
    assert doc.metadata == {"path": "rule.md"}


def test_crlf_and_unicode_text_is_kept_byte_for_byte(tmp_path: Path) -> None:
    raw = "---\r\ntitle: Café\r\n---\r\nLigne un — été\r\nLigne deux\r\n"
    (tmp_path / "fr.md").write_bytes(raw.encode("utf-8"))
    [doc], _ = load(tmp_path)
    assert doc.title == "Café"
    assert doc.content == "Ligne un — été\r\nLigne deux\r\n"


def test_front_matter_without_body_is_skipped(tmp_path: Path) -> None:
    (tmp_path / "stub.md").write_text("---\ntitle: Stub\n---\n\n   \n")
    docs, skips = load(tmp_path)
    assert docs == []
    assert skips == [("stub.md", "no text after the front matter")]


# -- HTML ------------------------------------------------------------------------------------------

PAGE = """<!DOCTYPE html>
<html><head>
  <title>Deploy  &amp; Release</title>
  <link rel="canonical" href="https://docs.example.com/deploy">
  <meta name="evident:source_type" content="docs">
  <meta name="evident:acl" content="engineering">
  <style>body { color: red }</style>
  <script>var tracking = "do not index";</script>
</head>
<body>
  <nav><a href="/">Home</a> <a href="/about">About</a></nav>
  <header>Site banner</header>
  <main>
    <nav class="toc">On this page</nav>
    <h1>Deploying   Flow</h1>
    <p>Deploys run <b>twice</b> a day &mdash; at 10:00 &amp; 15:00. Use <code>flow&nbsp;deploy</code>.<br>Never on Fridays.</p>
    <ul><li>Build</li><li>Test<ol><li>unit</li><li>e2e</li></ol></li><li>Ship</li></ul>
    <table>
      <caption>Windows</caption>
      <thead><tr><th>Region</th><th>Window</th></tr></thead>
      <tbody><tr><td>EU</td><td>10:00 &lt;UTC&gt;</td></tr><tr><td>US</td><td><p>15:00</p></td></tr></tbody>
    </table>
    <div hidden>secret draft</div>
    <script>alert("x")</script>
    <p>Questions?   Ask in #deploys.</p>
  </main>
  <footer>Copyright footer</footer>
</body></html>
"""  # noqa: E501

PAGE_TEXT = (
    "# Deploying Flow\n\n"
    "Deploys run twice a day — at 10:00 & 15:00. Use flow deploy.\nNever on Fridays.\n\n"
    "Build\nTest\nunit\ne2e\nShip\n\n"
    "Windows\nRegion | Window\nEU | 10:00 <UTC>\nUS | 15:00\n\n"
    "Questions? Ask in #deploys."
)


def test_html_main_text_tables_lists_entities(tmp_path: Path) -> None:
    (tmp_path / "deploy.html").write_text(PAGE, encoding="utf-8")
    [doc], skips = load(tmp_path)
    assert skips == []
    assert doc.url == "https://docs.example.com/deploy"
    assert doc.title == "Deploy & Release"
    assert doc.source_type == "docs"
    assert doc.metadata == {"acl": "engineering", "path": "deploy.html"}
    assert doc.content == PAGE_TEXT


def test_html_is_deterministic(tmp_path: Path) -> None:
    (tmp_path / "a.html").write_text(PAGE)
    (tmp_path / "b.htm").write_text(PAGE.replace("https://docs.example.com/deploy", "https://docs.example.com/b"))
    a, b = load(tmp_path)[0]
    assert a.content == b.content == PAGE_TEXT


def test_html_without_main_uses_articles_or_body_and_falls_back(tmp_path: Path) -> None:
    (tmp_path / "art.html").write_text(
        "<html><body><nav>Menu</nav><aside>Ads</aside><article><h2>One</h2><p>First.</p></article>"
        "<article><p>Second.</p></article></body></html>"
    )
    (tmp_path / "body.html").write_text(
        '<html><head><link rel="canonical" href="/relative/only"></head>'
        "<body><nav>Menu</nav><h1>Plain page</h1><p>Body text.</p><footer>Foot</footer></body></html>"
    )
    art, body = load(tmp_path)[0]
    assert art.content == "## One\n\nFirst.\n\nSecond."
    assert art.title == "art"  # no <title> and no <h1>: the file stem
    assert body.content == "# Plain page\n\nBody text.\n\nFoot"
    # A relative canonical link cannot identify the page, so the file URI is used.
    assert body.url == (tmp_path / "body.html").resolve().as_uri()
    assert body.title == "Plain page"


@pytest.mark.parametrize(
    ("html", "text"),
    [
        # Loose lists stay one item per line.
        ("<main><p>Steps:</p><ol><li><p>Open the app.</p></li><li><p>Sign in.</p><ul><li><p>Use SSO.</p></li></ul>"
         "</li></ol><dl><dt>SLA</dt><dd>99.9%</dd></dl></main>",
         "Steps:\n\nOpen the app.\nSign in.\nUse SSO.\n\n# SLA\n\n99.9%"),
        # What each sentence is about stays in the text: a heading at its level, a definition's term one level
        # below its section (its description under it); inside a list or a table cell a heading is inline text.
        ("<main><h2>Options</h2><dl><dt>--force</dt><dd><p>Overwrite files.</p><p>Off by default.</p></dd>"
         "<dt>--quiet</dt><dd>Print nothing.<dl><dt>-qq</dt><dd>Not even errors.</dd></dl></dd></dl>"
         "<p>After the list.</p><h3>Notes</h3><ul><li><h4>Item title</h4>Item text</li></ul>"
         "<table><tr><td><h5>Cell</h5></td><td>x</td></tr></table></main>",
         "## Options\n\n### --force\n\nOverwrite files.\n\nOff by default.\n\n### --quiet\n\nPrint nothing.\n\n"
         "#### -qq\n\nNot even errors.\n\nAfter the list.\n\n### Notes\n\nItem title\nItem text\n\nCell | x"),
        # Preformatted text is fenced: its "# comment" line is code, not a heading; an empty one is nothing.
        ("<main><p>Given:</p><pre>#\n# comment\n[core]\n  x = 1\n</pre><pre> </pre><p>After.</p>"
         "<table><tr><td><pre>a\nb</pre></td></tr></table></main>",
         "Given:\n\n```\n#\n# comment\n[core]\n  x = 1\n```\n\nAfter.\n\na b"),
    ],
)
def test_html_structure_as_text(tmp_path: Path, html: str, text: str) -> None:
    (tmp_path / "page.html").write_text(html)
    [doc], _ = load(tmp_path)
    assert doc.content == text


def test_html_declared_legacy_charset(tmp_path: Path) -> None:
    html = ('<html><head><meta charset="iso-8859-1"><title>Caf\xe9</title></head>'
            '<body><p>Cr\xe8me br\xfbl\xe9e</p></body></html>')
    (tmp_path / "latin.html").write_bytes(html.encode("latin-1"))
    [doc], _ = load(tmp_path)
    assert doc.title == "Café"
    assert doc.content == "Crème brûlée"


def test_html_without_text_is_skipped(tmp_path: Path) -> None:
    (tmp_path / "empty.html").write_text("<html><body><script>x()</script><nav>Menu</nav></body></html>")
    docs, skips = load(tmp_path)
    assert docs == []
    assert skips == [("empty.html", "no readable text in the page")]


# -- PDF -------------------------------------------------------------------------------------------


def test_pdf_text_pages_and_title(tmp_path: Path) -> None:
    (tmp_path / "handbook.pdf").write_bytes(pdf_bytes(["Remote work is allowed", "Two days per week"], "Handbook 2024"))
    (tmp_path / "untitled.pdf").write_bytes(pdf_bytes(["Just text"]))
    [handbook, untitled], skips = load(tmp_path)
    assert skips == []
    assert handbook.content == "Remote work is allowed\n\nTwo days per week"
    assert handbook.title == "Handbook 2024"
    assert handbook.url == (tmp_path / "handbook.pdf").resolve().as_uri()
    assert handbook.metadata == {"path": "handbook.pdf", "pages": 2}
    assert untitled.title == "untitled"


def test_broken_pdf_is_skipped_with_reason(tmp_path: Path) -> None:
    (tmp_path / "broken.pdf").write_bytes(b"%PDF-1.4\nthis is not really a pdf\n")
    (tmp_path / "ok.md").write_text("fine")
    docs, skips = load(tmp_path)
    assert [d.title for d in docs] == ["ok"]
    assert len(skips) == 1 and skips[0][0] == "broken.pdf"
    assert skips[0][1].startswith("PDF")


# -- JSONL -----------------------------------------------------------------------------------------


def write_jsonl(path: Path, lines: list[object | str]) -> Path:
    path.write_text("\n".join(line if isinstance(line, str) else json.dumps(line) for line in lines) + "\n")
    return path


def test_jsonl_documents_blank_lines_and_content_synonym(tmp_path: Path) -> None:
    corpus = write_jsonl(
        tmp_path / "corpus.jsonl",
        [
            {"url": "https://a", "title": "A", "text": "Alpha text.", "metadata": {"team": "x"}},
            "",
            "   ",
            {"url": "https://b", "content": "Beta text.", "source_type": "wiki"},
        ],
    )
    (a, b), skips = load(corpus)
    assert skips == []
    assert (a.url, a.title, a.content, a.source, a.source_type) == ("https://a", "A", "Alpha text.", "local", "local")
    assert a.metadata == {"team": "x", "path": "corpus.jsonl"}
    assert (b.title, b.content, b.source_type) == ("", "Beta text.", "wiki")


@pytest.mark.parametrize(
    ("bad_line", "message"),
    [
        ('{"url": "https://b" "text": "x"}', "invalid JSON (Expecting ',' delimiter)"),
        ('["not", "an", "object"]', "expected a JSON object, got list"),
        ('{"text": "no url"}', "missing or empty 'url'"),
        ('{"url": "  ", "text": "blank url"}', "missing or empty 'url'"),
        ('{"url": "https://b", "text": ""}', "missing or empty 'text'"),
        ('{"url": "https://b", "title": "no text"}', "missing or empty 'text'"),
        ('{"url": "https://b", "text": "x", "metadata": [1]}', "'metadata' must be a JSON object"),
    ],
)
def test_jsonl_errors_name_file_and_line(tmp_path: Path, bad_line: str, message: str) -> None:
    corpus = write_jsonl(tmp_path / "x.jsonl", [{"url": "https://a", "text": "ok"}, "", bad_line])
    with pytest.raises(CorpusError) as caught:
        list(load_corpus(corpus))
    assert caught.value.line == 3
    assert caught.value.path == corpus
    assert str(caught.value) == f"{corpus}:3: {message}"
    assert "\n" not in str(caught.value)


def test_jsonl_url_claimed_by_two_lines_is_an_error_naming_both(tmp_path: Path) -> None:
    corpus = write_jsonl(
        tmp_path / "dup.jsonl",
        [{"url": "https://a", "text": "first"}, {"url": "https://b", "text": "b"},
         {"url": "https://a", "text": "second"}],
    )
    with pytest.raises(CorpusError) as caught:
        load(corpus)
    assert str(caught.value) == f"{corpus}:3: url https://a is also claimed by line 1; a url must name one document"


def test_jsonl_line_may_not_take_the_id_of_a_long_lines_section(tmp_path: Path) -> None:
    long_text = "\n\n".join(f"Paragraph {n} " + "word " * 200 for n in range(10))
    corpus = write_jsonl(tmp_path / "s.jsonl", [{"url": "KB-1", "text": long_text},
                                                 {"url": "KB-1#section-2", "text": "an impostor"}])
    with pytest.raises(CorpusError) as caught:
        list(load_corpus(corpus, limits=CorpusLimits(section_chars=2000)))
    assert caught.value.line == 2
    assert "url KB-1#section-2 is also claimed by line 1 as url KB-1#section-2 (a section of KB-1)" in str(caught.value)


# -- folders and skips -----------------------------------------------------------------------------


def test_folder_is_recursive_sorted_and_ignores_hidden_and_unsupported(tmp_path: Path) -> None:
    for name in ["b.md", "a/z.txt", "a/b/c.markdown", "a-b.htm", "notes.docx", "data.jsonl",
                 ".hidden.md", ".git/x.md", "a/.cache/y.txt"]:
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"<p>{name}</p>" if name.endswith("htm") else f"text of {name}")
    docs, skips = load(tmp_path)
    assert [d.metadata["path"] for d in docs] == ["a/b/c.markdown", "a/z.txt", "a-b.htm", "b.md"]
    assert skips == []  # unsupported extensions are ignored silently
    assert corpus_files(tmp_path) == [tmp_path / p for p in ["a/b/c.markdown", "a/z.txt", "a-b.htm", "b.md"]]


def test_single_file_corpus(tmp_path: Path) -> None:
    (tmp_path / "one.txt").write_text("only one")
    [doc], _ = load(tmp_path / "one.txt")
    assert doc.metadata == {"path": "one.txt"}


@pytest.mark.parametrize("public_name", ["a-public.md", "z-public.md"])  # before or after: neither wins
def test_url_claimed_by_two_files_is_an_error_naming_both(tmp_path: Path, public_name: str) -> None:
    (tmp_path / "restricted").mkdir()
    restricted = tmp_path / "restricted" / "page.md"
    restricted.write_text("---\nurl: https://wiki/salaries\nacl: [group:hr]\n---\nthe real page")
    public = tmp_path / public_name
    public.write_text("---\nurl: https://wiki/salaries\n---\nan impostor")
    with pytest.raises(CorpusError) as caught:
        load(tmp_path)
    message = str(caught.value)
    assert "url https://wiki/salaries is also claimed by" in message and "\n" not in message
    assert str(restricted) in message and str(public) in message


def test_file_may_not_take_the_id_of_another_files_section(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("---\nurl: KB-1\n---\n" + "\n\n".join("word " * 200 for _ in range(10)))
    (tmp_path / "b.md").write_text("---\nurl: KB-1#section-1\n---\nan impostor")
    with pytest.raises(CorpusError, match=r"b\.md: url KB-1#section-1 is also claimed by .*a\.md as url "
                                          r"KB-1#section-1 \(a section of KB-1\)"):
        list(load_corpus(tmp_path, limits=CorpusLimits(section_chars=2000)))


def test_one_file_reached_through_a_link_inside_the_corpus_is_read_once(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("---\nurl: https://same\n---\nfrom a")
    (tmp_path / "b.md").symlink_to(tmp_path / "a.md")
    docs, skips = load(tmp_path)
    assert [d.content for d in docs] == ["from a"]
    assert skips == [("b.md", f"the same file as {tmp_path / 'a.md'} (url https://same)")]


def test_binary_undecodable_and_empty_files_are_skipped(tmp_path: Path) -> None:
    (tmp_path / "image.txt").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    (tmp_path / "packed.txt").write_bytes(bytes(range(1, 32)) * 4 + b"\xff\xfe")  # no NUL, yet no text
    (tmp_path / "empty.md").write_bytes(b"")
    (tmp_path / "blank.txt").write_text("  \n\n")
    (tmp_path / "good.txt").write_text("good")
    docs, skips = load(tmp_path)
    assert [d.content for d in docs] == ["good"]
    assert sorted(skips) == [
        ("blank.txt", "empty file"),
        ("empty.md", "empty file"),
        ("image.txt", "binary file (contains NUL bytes)"),
        ("packed.txt", "not text in UTF-8 or cp1252 (binary, or set fallback_encoding to its encoding)"),
    ]


def test_utf16_with_bom_is_text(tmp_path: Path) -> None:
    (tmp_path / "wide.txt").write_bytes("\ufeffwide text".encode("utf-16-le"))
    [doc], _ = load(tmp_path)
    assert doc.content == "wide text"


def test_unreadable_file_is_skipped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    locked = tmp_path / "locked.md"
    locked.write_text("secret")
    (tmp_path / "open.md").write_text("public")
    original = os.open

    # Tests usually run as root, where chmod 000 does not stop reads; raise the error the OS would.
    def os_open(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        if Path(path).name == "locked.md":
            raise PermissionError(13, "Permission denied", str(path))
        return original(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", os_open)
    docs, skips = load(tmp_path)
    assert [d.content for d in docs] == ["public"]
    assert skips == [("locked.md", "permission denied")]


def test_default_skip_handler_logs_a_warning(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    (tmp_path / "empty.txt").write_text("")
    with caplog.at_level(logging.WARNING, logger="evident.connectors.index.loaders"):
        assert list(load_corpus(tmp_path)) == []
    assert "empty.txt" in caplog.text and "empty file" in caplog.text


def test_empty_folder_yields_nothing(tmp_path: Path) -> None:
    assert load(tmp_path) == ([], [])


def test_missing_path_and_unsupported_single_file_raise(tmp_path: Path) -> None:
    missing = tmp_path / "nope"
    with pytest.raises(CorpusError, match="no such file or directory") as caught:
        list(load_corpus(missing))
    assert str(caught.value) == f"{missing}: no such file or directory"
    (tmp_path / "doc.docx").write_text("x")
    with pytest.raises(CorpusError, match="unsupported file type '.docx'"):
        list(load_corpus(tmp_path / "doc.docx"))
