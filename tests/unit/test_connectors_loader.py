"""`type = "loader"`: a LangChain BaseLoader of our own, loaded by `evident index --config`, answered by
`evident ask`."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.document_loaders import BaseLoader
from langchain_core.documents import Document
from typer.testing import CliRunner

from evident.cli import app
from evident.connectors.config import Defaults, LoaderSettings, build_sources, parse_settings
from evident.connectors.index.loader_source import LoaderMapping, loader_records, refresh_loader_index
from evident.connectors.remote.docs_index import pages_path, read_pages
from evident.connectors.source import SourceConfigError, SourceFailure


class HandbookLoader(BaseLoader):
    """Reads `{"pages": [{"id"?, "title"?, "text", "acl"?, "updated"?}]}` from a JSON file, as an export
    would give it."""

    def __init__(self, path: str, api_key: str = "") -> None:
        self.path = Path(path)
        self.api_key = api_key

    def lazy_load(self) -> Iterator[Document]:
        if self.api_key != "handbook-key-1":
            raise PermissionError("the handbook API refused the key")
        for page in json.loads(self.path.read_text(encoding="utf-8"))["pages"]:
            metadata = {k: v for k, v in page.items() if k != "text"}
            if "id" in metadata:
                metadata["source"] = metadata.pop("id")
            yield Document(page_content=page["text"], metadata=metadata)


class EmptyLoader(BaseLoader):
    def lazy_load(self) -> Iterator[Document]:
        return iter([Document(page_content="")])


PAGES = [
    {"id": "https://handbook.example/travel", "title": "Travel policy", "updated": "2025-01-01",
     "text": "Expense reports must be submitted within 30 days after a trip. Receipts above 25 EUR are required."},
    {"id": "https://handbook.example/salaries", "title": "Salary bands", "acl": "group:hr",
     "text": "Salary bands are reviewed every April by the compensation committee."},
    {"id": "HB-17", "title": "Remote work", "text": "Remote work is allowed up to three days per week."},
    {"title": "Untitled note", "text": "Parking permits are renewed every January at the front desk."},
    {"id": "javascript:alert(1)", "text": "A hostile id never becomes a citation link."},
    {"id": "HB-18", "text": "   "},
]


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "handbook.json").write_text(json.dumps({"pages": PAGES}), encoding="utf-8")
    (tmp_path / "evident.toml").write_text(f"""
[[sources]]
name = "handbook"
type = "loader"
loader = "{__name__}:HandbookLoader"
kwargs = {{ path = "{tmp_path / 'handbook.json'}" }}
kwargs_env = {{ api_key = "HANDBOOK_KEY" }}
index_path = "handbook.sqlite3"
source_type = "policy"
""", encoding="utf-8")
    monkeypatch.setenv("HANDBOOK_KEY", "handbook-key-1")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def cli(*args: str) -> dict[str, Any]:
    result = CliRunner().invoke(app, [*args, "--config", "evident.toml", "--json"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return dict(json.loads(result.stdout))


def test_index_and_ask_from_a_loader(workdir: Path) -> None:
    indexed = cli("index")
    sources = [(r["name"], r["status"], r["documents"], r["added"]) for r in indexed["sources"]]
    assert sources == [("handbook", "ok", 4, 4)]
    records = {r["url"]: r for r in read_pages(pages_path(workdir / "handbook.sqlite3")).values()}
    unnamed = sorted(set(records) - {"https://handbook.example/travel", "https://handbook.example/salaries", "HB-17"})
    assert len(records) == 4 and re.fullmatch(r"handbook-[0-9a-f]{16}", unnamed[0])  # no id: named by its text
    travel = records["https://handbook.example/travel"]
    assert (travel["title"], travel["source_type"], travel["metadata"]) == (
        "Travel policy", "policy", {"source": "https://handbook.example/travel", "updated": "2025-01-01"})

    out = cli("ask", "How many days do I have to submit an expense report after a trip?")
    assert out["status"] == "answered"
    quotes = [c for c in out["citations"] if c["url"] == "https://handbook.example/travel"]
    assert quotes and all(" … ".join(travel["text"][s:e] for s, e in c["spans"]) == c["quote"] for c in quotes)
    assert out["retrieved"][0]["source"] == "handbook"

    # The loader's acl metadata is the document's acl: the salary page is for group hr only.
    hidden = cli("ask", "When are salary bands reviewed?")
    assert all(r["url"] != "https://handbook.example/salaries" for r in hidden["retrieved"])
    shown = CliRunner().invoke(app, ["ask", "When are salary bands reviewed?", "--config", "evident.toml", "--json",
                                     "--user", "hanna", "--group", "hr"], catch_exceptions=False)
    assert "https://handbook.example/salaries" in [r["url"] for r in json.loads(shown.stdout)["retrieved"]]


def test_refresh_rewrites_only_what_changed(workdir: Path) -> None:
    cli("index")
    changed = [dict(p) for p in PAGES if p.get("id") != "HB-17"]  # one page gone
    changed[0]["text"] = "Expense reports must be submitted within 45 days after a trip."  # one page changed
    (workdir / "handbook.json").write_text(json.dumps({"pages": changed}), encoding="utf-8")
    row = cli("index")["sources"][0]
    assert (row["documents"], row["added"], row["updated"], row["removed"]) == (3, 0, 1, 1)
    assert (row["documents"], cli("index")["sources"][0]["updated"]) == (3, 0)  # nothing changed: nothing rewritten


def test_skipped_documents_are_reported(workdir: Path) -> None:
    skipped: list[tuple[str, str]] = []
    records = loader_records(HandbookLoader(str(workdir / "handbook.json"), "handbook-key-1").lazy_load(),
                             LoaderMapping(source_name="handbook"), lambda what, why: skipped.append((what, why)))
    assert len(records) == 4
    assert skipped[0][0] == "javascript:alert(1)"
    assert "no usable id (id 'javascript:alert(1)' has the scheme" in skipped[0][1]
    assert skipped[1] == ("HB-18", "no text")


def test_url_template_and_document_cap(workdir: Path) -> None:
    mapping = LoaderMapping(source_name="wiki", url_template="https://wiki.example/wiki/{title}", max_documents=2)
    skipped: list[str] = []
    records = loader_records(iter([Document(page_content="A", metadata={"title": "Deploy process"}),
                                   Document(page_content="B", metadata={"title": "Oncall"}),
                                   Document(page_content="C", metadata={"title": "Third"})]),
                             mapping, lambda what, why: skipped.append(why))
    assert [r["url"] for r in records] == ["https://wiki.example/wiki/Deploy%20process", "https://wiki.example/wiki/Oncall"]
    assert skipped == ["more than max_documents = 2; the rest is not loaded"]


def test_a_failing_loader_leaves_the_index(workdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cli("index")
    monkeypatch.setenv("HANDBOOK_KEY", "wrong-key-2")
    result = CliRunner().invoke(app, ["index", "--config", "evident.toml", "--json"], catch_exceptions=False)
    assert result.exit_code == 1
    row = json.loads(result.stdout)["sources"][0]
    assert row["message"] == "the loader failed: PermissionError: the handbook API refused the key"
    assert "wrong-key-2" not in result.output
    assert cli("ask", "How many days do I have to submit an expense report after a trip?")["status"] == "answered"


def test_loader_settings_are_checked(workdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    settings = parse_settings({"name": "h", "type": "loader", "loader": "evident.connectors.acl:parse_acl"}, 1)
    assert isinstance(settings, LoaderSettings)
    with pytest.raises(SourceConfigError, match="parse_acl\\(...\\) failed"):
        settings.loader_object()
    other = parse_settings({"name": "h", "type": "loader", "loader": "evident.connectors.acl:parse_acl",
                            "kwargs": {"value": "public"}}, 1)
    assert isinstance(other, LoaderSettings)
    with pytest.raises(SourceConfigError, match="returned Acl, not a LangChain BaseLoader"):
        other.loader_object()
    _, errors = build_sources([{"name": "h", "type": "loader", "loader": f"{__name__}:HandbookLoader"}], Defaults())
    assert "the loader has not been run yet" in errors[0].message and "evident index --config" in errors[0].message
    with pytest.raises(SourceFailure, match="gave no document with text"):
        refresh_loader_index(EmptyLoader(), LoaderMapping(source_name="h"), workdir / "x.sqlite3")
    assert not (workdir / "x.sqlite3").exists()


def test_a_source_path_with_spaces_is_made_a_safe_id() -> None:
    docs = iter([Document(page_content="Leave lasts 16 weeks.", metadata={"source": "/exports/Leave policy.md"})])
    (record,) = loader_records(docs, LoaderMapping(source_name="files"))
    assert record["url"] == "/exports/Leave%20policy.md"
