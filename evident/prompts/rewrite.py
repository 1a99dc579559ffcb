"""Prompt of the rewrite call: a conversation's last message as one question that stands alone.

Used only when the conversation has earlier turns. The reply is the question and nothing else; it is
searched for, extracted against and answered exactly like a question asked on its own, so it must
not carry facts of its own (the model is told not to answer, and to add nothing the conversation
did not say). Earlier answers are shown only to resolve what the user refers to: nothing in them is
cited unless retrieval finds it again.
"""

from __future__ import annotations

from langchain_core.prompts import ChatPromptTemplate

REWRITE_SYSTEM = """\
You turn the latest message of a conversation into a single question that someone who has not seen \
the conversation can understand and search for.

- The question is about what the latest message asks. Take from the earlier turns only what it \
refers to: replace words that point back ("it", "that", "they", "the same") and fill in what an \
elliptical message leaves out ("and if I'm a contractor?", "how long does that take?"). Do not \
bring back the subject of an earlier question the latest message does not ask about again.
- A message that replies to a question the assistant asked ("yes", "no, I'm a veteran") is the \
answer to that question: write the question the user now wants answered, on the assistant's topic \
with what the reply tells ("What disability benefits can I get as a veteran?").
- Keep the user's own wording and intent; add nothing the conversation does not say, and do not \
answer the question.
- If the latest message already stands on its own, or changes the subject, return it as it is.
- Reply with the question only: one line, no preamble, no quotes."""

REWRITE_HUMAN = """\
Earlier turns:
{history}

Latest message: {question}

The question, standing alone:"""

REWRITE_PROMPT = ChatPromptTemplate.from_messages([("system", REWRITE_SYSTEM), ("human", REWRITE_HUMAN)])
