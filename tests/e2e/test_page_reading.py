"""Reading an answer on the page (issue 29): the document view renders Markdown with the cited characters
exactly highlighted and centred, chips numbered per document across a conversation that reads like a
chat, copy and feedback per answer, dark mode, and no empty or misleading panels. Real headless
Chromium against the real `langgraph dev` server, as in test_page.py (`served`, `desktop`, `browser`
come from tests/e2e/conftest.py)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import Browser, Page, expect

from evident.web.feedback import MAX_COMMENT_CHARS
from tests.e2e.chromium import DESKTOP, WAIT_MS, Watched, ask
from tests.e2e.corpus import Q, server_env, tokens_file
from tests.e2e.deployments import SERVERS, deployment
from tests.e2e.dev_server import DevServer
from tests.e2e.test_page import CONTRAST_JS, check_contrast, final_state, marks_by_span

FOLLOW_UP = "And what about the receipts?"
PAT, SAM = "pat-reading-token", "sam-reading-token"

# -- the document view: Markdown over offsets ---------------------------------------------------------

# Runs in the page: renders each {text, spans} with the page's own module into a `.doc-text` box and
# says what it shows: the whole textContent, each span's marks joined, the elements made, the visible text.
RENDER_JS = """
async (docs) => {
  const { renderDocument } = await import("/static/highlight.js");
  return docs.map(({ text, spans }) => {
    const box = document.createElement("div");
    box.className = "doc-text";
    document.querySelector("main").append(box);
    const marks = renderDocument(box, text, spans, []);
    const bySpan = spans.map((_, i) => marks.filter((m) => m.dataset.span === String(i))
      .map((m) => m.textContent).join(""));
    const out = {
      textContent: box.textContent, bySpan, innerText: box.innerText,
      tags: [...box.querySelectorAll("*")].map((e) => e.tagName.toLowerCase()),
      hrefs: [...box.querySelectorAll("[href]")].map((a) => a.getAttribute("href")),
      handlers: box.querySelectorAll("[onerror], [onclick], [onload], [onmouseover]").length,
      paragraphs: [...box.querySelectorAll("p")].map((p) => p.innerText),
    };
    box.remove();
    return out;
  });
}
"""

MARKDOWN = """# 9. Submitting expenses

Submit every report in **Ledgerly** within 30 days.
Late reports need a *written* reason.

- Keep the `receipt` of every purchase
- Scan paper receipts
  the same day

| Item | Cap |
|------|----:|
| Hotel | 250 USD |
| Meals | 75 USD |

See [the finance wiki](https://wiki.example/finance) for more.
"""
PDF = ("The quarterly report must be\nfiled with the controller by\nthe tenth working day of the\nnext quarter.\n\n"
       "Late filings are escalated.")
HOSTILE = ("# Title <script>window.__xss='h'</script>\n\nText <img src=x onerror=\"window.__xss='img'\"> and "
           "[click](javascript:window.__xss='link') and [fine](https://ok.example/) and "
           "<a href=\"javascript:window.__xss='a'\">raw</a> **bold <b onclick=\"x\">b</b>**.\n\n"
           "| a | <img src=y onerror=\"window.__xss='cell'\"> |\n|---|---|\n| 1 | 2 |\n")


def spans_of(text: str, *quotes: str) -> list[list[int]]:
    out = []
    for quote in quotes:
        start = text.index(quote)
        out.append([start, start + len(quote)])
    return out


def test_the_document_view_renders_markdown_and_highlights_exactly_the_cited_characters(
        served: DevServer, desktop: Watched) -> None:
    page = desktop.page
    page.goto(f"{served.url}/")
    emoji = "Café 🚀 policy: the rule applies.\nSecond line of it."
    cases = [
        # A span across the heading and the paragraph, one inside a table cell, one across list items.
        (MARKDOWN, ["9. Submitting expenses\n\nSubmit every report", "250 USD",
                    "purchase\n- Scan paper receipts\n  the same"]),
        (PDF, ["must be\nfiled with the controller by\nthe tenth"]),
        (HOSTILE, ["<img src=x onerror=", "[click](javascript:"]),
        (emoji, ["the rule applies.\nSecond"]),
    ]
    docs = []
    for text, quotes in cases:
        # Python's offsets count code points (as the graph's do): the page converts them for the emoji.
        docs.append({"text": text, "spans": spans_of(text, *quotes)})
    rendered = page.evaluate(RENDER_JS, docs)
    for (text, quotes), shown in zip(cases, rendered, strict=True):
        # Every source character once, in order; each span's marks hold exactly its characters.
        assert shown["textContent"] == text
        assert shown["bySpan"] == quotes
    markdown, pdf, hostile, _ = rendered
    assert {"h3", "p", "strong", "em", "code", "ul", "li", "table", "th", "td", "a"} <= set(markdown["tags"])
    assert markdown["hrefs"] == ["https://wiki.example/finance"]
    for syntax in ("# 9.", "**", "|", "----", "- Keep", "`", "](https"):
        assert syntax not in markdown["innerText"], syntax
    assert "Submitting expenses" in markdown["innerText"] and "250 USD" in markdown["innerText"]
    # Hard line breaks of a PDF's text read as one paragraph; the blank line still separates two.
    assert pdf["paragraphs"] == [
        "The quarterly report must be filed with the controller by the tenth working day of the next quarter.",
        "Late filings are escalated."]
    # Hostile text: shown as the characters it is; no element of its own, no javascript: link.
    assert not {"script", "img", "b"} & set(hostile["tags"]) and hostile["handlers"] == 0
    assert hostile["hrefs"] == ["https://ok.example/"]
    assert "<script>" in hostile["innerText"] and "[click](javascript:" in hostile["innerText"]
    assert "<a href=" in hostile["innerText"]
    assert page.evaluate("window.__xss") is None
    assert desktop.dialogs == [] and desktop.errors == [] and desktop.console == []


def check_centred(page: Page, state: dict[str, Any], index: int) -> None:
    """Citation `index` is open: its marks are its characters, the first visible one in the middle of the box."""
    citation = state["citations"][index]
    document = next(d for d in state["documents"] if d["url"] == citation["url"])
    assert marks_by_span(page) == [document["content"][s:e] for s, e in citation["spans"]]
    where = page.evaluate("""() => {
      const box = document.getElementById('doc-text');
      const mark = [...box.querySelectorAll('mark.active')].find((m) => m.getClientRects().length);
      const b = box.getBoundingClientRect(), m = mark.getBoundingClientRect();
      const p = document.getElementById('doc-panel').getBoundingClientRect();
      return {markMid: m.top + m.height / 2, boxMid: b.top + b.height / 2, boxHeight: b.height, markHeight: m.height,
              scrollTop: box.scrollTop, maxScroll: box.scrollHeight - box.clientHeight,
              panelTop: p.top, panelBottom: p.bottom, viewport: window.innerHeight};
    }""")
    assert 0 <= where["panelTop"] and where["panelBottom"] <= where["viewport"] + 1, where
    at_an_end = where["scrollTop"] <= 0 or where["scrollTop"] >= where["maxScroll"] - 1
    if not at_an_end:  # a span near the start or the end of a document cannot be in the middle
        assert abs(where["markMid"] - where["boxMid"]) <= max(where["markHeight"], 24), where
    else:
        assert where["markMid"] - where["markHeight"] / 2 >= where["boxMid"] - where["boxHeight"] / 2 - 1, where


def deepest_chip(page: Page, state: dict[str, Any]) -> int:
    """The chip whose citation starts furthest into its document (the one a bad scroll would cut off)."""
    chips = page.locator("#answer button.chip")
    starts = [state["citations"][int(chips.nth(i).get_attribute("data-citation") or 0)]["spans"][0][0]
              for i in range(chips.count())]
    return starts.index(max(starts))


@pytest.mark.parametrize("size", [DESKTOP, {"width": 390, "height": 844}], ids=["desktop-1280", "phone-390"])
def test_the_cited_span_is_scrolled_to_the_middle_of_the_panel(served: DevServer, browser: Browser,
                                                              size: dict[str, int], tmp_path: Path) -> None:
    state = final_state(served, Q)
    phone = size["width"] < 600
    context = browser.new_context(viewport=size, is_mobile=phone, has_touch=phone)
    try:
        page = context.new_page()
        page.goto(f"{served.url}/")
        ask(page, Q)
        chips = page.locator("#answer button.chip")
        for i in sorted({0, deepest_chip(page, state)}):
            chips.nth(i).scroll_into_view_if_needed()
            chips.nth(i).click()
            check_centred(page, state, int(chips.nth(i).get_attribute("data-citation") or -1))
        page.screenshot(path=tmp_path / "centred.png")
        assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    finally:
        context.close()


# -- numbers, the conversation, copy ------------------------------------------------------------------


def chip_numbers(page: Page, scope: str) -> list[tuple[str, int]]:
    return [(url, int(n)) for url, n in page.eval_on_selector_all(
        f"{scope} button.chip", "cs => cs.map(c => [c.dataset.url, c.textContent])")]


def test_chips_are_numbered_per_document_and_a_conversation_reads_like_a_chat(served: DevServer,
                                                                              desktop: Watched) -> None:
    page = desktop.page
    page.goto(f"{served.url}/")
    ask(page, Q)
    expect(page.locator("#question")).to_have_value("")  # the box is cleared after asking
    expect(page.locator("#current-question")).to_have_text(Q)
    first = chip_numbers(page, "#answer")
    assert len(first) >= 2
    # One number per document, 1, 2, 3 … in the order the answer first cites them.
    by_url: dict[str, int] = {}
    for url, n in first:
        assert by_url.setdefault(url, n) == n
    assert len(set(by_url.values())) == len(by_url)
    assert sorted(by_url.values()) == list(range(1, len(by_url) + 1))
    assert [n for _, n in first] == sorted([n for _, n in first], key=[n for _, n in first].index)
    # The same number in the source list, the document view and the evidence trail.
    for url, n in by_url.items():
        expect(page.locator(f'#sources li[data-source="{n}"] a[href="{url}"]')).to_have_count(1)
    page.locator("#answer button.chip").first.click()
    expect(page.locator("#doc-meta")).to_contain_text(f"Source {first[0][1]}")
    expect(page.locator("#doc-meta")).to_contain_text(" · revision mtime_ns=")  # what its citations are pinned to
    page.keyboard.press("Escape")
    first_answer = page.inner_text("#answer")

    ask(page, FOLLOW_UP)
    expect(page.locator("#question")).to_have_value("")
    # Top to bottom: the earlier turn (question, answer with its chips), the new question, its answer, the box.
    order = page.evaluate("""() => ['#history .turn', '#current-question', '#answer-panel', '#ask-form']
      .map((s) => document.querySelector(s)).every((el, i, all) => i === 0
        || (all[i - 1].compareDocumentPosition(el) & Node.DOCUMENT_POSITION_FOLLOWING))""")
    assert order
    turn = page.locator("#history .turn").first
    expect(turn.locator(".turn-question")).to_have_text(Q)
    assert turn.locator(".turn-answer").inner_text() == first_answer
    assert chip_numbers(page, "#history .turn") == first  # the earlier turn keeps its chips and numbers
    for url, n in chip_numbers(page, "#answer"):  # a document cited again keeps its number
        if url in by_url:
            assert n == by_url[url]
    # An earlier turn's chip opens that turn's citation.
    earlier = final_state(served, Q)
    chip = turn.locator("button.chip").first
    chip.click()
    citation = earlier["citations"][int(chip.get_attribute("data-citation") or -1)]
    assert "".join(marks_by_span(page)) == citation["quote"].replace(" … ", "")
    assert desktop.errors == [] and desktop.console == []


def test_copy_answer_gives_plain_text_with_numbered_source_links(served: DevServer, browser: Browser) -> None:
    context = browser.new_context(viewport=DESKTOP)
    context.grant_permissions(["clipboard-read", "clipboard-write"], origin=served.url)
    try:
        page = context.new_page()
        page.goto(f"{served.url}/")
        ask(page, Q)
        numbers = dict(chip_numbers(page, "#answer"))
        page.locator("#answer-actions button.copy").click()
        expect(page.locator("#answer-actions .action-status")).to_contain_text("Copied")
        copied = page.evaluate("navigator.clipboard.readText()")
    finally:
        context.close()
    state = final_state(served, Q)
    text, _, sources = copied.partition("\n\nSources:\n")
    assert "30 days" in text and "[http" not in text and "**" not in text
    for url, n in numbers.items():
        assert f"[{n}]" in text
        title = next(d["title"] for d in state["documents"] if d["url"] == url)
        assert f"[{n}] {title}: {url}" in sources.splitlines()


# -- feedback -------------------------------------------------------------------------------------------


def thread_of(posts: list[str]) -> str:
    run = next(p for p in posts if p.endswith("/runs/stream"))
    return run.split("/")[2]


@pytest.fixture(scope="module", params=SERVERS)
def served_open(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory,
                examples: Path) -> Iterator[DevServer]:
    """The examples without authentication (loopback only), on `langgraph dev` and on Aegra; no LangSmith."""
    root = tmp_path_factory.mktemp("served-open")
    with deployment(request, root / "server", server_env(root, examples)) as server:
        yield server


def test_feedback_is_kept_on_the_thread_without_langsmith(served_open: DevServer, desktop: Watched) -> None:
    served = served_open
    page = desktop.page
    posts: list[str] = []
    page.on("request", lambda r: posts.append(r.url.removeprefix(served.url)) if r.method == "POST" else None)
    runs: list[str] = []
    page.on("response", lambda r: runs.append(r.url) if r.url.endswith("/feedback") else None)
    page.goto(f"{served.url}/")
    ask(page, Q)
    actions = page.locator("#answer-actions")
    actions.get_by_role("button", name="Not helpful").click()
    expect(actions.get_by_role("button", name="Not helpful")).to_have_attribute("aria-pressed", "true")
    comment = "<img src=x onerror=\"window.__xss=1\"> misses the receipts rule"
    actions.locator("input.comment").fill(comment)
    actions.get_by_role("button", name="Send feedback").click()
    expect(actions.locator(".action-status")).to_contain_text("kept with this conversation")
    thread = thread_of(posts)
    run_id = runs[0].split("/runs/")[1].split("/")[0]
    metadata = httpx.get(f"{served.url}/threads/{thread}", timeout=10).json()["metadata"]
    entry = metadata[f"feedback:{run_id}"]
    assert entry["score"] == 0 and entry["comment"] == comment
    assert metadata["owner"] == "anonymous"
    assert page.evaluate("window.__xss") is None and page.locator("img").count() == 0
    # Asked again, the answer becomes an earlier turn that says its feedback was given, once.
    ask(page, FOLLOW_UP)
    expect(page.locator("#history .turn .action-status")).to_contain_text("kept with this conversation")
    expect(page.locator("#history .turn button.vote")).to_have_count(0)
    expect(page.locator("#answer-actions button.vote")).to_have_count(2)


@pytest.fixture(scope="module", params=SERVERS)
def served_two_users(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory,
                     examples: Path) -> Iterator[DevServer]:
    """The examples behind a tokens file with two users, pat and sam, on `langgraph dev` and on Aegra."""
    root = tmp_path_factory.mktemp("served-two-users")
    tokens = root / "tokens.json"
    tokens_file(tokens, {PAT: ("pat", []), SAM: ("sam", [])})
    env = server_env(root, examples, EVIDENT_AUTH_TOKENS_FILE=str(tokens))
    with deployment(request, root / "server", env) as server:
        yield server


def test_feedback_is_only_for_the_callers_own_runs_and_bounded(served_two_users: DevServer) -> None:
    url = served_two_users.url
    as_pat, as_sam = ({"Authorization": f"Bearer {t}"} for t in (PAT, SAM))
    thread = httpx.post(f"{url}/threads", json={}, headers=as_pat, timeout=10).json()["thread_id"]
    run = httpx.post(f"{url}/threads/{thread}/runs", json={"assistant_id": "evident", "input": {"query": Q}},
                     headers=as_pat, timeout=10).json()
    httpx.get(f"{url}/threads/{thread}/runs/{run['run_id']}/join", headers=as_pat, timeout=WAIT_MS / 1000)
    sam_thread = httpx.post(f"{url}/threads", json={}, headers=as_sam, timeout=10).json()["thread_id"]
    route = f"{url}/threads/{thread}/runs/{run['run_id']}/feedback"

    def post(body: Any, headers: dict[str, str], to: str = route) -> httpx.Response:
        return httpx.post(to, json=body, headers=headers, timeout=30)

    assert post({"score": 1}, {}).status_code == 401  # identity from authentication only
    assert post({"score": 1}, {"Authorization": "Bearer wrong"}).status_code == 401
    assert post({"score": 1}, as_sam).status_code == 404  # not sam's thread: as if it did not exist
    assert post({"score": 1}, as_sam, f"{url}/threads/{sam_thread}/runs/{run['run_id']}/feedback").status_code == 404
    for bad in ({"score": 5}, {"score": True}, {"score": 1, "comment": "x" * (MAX_COMMENT_CHARS + 1)},
                {"score": 1, "user": "sam"}, {"score": 1, "run_id": "other"}, ["score"]):
        response = post(bad, as_pat)
        assert response.status_code == 422, (bad, response.text)
    assert "limit" in post({"score": 1, "comment": "x" * (MAX_COMMENT_CHARS + 1)}, as_pat).json()["detail"]
    ok = post({"score": 1, "comment": "clear"}, as_pat)
    assert ok.status_code == 200 and ok.json()["stored"] == "thread"
    metadata = httpx.get(f"{url}/threads/{thread}", headers=as_pat, timeout=10).json()["metadata"]
    assert metadata[f"feedback:{run['run_id']}"]["comment"] == "clear" and metadata["owner"] == "pat"
    assert httpx.get(f"{url}/threads/{thread}", headers=as_sam, timeout=10).status_code == 404
    # Only POST, and only this path shape, is served.
    assert httpx.get(route, headers=as_pat, timeout=10).status_code in (404, 405)


# -- dark mode, refusals, errors, used passages ------------------------------------------------------------


def test_dark_mode_follows_the_system_and_passes_the_contrast_checks(served: DevServer, browser: Browser,
                                                                   tmp_path: Path) -> None:
    context = browser.new_context(viewport=DESKTOP, color_scheme="dark")
    try:
        page = context.new_page()
        page.goto(f"{served.url}/")
        ask(page, Q)
        page.locator("#answer button.chip").nth(1).click()
        background = page.evaluate("getComputedStyle(document.body).backgroundColor")
        assert background == "rgb(17, 20, 24)", background
        check_contrast(page)
        page.screenshot(path=tmp_path / "dark.png")
        page.keyboard.press("Escape")
        ask(page, "zzqx blorf wug")  # the insufficient banner, in the dark palette
        expect(page.locator(".banner.info")).to_be_visible()
        page.route("**/runs/stream", lambda route: route.fulfill(
            status=500, content_type="application/json", body=json.dumps({"detail": "the graph crashed"})))
        ask(page, Q)
        expect(page.locator(".banner.error")).to_be_visible()
        low = [c for c in page.evaluate(CONTRAST_JS) if c["ratio"] < c["need"]]
        assert not low, low
    finally:
        context.close()


def test_a_refusal_has_no_citation_note_and_used_passages_are_marked(served: DevServer, desktop: Watched) -> None:
    page = desktop.page
    page.goto(f"{served.url}/")
    ask(page, "zzqx blorf wug")
    expect(page.locator("#answer")).to_contain_text("Not sufficient information to answer.")
    expect(page.locator(".machine-note")).to_be_hidden()
    ask(page, Q)
    expect(page.locator(".machine-note")).to_be_visible()
    state = final_state(served, Q)
    used = {str(p) for c in state["citations"] for p in c["passage_ids"]}
    shown = page.eval_on_selector_all("#trail li.decision", "lis => lis.map(li => li.dataset.used)")
    assert shown == [str(str(d["passage_id"]) in used).lower() for d in state["alignment"]]
    assert "true" in shown
    for item, decision in zip(page.locator("#trail li.decision").all(), state["alignment"], strict=True):
        if decision["action"] != "dropped":
            expected = "used in the answer" if str(decision["passage_id"]) in used else "not used in the answer"
            expect(item.locator(".decision-head")).to_contain_text(expected)
    expect(page.locator("#trail-counts")).to_contain_text(f"{sum(s == 'true' for s in shown)} used in the answer")


ERROR_STREAM = "".join(f"event: {event}\ndata: {json.dumps(data)}\n\n" for event, data in [
    ("metadata", {"run_id": "00000000-0000-0000-0000-000000000001"}),
    ("updates", {"rewrite": {"rewrite": {"problem": "refused"}, "query": ""}}),
    ("updates", {"postprocess": {"status": "error", "error": "the conversation was refused", "answer": "",
                                 "citations": [], "documents": [], "alignment": []}}),
])


def test_an_error_shows_no_empty_panels(served: DevServer, desktop: Watched) -> None:
    page = desktop.page
    page.goto(f"{served.url}/")
    page.route("**/runs/stream", lambda route: route.fulfill(status=200, content_type="text/event-stream",
                                                             body=ERROR_STREAM))
    ask(page, Q)
    expect(page.locator(".banner.error")).to_contain_text("the conversation was refused")
    for panel in ("#sources-panel", "#trail-panel", "#answer-panel"):
        expect(page.locator(panel)).to_be_hidden()
    expect(page.locator("#question")).to_have_value("")  # asked: the run ran, and answered with an error
