"""No document from a user's retriever is dropped in silence: `metadata["url"]`, then `metadata["source"]`
(made a safe id, kept as the title), then `Document.id` name it; one with none is reported by name."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.documents import Document

from evident.connectors.base import NoDocumentId, to_source_document
from evident.connectors.federated import FederatedRetriever
from evident.connectors.index.doc_ids import safe_document_id, validate_document_id
from evident.connectors.source import Source
from evident.graph import build_graph
from tests.support.llm import ListRetriever

EXPENSES = ("Expense reports must be submitted within 30 days of the end of the trip. "
            "Receipts must be attached to every expense report.")
TRAVEL = ("Flights must be booked through the travel desk at least 14 days before departure. "
          "Business class is allowed only for flights longer than 8 hours.")
QUESTION = "How many days do I have to submit an expense report?"


def ask(*docs: Document, **invoke: Any) -> dict[str, Any]:
    return build_graph(retriever=ListRetriever(docs=list(docs))).invoke({"query": QUESTION}, **invoke)


def cited(out: dict[str, Any]) -> set[str]:
    assert out["status"] == "answered", (out["status"], out["error"], out["source_errors"])
    return {c["url"] for c in out["citations"]}


# -- which id a document is cited by --------------------------------------------------------------------


def test_a_document_with_only_its_own_id_is_cited_by_it() -> None:
    out = ask(Document(id="KB-1042", page_content=EXPENSES))
    assert cited(out) == {"KB-1042"} and "[KB-1042]" in out["answer"]
    assert out["source_errors"] == []


def test_a_file_name_with_a_space_is_made_a_safe_id_and_kept_as_the_title() -> None:
    out = ask(Document(page_content=EXPENSES, metadata={"source": "Expense Policy 2025.pdf"}),
              Document(page_content=TRAVEL, metadata={"source": r"C:\Policies\Travel Policy.docx"}))
    assert cited(out) == {"Expense%20Policy%202025.pdf"}
    assert "[Expense%20Policy%202025.pdf]" in out["answer"]
    titles = {d["url"]: d["title"] for d in out["documents"]}
    assert titles == {"Expense%20Policy%202025.pdf": "Expense Policy 2025.pdf",
                      "file:///C:/Policies/Travel%20Policy.docx": r"C:\Policies\Travel Policy.docx"}
    assert out["source_errors"] == []


@pytest.mark.parametrize(("document", "expected"), [
    (Document(id="KB-7", page_content="t"), "KB-7"),
    (Document(id="KB-7", page_content="t", metadata={"url": "https://wiki.example/a", "source": "a.md"}),
     "https://wiki.example/a"),
    # A vector store's chunk: its own id is the store's key; its document is the path in `source`.
    (Document(id="3f1c-uuid", page_content="t", metadata={"source": "/srv/docs/Leave policy.md"}),
     "/srv/docs/Leave%20policy.md"),
    (Document(id="KB-7", page_content="t", metadata={"url": "  ", "source": ""}), "KB-7"),
])
def test_the_id_is_url_then_source_then_document_id(document: Document, expected: str) -> None:
    assert to_source_document(document).url == expected


def test_a_source_made_an_id_is_kept_as_the_title() -> None:
    doc = to_source_document(Document(id="3f1c-uuid", page_content="t", metadata={"source": "Leave policy.md"}))
    assert (doc.url, doc.title, doc.source) == ("Leave%20policy.md", "Leave policy.md", "")
    titled = to_source_document(Document(page_content="t", metadata={"source": "a b.md", "title": "Leave"}))
    assert (titled.url, titled.title) == ("a%20b.md", "Leave")
    with pytest.raises(NoDocumentId):
        to_source_document(Document(page_content="t", metadata={"title": "Nameless"}))


@pytest.mark.parametrize(("name", "expected"), [
    ("Travel Policy.pdf", "Travel%20Policy.pdf"), ("Résumé guide.md", "Résumé%20guide.md"),
    ("notes [draft].md", "notes%20%5Bdraft%5D.md"), ("hr/leave.md", "hr/leave.md"),
    (r"C:\docs\My File.pdf", "file:///C:/docs/My%20File.pdf"), ("  padded.md ", "padded.md"),
    ("tab\there.md", "tab%09here.md"),
])
def test_a_safe_id_passes_the_id_rule(name: str, expected: str) -> None:
    assert safe_document_id(name) == expected
    assert validate_document_id(expected, allow_file=True) == expected


@pytest.mark.parametrize("name", ["javascript:alert(1)", "//evil.test/x", "https://user:pw@host.example/x"])
def test_a_name_that_leads_elsewhere_stays_refused(name: str) -> None:
    out = ask(Document(page_content=EXPENSES, metadata={"source": name, "title": "Expense rules"}),
              Document(page_content=TRAVEL, metadata={"url": "https://wiki.example/travel"}))
    assert [d["url"] for d in out["documents"]] == ["https://wiki.example/travel"]
    (error,) = out["source_errors"]
    assert 'skipped: "Expense rules"' in error["message"]


# -- what cannot be cited is named, never counted in silence ----------------------------------------------


def test_a_document_without_any_id_is_named_in_source_errors() -> None:
    out = ask(Document(page_content=EXPENSES, metadata={"title": "Expense rules"}),
              Document(page_content=TRAVEL),
              Document(page_content=EXPENSES, metadata={"url": "https://wiki.example/expenses"}))
    assert out["status"] == "degraded" and {c["url"] for c in out["citations"]} == {"https://wiki.example/expenses"}
    (error,) = out["source_errors"]
    assert error["message"] == ('2 documents had no valid id (Document.id, or url or source in its metadata) and '
                             'were skipped: "Expense rules", "Flights must be booked through the travel desk"')


def test_a_hidden_document_without_an_id_is_neither_named_nor_counted() -> None:
    secret = Document(page_content="The board meets on the 3rd.", metadata={"title": "Board minutes",
                                                                            "acl": "group:board"})
    public = Document(page_content=EXPENSES, metadata={"url": "https://wiki.example/expenses"})
    federation = FederatedRetriever(sources=[Source(name="any", retriever=ListRetriever(docs=[secret, public]))])
    result = federation.search("expense", principal={"user": "bob", "groups": ["staff"]})
    assert [d.url for d in result.documents] == ["https://wiki.example/expenses"] and result.errors == []
    shown = federation.search("expense", principal={"user": "ann", "groups": ["board"]})
    assert [e.message for e in shown.errors] == [
        '1 document had no valid id (Document.id, or url or source in its metadata) and was skipped: '
        '"Board minutes"']


def test_many_skipped_documents_are_named_up_to_five() -> None:
    docs = [Document(page_content=f"Page {i} text about expenses.", metadata={"title": f"Page {i}"}) for i in range(7)]
    federation = FederatedRetriever(sources=[Source(name="any", retriever=ListRetriever(docs=docs))])
    (error,) = federation.search("expense").errors
    assert error.message.endswith('"Page 0", "Page 1", "Page 2", "Page 3", "Page 4" and 2 more')
