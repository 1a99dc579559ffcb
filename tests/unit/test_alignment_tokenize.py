"""Tokens keep exact offsets into the original text, whatever the page throws at them."""

from __future__ import annotations

import unicodedata

import pytest

from evident.alignment import DocumentIndex, IndexCache, content_hash, nfkc_casefold, normalize_with_map, tokenize
from evident.alignment.tokenize import token_string, words
from tests.support.token_oracle import oracle_tokens

NOISY_PAGE = (
    "\ufeff<!DOCTYPE html>\r\n<html><head><title>Travel &amp; Expenses – ACME Intranet</title></head>\r\n"
    "<body>\r\n<nav>Home › HR › Policies</nav>\r\n"
    "<h1 id=\"travel\">Travel\u00a0&amp;\u00a0expense policy</h1>\r\n"
    "<p>Employees must book ﬂights through the “Concur” portal; the ﬁnance team reimburses "
    "economy fares only.</p>\r\n"
    "<table><tr><th>Region</th><th>Per-diem</th></tr>\r\n<tr><td>EMEA</td><td>€ 45</td></tr>\r\n"
    "<tr><td>APAC</td><td>¥ 6\u202f000</td></tr></table>\r\n"
    "<p>Straße, STRASSE and stra\u00dfe are the same word; so are ΣΟΦΙΑ and σοφια.</p>\r\n"
    "<p>Кириллица: Сотрудники подают отчёт в течение 30 дней.</p>\r\n"
    "<p>中文：员工须在三十天内提交报销单。日本語：経費精算は月末までに提出してください。</p>\r\n"
    "<p dir=\"rtl\">العربية: يجب تقديم الطلب خلال ثلاثين يومًا.</p>\r\n"
    "<p>हिन्दी: कर्मचारी तीस दिनों में रिपोर्ट जमा करें।</p>\r\n"
    "<p>Zero\u200bwidth joi\u200dner, soft\u00adhyphen, cafe\u0301 vs café, ｆｕｌｌｗｉｄｔｈ ＡＢＣ, "
    "① ½ and 𝐁𝐨𝐥𝐝 math and 😀 emoji.</p>\r\n</body></html>\r\n"
)


def test_tokens_map_back_to_exact_spans_on_a_noisy_page() -> None:
    toks = tokenize(NOISY_PAGE)
    assert list(toks.tokens) == oracle_tokens(NOISY_PAGE)
    for tok, start, end in zip(toks.tokens, toks.starts, toks.ends, strict=True):
        piece = NOISY_PAGE[start:end]
        assert 0 <= start < end <= len(NOISY_PAGE)
        # The original characters of a token normalise to text containing that token.
        assert tok in words(piece), (tok, piece)
    spans = dict(zip(toks.tokens, zip(toks.starts, toks.ends, strict=True), strict=True))
    assert NOISY_PAGE[slice(*spans["flights"])] == "ﬂights"  # ligature expanded, span is original
    assert NOISY_PAGE[slice(*spans["finance"])] == "ﬁnance"
    assert NOISY_PAGE[slice(*spans["zerowidth"])] == "Zero\u200bwidth"  # ZWSP does not split a word
    assert NOISY_PAGE[slice(*spans["softhyphen"])] == "soft\u00adhyphen"
    assert NOISY_PAGE[slice(*spans["fullwidth"])] == "ｆｕｌｌｗｉｄｔｈ"
    assert NOISY_PAGE[slice(*spans["bold"])] == "𝐁𝐨𝐥𝐝"  # astral characters
    assert NOISY_PAGE[slice(*spans["travel"])] == "Travel"


def test_case_folding_and_compatibility_forms() -> None:
    assert words("Straße STRASSE ΣΟΦΙΑ σοφιας") == ["strasse", "strasse", "σοφια", "σοφιασ"]
    assert words("cafe\u0301 café CAFÉ") == ["café"] * 3
    assert words("ﬁle ｆｉｌｅ FILE") == ["file"] * 3
    assert words("① ½") == ["1", "1", "2"]  # NFKC: ① -> 1, ½ -> 1⁄2 (⁄ is not a word character)
    assert words("Zero\u200bwidth soft\u00adhyphen") == ["zerowidth", "softhyphen"]
    assert words("a\u00a0b\u202fc\u2009d") == ["a", "b", "c", "d"]  # NBSP, narrow NBSP, thin space


@pytest.mark.parametrize(
    "text, expected",
    [
        ("हिन्दी भाषा", ["हिन्दी", "भाषा"]),  # Devanagari vowel signs and virama stay in the word
        ("كَتَبَ الوَلَدُ", ["كَتَبَ", "الوَلَدُ"]),  # Arabic harakat stay in the word
        ("كتب", ["كتب"]),
        ("ภาษาไทย", ["ภาษาไทย"]),  # Thai: no spaces, one token per run
        ("員工須在三十天內", ["員工須在三十天內"]),
        ("Сотрудники ПОДАЮТ", ["сотрудники", "подают"]),
        ("snake_case and CamelCase", ["snake_case", "and", "camelcase"]),
    ],
)
def test_non_latin_scripts(text: str, expected: list[str]) -> None:
    assert words(text) == expected
    assert list(tokenize(text).tokens) == expected


def test_marks_distinguish_words() -> None:
    # كَتَبَ ("he wrote") and كُتُب ("books") share their consonants; dropping the marks would merge them.
    assert words("كَتَبَ") != words("كُتُب")


def test_crlf_and_markup_do_not_create_tokens() -> None:
    text = "| Plan | Refund window |\r\n|------|---------------|\r\n| **Annual** | 30 days |\r\n"
    assert words(text) == ["plan", "refund", "window", "annual", "30", "days"]
    toks = tokenize(text)
    assert [text[s:e] for s, e in zip(toks.starts, toks.ends, strict=True)] == [
        "Plan", "Refund", "window", "Annual", "30", "days"]


def test_normalize_with_map_maps_offsets_back() -> None:
    text = "ﬁnal cafe\u0301 Zero\u200bwidth ½ ＡＢＣ"
    norm, omap = normalize_with_map(text)
    assert norm == nfkc_casefold(text) == "final café zerowidth 1⁄2 abc"
    # "final" is norm[0:5]; the ligature "ﬁ" covers norm[0:2] -> original [0:1].
    assert (omap.start(0), omap.end(5)) == (0, 4)
    assert (omap.start(1), omap.end(1)) == (0, 1)  # inside the ligature: snaps to its boundaries
    i = norm.index("café")
    assert text[omap.start(i) : omap.end(i + 4)] == "cafe\u0301"
    i = norm.index("zerowidth")
    assert text[omap.start(i) : omap.end(i + 9)] == "Zero\u200bwidth"
    i = norm.index("abc")
    assert text[omap.start(i) : omap.end(i + 3)] == "ＡＢＣ"


def test_normalize_ascii_and_precomposed_fast_paths() -> None:
    assert normalize_with_map("Hello, World") == ("hello, world", normalize_with_map("x")[1])
    norm, omap = normalize_with_map("“Übung” Привет Ωμέγα")
    assert norm == "“übung” привет ωμέγα"
    assert omap.start(5) == 5 and omap.end(7) == 7  # identity: nothing changed length


@pytest.mark.parametrize(
    "text",
    [
        "",
        "   \r\n\t  ",
        "a",
        "...!!!",
        NOISY_PAGE,
        "a\uff9e\u0301 ｶﾞ ガ \u1100\u1161\u11a8 각",  # halfwidth voiced mark, Hangul jamo
        "\u0301leading mark, e\u0301\u0301 double, \u0345 ypogegrammeni, İstanbul, ǅ",
        "x\U0001d400y 😀 \U00020000\U00020001",  # astral letters, emoji, CJK extension B
        "\ud800 lone surrogate",
    ],
)
def test_document_index_agrees_with_tokenize(text: str) -> None:
    doc = DocumentIndex(text, content_hash(text))
    toks = tokenize(text)
    assert doc.tokens == list(toks.tokens) == oracle_tokens(text)
    assert doc.tstring == token_string(toks.tokens)
    assert doc.n_tokens == len(toks)
    for i in range(len(toks)):
        assert doc.span(i, i + 1) == toks.span(i, i + 1)
        # token_at: the token string position of token i maps back to i
        pos = doc.tstring.find(" " + toks.tokens[i] + " ", sum(len(t) + 1 for t in toks.tokens[:i]))
        assert doc.token_at(pos + 1) == i
    if len(toks) >= 2:
        assert doc.span(0, len(toks)) == (toks.starts[0], toks.ends[-1])


def test_index_cache_is_keyed_by_content() -> None:
    cache = IndexCache(max_chars=40)
    a = cache.get("first document text")
    assert cache.get("first document text") is a
    assert (cache.hits, cache.misses) == (1, 1)
    cache.get("second document, a different text")  # exceeds max_chars: the oldest is evicted
    assert len(cache) == 1
    assert cache.get("first document text") is not a
    assert not IndexCache()  # empty caches are falsy: align() must not treat that as "no cache"


def test_unicode_normal_forms_agree() -> None:
    for form in ("NFC", "NFD", "NFKD"):
        text = unicodedata.normalize(form, NOISY_PAGE)
        assert words(text) == words(NOISY_PAGE)


def test_index_cache_never_serves_an_index_of_other_text() -> None:
    """A stale content_hash handed in with edited text must not reuse the old text's index."""
    from evident.alignment import align

    cache = IndexCache()
    old = {"url": "https://wiki/refunds", "content": "Refunds are issued within ten days of the request."}
    passage = {"passage_id": "p", "url": old["url"], "content": "issued within ten days"}
    [first] = align([passage], [old], cache=cache)
    assert first.quote == "issued within ten days"
    stale = content_hash(old["content"])
    edited = {"url": old["url"], "content": "Edited: refunds are now issued within thirty business days.",
              "content_hash": stale}
    [d] = align([passage], [edited], cache=cache)
    assert d.action == "dropped"  # the edited page no longer says it
    assert cache.get(edited["content"], stale).text == edited["content"]
    assert cache.get(old["content"], stale).text == old["content"]
