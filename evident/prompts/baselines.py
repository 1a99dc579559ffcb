"""Prompts of the three baselines the paper compares EvidenT with, in our own words.

- `PILOT_PROMPT`: the pilot deployment's RAG assistant (Appendix B).
- `DIRECT_PROMPT`: direct prompting with inline citations (§5, Appendix C.1).
- `GES_PROMPT`: ground every sentence (§5, Appendix C.2).

All three see the retrieved documents directly (no extraction, no verification) and cite with
reference numbers plus a closing "References" list of URLs. Variables: `documents` (see
`render_numbered_documents`) and `query`.
"""

from __future__ import annotations

from langchain_core.prompts import ChatPromptTemplate

from evident.models import INSUFFICIENT_ANSWER
from evident.prompts.generation import category_rules

_PILOT_RULES = f"""\
Rules:
1. Cite the URL of each document you use with a reference number in square brackets, such as [1] \
or [2]. Put reference numbers only at the end of the sentence or sentences they support, never in \
the middle of a sentence or as part of its wording.
2. End the reply with a "References" section that gives the URL for each number you cited. List \
each URL once, however many times it is cited.
3. Do not refer to documents by labels such as "DOCUMENT 3"; cite them only by their URLs.
4. If the documents do not let you answer the question accurately, reply with exactly \
"{INSUFFICIENT_ANSWER}" and add nothing else: no details and no references."""

PILOT_SYSTEM = (
    """\
You are an expert assistant for the company's employees, answering their questions with \
retrieval-augmented generation. With each question you receive a list of documents from several \
sources. Find the information in them that fits the question best and write a clear, accurate \
reply. Base the reply only on the text of the documents provided.

"""
    + _PILOT_RULES
    + """

The documents:

{documents}"""
)

PILOT_USER = (
    """\
Question: {query}

"""
    + _PILOT_RULES
    + """

Layout of the reply:
First part of the answer. [1][2]
Second part of the answer. [3]
References:
[1] URL of the first document
[2] URL of the second document
[3] URL of the third document

Answer only from the referenced documents, make sure every cited URL appears under References, and \
do not mention document labels such as "DOCUMENT 3"."""
)

PILOT_PROMPT = ChatPromptTemplate.from_messages([("system", PILOT_SYSTEM), ("human", PILOT_USER)])
"""The pilot deployment's prompt (paper Appendix B: B.1 system, B.2 user)."""

_NUMBERED_CITATIONS = """\
Give each document you use its own reference number and cite it in square brackets, for example \
[1]. The same number may follow several sentences when its document supports all of them. End the \
reply with a "References" section that gives the URL for each number, each URL listed once. Do not \
refer to documents by labels such as "DOCUMENT 3"; use only the reference numbers."""

_EVERY_SENTENCE = """\
Every sentence of the answer must be backed by at least one citation: no sentence may be left \
without a reference number at its end."""


def _baseline_system(extra: str) -> str:
    return (
        """\
You are a question-answering assistant. Answer using only what the documents below contain \
(their content and metadata): no assumptions, no inferences and no outside knowledge. When the \
documents do not state the answer directly, follow the instructions below exactly. Write for the \
person who will read the answer: clear, concise, well structured and easy to follow.

"""
        + _NUMBERED_CITATIONS
        + extra
        + "\n\n"
        + category_rules("[1]", "[1][2]")
        + """

Example:
Question: What is Ledger Sync?
Answer:
Ledger Sync copies approved invoices from the billing system to the general ledger every night. [1]
Invoices that fail to copy are retried on the next run. [1]
References:
[1] https://docs.example.com/ledger-sync

(The example only shows the form; its URL is not real.)

The documents:

{documents}"""
    )


BASELINE_USER = """\
Answer this question:
{query}"""

DIRECT_PROMPT = ChatPromptTemplate.from_messages([("system", _baseline_system("")), ("human", BASELINE_USER)])
"""Direct prompting with inline citations (paper §5 and Appendix C.1)."""

GES_PROMPT = ChatPromptTemplate.from_messages(
    [("system", _baseline_system("\n\n" + _EVERY_SENTENCE)), ("human", BASELINE_USER)]
)
"""Ground every sentence: direct prompting plus a citation on every sentence (paper §5, Appendix C.2)."""

BASELINE_PROMPTS = {"pilot": PILOT_PROMPT, "direct": DIRECT_PROMPT, "ges": GES_PROMPT}
