"""Shared pieces of the LLM-path tests: a small corpus, a retriever, the scripted server fixture, a
chat model without HTTP, an "echo" model that quotes the documents it is shown, and the groundedness checks.

Which model a test uses says what it is about. A test of the wire (retries, Retry-After, timeouts, HTTP
errors, request shapes, usage, token streaming) drives the real `ChatOpenAI` against the scripted server
(tests/support/openai_server.py); a test of the graph's logic (alignment, verification, rewriting, what a
prompt shows) injects `FakeModel`, LangChain's `GenericFakeChatModel`, and runs without a socket."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from langchain_core.callbacks import CallbackManagerForLLMRun, CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.retrievers import BaseRetriever
from pydantic import Field

from evident.citations.answer import PREFACE, citations_in, parse_answer
from evident.context import EvidentContext
from evident.llm.replies import text_of
from tests.support.openai_server import EXTRACT_MARKER, ChatRequest, OpenAIServer, Reply

TRAVEL = "https://wiki.example/travel"
EXPENSES = "https://policies.example/expenses"
REMOTE = "https://wiki.example/remote"

TRAVEL_TEXT = (
    "Home › Policies › Travel | Edit | History\n\n"
    "# Travel policy\n\n"
    "Employees must book flights through the TravelDesk portal at least 14 days before departure. "
    "Business class is allowed only for flights longer than 8 hours.\n\n"
    "Was this page helpful? Yes | No\n"
)
EXPENSES_TEXT = (
    "# Expense reports\n\n"
    "Expense reports must be submitted in Ledgerly within 30 days of the trip's end date. "
    "Reports above 5,000 EUR need the approval of a director.\n\n"
    "Receipts must be photographed and attached to the report.\n"
)
REMOTE_TEXT = (
    "# Remote work\n\n"
    "Remote work is allowed up to three days per week. "
    "Employees agree their remote days with their manager at the start of each quarter.\n"
)
CORPUS = {TRAVEL: ("Travel policy", "policy", TRAVEL_TEXT), EXPENSES: ("Expense reports", "policy", EXPENSES_TEXT),
          REMOTE: ("Remote work", "wiki", REMOTE_TEXT)}


class ListRetriever(BaseRetriever):
    """Returns the same documents for every query: the tests control exactly what is retrieved."""

    docs: list[Document]

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        return self.docs


# Sentences of the travel policy that several LLM-path tests quote.
BOOKING_QUERY = "How early must employees book flights through the TravelDesk portal?"
BOOKING = "Employees must book flights through the TravelDesk portal at least 14 days before departure."
BUSINESS = "Business class is allowed only for flights longer than 8 hours."

def documents(*urls: str) -> list[Document]:
    return [
        Document(page_content=CORPUS[u][2], metadata={"url": u, "title": CORPUS[u][0], "source_type": CORPUS[u][1]})
        for u in (urls or tuple(CORPUS))
    ]


def retriever(*urls: str) -> ListRetriever:
    return ListRetriever(docs=documents(*urls))


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    with OpenAIServer() as s:
        yield s


def llm_context(server: OpenAIServer, **kw: Any) -> EvidentContext:
    """Settings pointing the real ChatOpenAI at the test server; fast retries for the tests."""
    values: dict[str, Any] = dict(model="test-model", base_url=server.base_url, api_key="test-key",
                                  model_timeout_s=10.0, model_backoff_s=0.01, model_backoff_max_s=0.05)
    values.update(kw)
    return EvidentContext(**values)


def passages_json(*items: tuple[str, str]) -> str:
    """An extraction reply's text: (url, content) pairs as `collected_passages`."""
    body = {"collected_passages": [{"passage_id": str(i), "url": u, "content": c} for i, (u, c) in enumerate(items, 1)]}
    return json.dumps(body)


def passages_reply(*items: tuple[str, str], **kw: Any) -> Reply:
    """The scripted server's extraction reply: (url, content) pairs as `collected_passages`."""
    return Reply(content=passages_json(*items), **kw)


# -- a chat model without HTTP, for tests of the graph's logic -------------------------------------------


class FakeModel(GenericFakeChatModel):
    """`GenericFakeChatModel` (replies in order from `messages`, streamed word by word) that keeps the
    text of every prompt it is shown in `prompts`; with `respond`, each reply is written from its prompt
    instead. A `respond` that raises is a failed model call."""

    messages: Iterator[AIMessage | str] = Field(default_factory=lambda: iter(()))
    respond: Callable[[str], str] | None = None
    prompts: list[str] = Field(default_factory=list)

    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None,
                  run_manager: CallbackManagerForLLMRun | None = None, **kwargs: Any) -> ChatResult:
        prompt = "\n".join(text_of(m) for m in messages)
        self.prompts.append(prompt)
        if self.respond is None:
            return super()._generate(messages, stop, run_manager, **kwargs)
        return ChatResult(generations=[ChatGeneration(message=AIMessage(self.respond(prompt)))])

    def of_kind(self, kind: str) -> list[str]:
        """The prompts of one kind of call: "extract" or "generate" (the server's `of_kind`)."""
        return [p for p in self.prompts if prompt_kind(p) == kind]


def prompt_kind(prompt: str) -> str:
    return "extract" if EXTRACT_MARKER in prompt else "generate"


def scripted(*replies: str) -> FakeModel:
    """A model whose calls get `replies` in order (extraction, then generation, for a one-batch query)."""
    return FakeModel(messages=iter(replies))


def fake_context(**kw: Any) -> EvidentContext:
    """Settings for a `FakeModel`: extraction asks for plain text at once, since a fake has no structured
    output (the ladder down to it is tested through `ChatOpenAI`)."""
    return EvidentContext(**{"structured_output": "text", **kw})


# -- an echo model: quotes the documents it is shown ----------------------------------------------

_DOC = re.compile(
    r"<document>\nurl: (?P<url>[^\n]*)\nsource_type: [^\n]*\ntitle: [^\n]*\n(?:section: [^\n]*\n)?content:\n"
    r"(?P<content>.*?)\n</document>", re.S,
)
_PASSAGE = re.compile(
    r"<passage>\ndocumentUrl: (?P<url>[^\n]*)\ndocumentMetadata: [^\n]*\n(?:headingPath: [^\n]*\n)?documentContent:\n"
    r"(?P<content>.*?)\n</passage>", re.S,
)
_SENTENCE = re.compile(r"[^.!?\n]+[.!?]")


def prompt_documents(prompt: str) -> list[tuple[str, str]]:
    """(url, content) of every document an extraction prompt shows."""
    return [(m["url"], m["content"]) for m in _DOC.finditer(prompt)]


def echo(prompt: str, kind: str, extract_sentences: int = 1) -> str:
    """A deterministic stand-in for a good model: extraction quotes the first sentences of every
    document (or part) shown, verbatim; generation states the first sentence of every passage with
    its [url]."""
    if kind == "extract":
        found: list[tuple[str, str]] = []
        for url, content in prompt_documents(prompt):
            sentences = [m.group(0).strip() for m in _SENTENCE.finditer(content) if len(m.group(0).split()) >= 4]
            found.extend((url, s) for s in sentences[:extract_sentences])
        return passages_json(*found)
    lines = []
    for m in _PASSAGE.finditer(prompt):
        first = _SENTENCE.search(m["content"])
        if first:
            lines.append(f"{first.group(0).strip()} [{m['url']}]")
    return "\n".join(lines) or "Nothing to say."


def echo_model() -> FakeModel:
    """The echo model without HTTP."""
    return FakeModel(respond=lambda prompt: echo(prompt, prompt_kind(prompt)))


def echo_responder(extract_sentences: int = 1, tokens: dict[str, Any] | None = None) -> Any:
    """The echo model as the scripted server's responder; `tokens` adds simulated latency (Reply's
    ttft_s / tokens_per_s)."""

    def respond(request: ChatRequest) -> Reply:
        return Reply(content=echo(request.text, request.kind, extract_sentences), **(tokens or {}))

    return respond


# -- checks -----------------------------------------------------------------------------------------


def check_grounded(out: dict[str, Any]) -> None:
    """Every citation resolves to retrieved text; quotes are the documents' own text; nothing uncited."""
    docs = {d["url"]: d for d in out["documents"]}
    assert out["citations"], out["answer"]
    for c in out["citations"]:
        assert c["url"] in docs, c["url"]
        assert c["spans"] and c["passage_ids"]
        text = docs[c["url"]]["content"]
        for start, end in c["spans"]:
            assert 0 <= start < end <= len(text)
        assert c["quote"].replace(" … ", "") == "".join(text[s:e] for s, e in c["spans"])
    for url in citations_in(out["answer"]):
        assert url in docs, url
    for line in parse_answer(out["answer"]):
        for unit in line.sentences:
            assert unit.urls or unit.text.startswith(PREFACE), unit.text
