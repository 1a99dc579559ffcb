"""The offline extractor reading meaning: the cosines a retrieval by meaning attaches to a document's
windows (`SEMANTIC_WINDOWS`) join each sentence's lexical score at `semantic_weight`.

The cosines here are made by hand: they are the extractor's input contract (spans into the text and a
number each), whatever embedded them. What is pinned: meaning can lead with a sentence that says the
answer in other words; weight 0, or no metadata, or metadata that does not fit the text, leaves the
words' ranking exactly as it was; meaning joins the answerability gate but never passes it alone.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from evident.alignment.models import Passage, SourceDocument
from evident.connectors.index.loaders import load_corpus
from evident.embeddings.meaning import SEMANTIC_WINDOWS
from evident.offline.answerability import DEFAULT_GATE, AnswerGate, answerability
from evident.offline.extractor import address_score, extract_passages, window_evidence

QUESTION = "When does an old API key stop working after I rotate it?"
# Shares "rotate" and "key" with the question, and says nothing of how long.
HOW_TO = "To rotate a key, open the settings page."
# Shares only "after" and "rotation": the answer, in other words.
GRACE = "The default grace period after a rotation is 24 hours."
LISTED = "Keys are listed under Settings."
CONTENT = f"# API keys\n\n{HOW_TO}\n\n{GRACE}\n\n{LISTED}\n"
URL = "https://docs.example/api-keys"


def _span(sentence: str, content: str = CONTENT) -> tuple[int, int]:
    start = content.index(sentence)
    return start, start + len(sentence)


def _page(windows: object = None, content: str = CONTENT, url: str = URL) -> SourceDocument:
    metadata = {} if windows is None else {SEMANTIC_WINDOWS: windows}
    return SourceDocument(url=url, title="API keys", content=content, metadata=metadata)


# One window per sentence, as `passage_windows` makes them for a small budget; the grace period means the
# question (0.62), the how-to and the list hardly (all-MiniLM-L6-v2 gives cosines of this order).
BY_SENTENCE = [[*_span(HOW_TO), 0.10], [*_span(GRACE), 0.62], [*_span(LISTED), 0.05]]


def _texts(passages: list[Passage]) -> list[str]:
    return [p.content for p in passages]


def test_meaning_leads_with_the_sentence_that_says_it_in_other_words() -> None:
    page = _page(BY_SENTENCE)
    lexical = _texts(extract_passages(QUESTION, [_page()]))
    assert lexical[0] == HOW_TO  # by words, the how-to shares more of the question
    assert _texts(extract_passages(QUESTION, [page], semantic_weight=0.4))[0] == GRACE
    # Weight 0 reads no meaning: the words' order, to the passage.
    assert extract_passages(QUESTION, [page], semantic_weight=0.0) == extract_passages(QUESTION, [_page()])
    assert _texts(extract_passages(QUESTION, [page], semantic_weight=0.0)) == lexical


def test_meaning_on_a_second_page_brings_its_sentence_in() -> None:
    # Alone on its page the grace period shares too little with the question to be quoted by words (its
    # score is under half the how-to's, the bar for a second passage); its meaning brings it in, after the
    # words' lead.
    other = f"# Rotation\n\n{GRACE}\n"
    rotation = _page([[*_span(GRACE, other), 0.62]], content=other, url="https://docs.example/rotation")
    keys_content = f"# API keys\n\n{HOW_TO}\n\n{LISTED}\n"
    keys = _page([[*_span(HOW_TO, keys_content), 0.10], [*_span(LISTED, keys_content), 0.05]], content=keys_content)
    lexical = [(p.url, p.content) for p in extract_passages(QUESTION, [keys, rotation], semantic_weight=0.0)]
    hybrid = [(p.url, p.content) for p in extract_passages(QUESTION, [keys, rotation], semantic_weight=0.4)]
    assert lexical == [(URL, HOW_TO)]
    assert hybrid == [(URL, HOW_TO), ("https://docs.example/rotation", GRACE)]


def test_one_window_over_every_sentence_lends_each_the_same_cosine() -> None:
    # The whole page in one embedded window: meaning adds the same to every sentence, so it cannot reorder
    # them; only which of them are kept may change (meaning lifts all of them toward the best).
    page = _page([[_span(HOW_TO)[0], _span(LISTED)[1], 0.62]])
    hybrid = _texts(extract_passages(QUESTION, [page], semantic_weight=0.4))
    lexical = _texts(extract_passages(QUESTION, [_page()]))
    assert hybrid[0] == lexical[0] == HOW_TO
    assert [t for t in hybrid if t in lexical] == lexical


def test_windows_that_do_not_fit_the_text_are_not_read() -> None:
    # A window past the end, a reversed span, a non-number cosine, a missing field: the metadata is not
    # trusted to be right, and a wrong one means no meaning at all, not a partial one.
    lexical = extract_passages(QUESTION, [_page()])
    for broken in (
        [[*_span(HOW_TO), 0.10], [_span(GRACE)[0], len(CONTENT) + 1, 0.9]],
        [[_span(GRACE)[1], _span(GRACE)[0], 0.9]],
        [[*_span(GRACE), "0.9"]],
        [[*_span(GRACE)]],
        {"windows": BY_SENTENCE},
        "0.9",
    ):
        assert extract_passages(QUESTION, [_page(broken)], semantic_weight=0.4) == lexical, broken


def test_text_past_the_embedded_windows_is_read_by_its_words() -> None:
    # A remote page is embedded by its opening windows only; the answer below them has no cosine. It is
    # gated by its words, as a page retrieved by words alone is, not as a cosine of 0.
    opening = " ".join(f"Chapter {i} covers the kitchen and the printers." for i in range(1, 30))
    content = f"{opening}\n\n## Rotation\n\n{GRACE}\n"
    page = _page([[0, len(opening) // 2, 0.12], [len(opening) // 2, len(opening), 0.10]], content=content)
    question = "What is the default grace period after a rotation?"
    best = window_evidence(question, [page], 0.4)[0]
    assert best.cosine is None and best.coverage >= DEFAULT_GATE.words_gate
    hybrid = extract_passages(question, [page], semantic_weight=0.4)
    assert _texts(hybrid)[:1] == [GRACE]
    assert hybrid == extract_passages(question, [_page(content=content)], semantic_weight=0.4)


def test_the_answer_never_leads_with_a_window_the_gate_refuses() -> None:
    # "left" is the question's rarest word, and a rate-limit table holds it: by words that window covers
    # enough to lead, but it means nothing of the question, and the gate refuses it. The laptop page's
    # sentence means the question (it was admitted) and is what the answer leads with, and here holds.
    question = "I left my laptop in a taxi, what should I do?"
    lost = "A lost or stolen laptop is a security incident."
    setup = ["Your laptop arrives enrolled in device management.", "Restart your laptop once a week.",
             "Return the old laptop within ten days."]

    def page(url: str, sentences: list[tuple[str, float]]) -> SourceDocument:
        content = "\n\n".join(s for s, _ in sentences) + "\n"
        return _page([[*_span(s, content), c] for s, c in sentences], content=content, url=url)

    limits = page("https://docs.example/limits", [("Requests left in the current window.", 0.05),
                                                  ("Retry after the window resets.", 0.03)])
    laptop = page("https://docs.example/laptop", [(setup[0], 0.30), (lost, 0.55), (setup[1], 0.25), (setup[2], 0.28)])
    refused, admitted = window_evidence(question, [laptop, limits], 0.4)[:2]
    assert refused.coverage >= DEFAULT_GATE.words_gate and not DEFAULT_GATE.admits(refused)
    assert DEFAULT_GATE.admits(admitted)
    assert _texts(extract_passages(question, [laptop, limits], semantic_weight=0.4)) == [lost]


def test_meaning_alone_never_passes_the_gate() -> None:
    everything_means_it = [[*_span(HOW_TO), 0.99], [*_span(GRACE), 0.99], [*_span(LISTED), 0.99]]
    page = _page(everything_means_it)
    unanswerable = "What is the password for the guest Wi-Fi in the Paris office?"
    for weight in (0.0, 0.4, 1.0):
        assert extract_passages(unanswerable, [page], semantic_weight=weight) == []
    assert all(e.coverage == 0.0 for e in window_evidence(unanswerable, [page], 0.4))


def test_read_by_meaning_the_gate_reads_words_and_meaning() -> None:
    page = _page(BY_SENTENCE)
    covered = address_score(QUESTION, [_page()])
    assert DEFAULT_GATE.words_gate <= covered < 0.9
    best = max(answerability(e, DEFAULT_GATE.meaning_weight) for e in window_evidence(QUESTION, [page], 0.4))
    assert best >= DEFAULT_GATE.gate
    strict = AnswerGate(DEFAULT_GATE.meaning_weight, gate=0.9, words_gate=0.9)
    just = AnswerGate(DEFAULT_GATE.meaning_weight, gate=best, words_gate=1.0)
    assert extract_passages(QUESTION, [page], semantic_weight=0.4, gate=strict) == []
    assert extract_passages(QUESTION, [page], semantic_weight=0.4, gate=just) != []
    # Read by words alone (weight 0, or no metadata), the coverage gate decides.
    assert extract_passages(QUESTION, [page], semantic_weight=0.0, gate=just) == []
    # The words' score does not read the metadata at all.
    assert address_score(QUESTION, [page]) == covered


ROOT = Path(__file__).resolve().parents[2]


@cache
def _examples() -> tuple[list[SourceDocument], list[str]]:
    docs = list(load_corpus(ROOT / "examples" / "corpus"))
    questions = [json.loads(line)["query"] for line in (ROOT / "examples" / "questions.jsonl").read_text().splitlines()]
    return docs, questions


@given(st.floats(min_value=0.0, max_value=1.0), st.data())
def test_pages_without_meaning_read_the_same_at_any_weight(weight: float, data: st.DataObject) -> None:
    docs, questions = _examples()
    query = data.draw(st.sampled_from(questions))
    chosen = data.draw(st.lists(st.sampled_from(docs), min_size=1, max_size=4, unique_by=lambda d: d.url))
    assert extract_passages(query, chosen, semantic_weight=weight) == extract_passages(query, chosen)
