"""Every reason a passage is dropped between extraction and the answer, in pipeline order.

Each constant is the text recorded where the drop happens (an alignment decision's `reason`, an
extraction note, a log line); the comment above it says where (file:function) and why. A reason
with `{fields}` is a template, filled in where it is used. A filter that records nothing (a repeat
merged away, a window the offline extractor did not pick) is named here all the same, so this file
and docs/alignment.md ("Where a passage gets dropped, and why") list every drop. Framework-free.
"""

from __future__ import annotations

from typing import Final

# -- extract: what never becomes a passage ------------------------------------------------------

# llm/batching.py:plan_batches (and nodes/extract.py:route_extraction when planning fails) — the text
# beyond `max_extract_batches` batches is never sent to the model, so the lowest-ranked documents
# cannot yield passages (a bounded cost per query). A log format.
BATCH_CAP: Final = "extraction batch cap (%d) reached; %s is not sent to the model"
# llm/replies.py:_from_object/_item — an element of the reply's passage list with no text field is
# not a passage (a model's stray object, a bare id).
NO_TEXT: Final = "a reply item with no passage text"
# llm/replies.py:_salvage_array — a reply cut off by the output-token limit loses the passage it was
# cut off in; the complete ones before it are kept.
CUT_OFF: Final = "the passage the reply was cut off in"
# llm/extraction.py:_drop_examples — a copy of the prompt's worked example is the prompt's text,
# not the documents'.
PROMPT_EXAMPLE: Final = "dropped {n} passage(s) copied from the prompt's example"
# nodes/extract.py:merge_passages — batches overlap (a long document is split with context), so
# the same passage, or a part of a longer passage of the same document, is kept once (an empty one
# not at all).
REPEATED: Final = "a repeat of a passage of another batch"
CONTAINED: Final = "contained in a longer passage of the same document"
# offline/extractor.py:extract_passages — the offline extractor answers with its best windows only:
# at most `max_passages` in all, `max_per_document` per document, none much weaker than the best,
# and nothing when no window passes the answerability gate (offline/answerability.py; the caller abstains).
OFFLINE_CAP: Final = "not among the offline extractor's best windows"

# -- align: a decision with action "dropped" (its `reason`) --------------------------------------

# alignment/aligner.py:align — nothing to verify: no word in the passage (punctuation, markup).
NO_WORDS: Final = "the passage has no words"
# alignment/aligner.py:align — the paper's rule: overlap 0 with the cited document (or the cited URL
# was not retrieved) and no other retrieved document above the threshold.
UNSUPPORTED: Final = "no retrieved document supports the passage (overlap 0 with {where})"
# alignment/aligner.py:align — the n-grams matched but no exact source span could be rebuilt, so
# there is no quote; a passage without a quote is never used.
NO_SPAN: Final = "no span of the source could be located"
# alignment/aligner.py:drop_non_evidence (called by nodes/align.py:align) — verified text that
# says nothing: a bare heading, or fewer than `min_evidence_tokens` content words.
HEADING_ONLY: Final = "the passage is only a heading"
TOO_FEW_WORDS: Final = "the passage has {found} content token(s), fewer than the {needed} evidence needs"

# -- answer: a verified passage or a citation left out of the answer ------------------------------

# offline/selection.py:select_sentences — an offline answer keeps the sentences that share
# the question's terms, up to its sentence cap; a verified passage none of whose sentences is
# chosen is not cited.
NOT_CHOSEN: Final = "no sentence of the passage was chosen for the offline answer"
# citations/answer.py:check_answer (called by nodes/verify.py) — a citation to a URL with no
# verified passage is removed, and a sentence no verified passage supports is removed (or flagged):
# it goes to `removed_sentences`.
UNSUPPORTED_SENTENCE: Final = "no verified passage supports the sentence"
