"""One tokenizer, one stemmer, one preface, and the drop reasons as the decisions record them."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from evident.alignment import align, drops, tokenize
from evident.alignment.aligner import drop_non_evidence
from evident.alignment.lexicon import content_tokens, stem, words
from evident.alignment.models import AlignmentDecision
from evident.alignment.tokenize import bmp_word_pattern, is_word_char
from evident.citations.answer import PREFACE, PREFACE_TAIL
from evident.offline.composer import preface
from evident.offline.terms import unit_terms
from evident.prompts.generation import GENERATION_PROMPT


def test_the_word_pattern_is_the_word_character_definition() -> None:
    pattern = bmp_word_pattern()
    wrong = [c for c in range(0x10000) if bool(pattern.fullmatch(chr(c))) != is_word_char(chr(c))]
    assert wrong == []


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=60))
def test_plain_words_are_the_offset_tokenizers_tokens(text: str) -> None:
    assert words(text) == list(tokenize(text).tokens)


def test_words_keep_marks_and_fold_case() -> None:
    assert words("Ｒｅｆｕｎｄｓ of हिन्दी fi\u00adnance") == ["refunds", "of", "हिन्दी", "finance"]


def test_the_support_check_and_the_offline_engine_share_the_stemmer() -> None:
    text = "Reports submitted; the organisation itemised rates"
    assert content_tokens(text) == unit_terms(text) == [stem(w) for w in words(text) if w != "the"]
    assert stem("submitted") == stem("submit") and stem("itemised") == stem("itemized")


def test_an_adverb_meets_its_adjective() -> None:
    # "Can we upgrade directly?" is answered by "direct upgrades are not supported".
    assert stem("directly") == stem("direct") and stem("quickly") == stem("quick")
    assert stem("monthly") == stem("month")
    # Only from 7 letters: most shorter words ending in -ly are no adverb of a shorter word ("family",
    # "supply"); the price is the few that are ("weekly" stays apart from "week").
    assert stem("family") == "family" and stem("supply") == "supply" and stem("weekly") != stem("week")


def test_one_preface_for_the_composer_the_prompt_and_verify() -> None:
    # The offline composer's line is its own (it never quotes the message) but opens like the prompt's.
    assert preface().startswith(PREFACE + " ")
    system = GENERATION_PROMPT.messages[0].prompt.template
    assert f"{PREFACE} whether" in system and PREFACE_TAIL in system


def test_alignment_drops_with_the_named_reasons() -> None:
    docs = [{"url": "u", "content": "Refunds are issued within 10 days of the request."}]
    empty, invented, unknown = align(
        [{"passage_id": "a", "url": "u", "content": "… !"},
         {"passage_id": "b", "url": "u", "content": "Parking permits are renewed every spring by facilities."},
         {"passage_id": "c", "url": "gone", "content": "Parking permits are renewed every spring by facilities."}],
        docs,
    )
    assert (empty.action, empty.reason) == ("dropped", drops.NO_WORDS)
    assert (invented.action, invented.reason) == ("dropped", drops.UNSUPPORTED.format(where="the cited document"))
    assert unknown.reason == drops.UNSUPPORTED.format(where="the cited URL (not retrieved)")


def test_evidence_drops_with_the_named_reasons() -> None:
    def kept(text: str) -> AlignmentDecision:
        return AlignmentDecision(passage_id="p", action="kept", url="u", original_url="u", overlap=1.0,
                                 quote=text, content=text, spans=[(0, len(text))])

    assert drop_non_evidence(kept("# Travel policy"), 3).reason == drops.HEADING_ONLY
    assert drop_non_evidence(kept("Refunds apply."), 3).reason == drops.TOO_FEW_WORDS.format(found=2, needed=3)
    assert drop_non_evidence(kept("Refunds are issued within 10 days."), 3).action == "kept"


def test_a_passage_dropped_as_non_evidence_keeps_no_document_spans_or_quote() -> None:
    """`dropped` promises `url == ""` and no spans or quote (docs/alignment.md), whoever drops it."""
    text = "# Travel policy"
    heading = AlignmentDecision(passage_id="p", action="kept", url="u", original_url="u", overlap=1.0,
                                quote=text, content=text, spans=[(0, len(text))])
    dropped = drop_non_evidence(heading, 3)
    assert (dropped.action, dropped.url, dropped.spans, dropped.quote) == ("dropped", "", [], "")
    assert (dropped.original_url, dropped.content) == ("u", text)  # what was cited and said stays visible
