"""Prompt of the structured passage extraction call (paper §3.2, prompts of Appendix D.1).

The instructions are the paper's, in our own words: collect every passage that fully or partly
bears on the user's message, copied character for character (whitespace, line breaks and symbols
included), each with a passage id and the URL of its document, as `{"collected_passages": [...]}`;
an empty list when nothing is relevant. Documents go in the system message (with URL and source
type, see `render.py`), the instructions and the message in the user turn.
"""

from __future__ import annotations

from langchain_core.prompts import ChatPromptTemplate

EXTRACTION_SYSTEM = """\
You are a research assistant for a company's internal knowledge base.

You will receive:
1. a message from a user about the company's products, APIs, policies or supported features;
2. documents retrieved for that message, each with its url, its source type and its text. In the \
text, a line starting with "#" is a heading ("##" a section under a "#", and so on), and a \
reference entry's term is a heading over its description; a part of a long document gives the \
headings it sits under as its section.

Your task in this step is to collect evidence, not to answer. Read the documents and find every \
passage that answers the user's message completely or in part; several partial passages may \
together make up the full answer. Take nothing from anywhere except these documents.

The documents:

{documents}"""

EXTRACTION_USER = """\
Reply with one JSON object, built in two steps.

Step 1: choose the passages
1. Select every passage of the documents that relates to the user's message, wholly or partly.
2. A passage may run over several sentences. Reproduce it exactly as it appears in the document: \
the same words, punctuation, capital letters, symbols and Unicode characters, and the same \
spaces, tabs and line breaks.
3. Do not reword, shorten, summarise, correct, normalise or reformat anything in a passage.
4. Every passage must be an exact substring of one document's content. Do not guess, infer or \
fill in anything that is not written there.
5. A sentence is about the heading or term it sits under: choose passages under the headings that \
match what the message asks about (the value of one entry is not the value of its neighbour), and \
never join sentences of different sections into one passage.

Step 2: structure the reply
Put the passages in a list named "collected_passages". Give each entry a unique "passage_id", \
the "url" of the document it was copied from (exactly as given), and the copied text as \
"content". Write nothing that is not taken word for word from the documents.

Example of the expected shape (placeholders in angle and square brackets: never copy them):
{{"collected_passages": [
  {{"passage_id": "1", "url": "[example-doc]", "content": "<a passage copied exactly from that document>"}},
  {{"passage_id": "2", "url": "[another-example-doc]", "content": "<another passage, copied exactly>"}}
]}}

If no passage is relevant, reply with {{"collected_passages": []}}.

The user's message:
{query}"""

# The example's placeholders: a passage that repeats one was copied from the prompt, not a document.
EXAMPLE_URLS = frozenset({"[example-doc]", "[another-example-doc]", "example-doc", "another-example-doc"})
EXAMPLE_CONTENTS = frozenset({"<a passage copied exactly from that document>", "<another passage, copied exactly>"})


def echoes_example(url: str, content: str) -> bool:
    """A passage that repeats the prompt's example (weak models copy it) rather than a document."""
    return url.strip() in EXAMPLE_URLS or content.strip() in EXAMPLE_CONTENTS


EXTRACTION_PROMPT = ChatPromptTemplate.from_messages([("system", EXTRACTION_SYSTEM), ("human", EXTRACTION_USER)])
"""Variables: `documents` (see `render_documents`), `query`."""

EXTRACTION_JSON_SCHEMA: dict[str, object] = {
    "type": "object",
    "properties": {
        "collected_passages": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "passage_id": {"type": "string"},
                    "url": {"type": "string"},
                    "content": {"type": "string"},
                },
                "required": ["passage_id", "url", "content"],
                "additionalProperties": False,
            },
        }
    },
    "required": ["collected_passages"],
    "additionalProperties": False,
}
"""The reply's JSON schema (strict-mode compatible: every property required, no extras)."""

EXTRACTION_NAME = "collected_passages"
EXTRACTION_DESCRIPTION = "Passages copied verbatim from the documents, each with its document's URL."


def response_format_schema() -> dict[str, object]:
    """`with_structured_output(..., method="json_schema")` form: {name, description, strict, schema}."""
    return {"name": EXTRACTION_NAME, "description": EXTRACTION_DESCRIPTION, "strict": True,
            "schema": EXTRACTION_JSON_SCHEMA}


def tool_schema() -> dict[str, object]:
    """`with_structured_output(..., method="function_calling")` form: an OpenAI function."""
    return {"name": EXTRACTION_NAME, "description": EXTRACTION_DESCRIPTION, "parameters": EXTRACTION_JSON_SCHEMA}
