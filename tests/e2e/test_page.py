"""The answer page at `/` of the served app, in real headless Chromium (Debian's `chromium`, driven
by Playwright with `executable_path`), against the real `langgraph dev` server.

Three deployments: `served` (tests/e2e/conftest.py: the examples, no authentication); a hostile
one of this module: one document full of markup and a `javascript:` link, a MediaWiki source on a
closed loopback port (so every answer is degraded), and a tokens file (so the page needs a token);
and `served_llm` (tests/e2e/conftest.py: a scripted model on loopback), whose tokens stream. The
browser and its pages (`desktop`, `phone`) are fixtures of tests/e2e/conftest.py too. Screenshots go
under each test's tmp_path.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import httpx
import pytest
from playwright.sync_api import Page, expect

from tests.e2e import dev_server
from tests.e2e.chromium import WAIT_MS, Watched, ask, wait_for_result
from tests.e2e.corpus import Q, tokens_file
from tests.e2e.dev_server import DevServer
from tests.support.llm import passages_reply
from tests.support.openai_server import OpenAIServer, Reply

ZEBRA_Q = "What does the zebra quarantine procedure need?"
TOKEN = "page-test-token"

HOSTILE = """---
url: https://intranet.example/zebra-quarantine
title: Zebra <script>window.__xss = "title"</script> quarantine <img src=x onerror="window.__xss='title-img'">
---
# Zebra quarantine procedure

The zebra quarantine procedure needs two signatures <img src=x onerror="window.__xss='img'"> from the facilities desk.
Every zebra quarantine request is filed with the <script>window.__xss = "script"</script> facilities form [open the zebra form](javascript:window.__xss='link') before noon.
A zebra quarantine ends after </textarea><b onmouseover="window.__xss='b'">fourteen days</b> of observation.
"""  # noqa: E501


# -- fixtures ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def served_hostile(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevServer]:
    root = tmp_path_factory.mktemp("served-hostile")
    (root / "hostile").mkdir()
    (root / "hostile" / "zebra.md").write_text(HOSTILE, encoding="utf-8")
    closed = dev_server.free_port()  # bound, then released: nothing listens there
    (root / "evident.toml").write_text(
        'corpus = ["hostile"]\n\n[[sources]]\nname = "wiki"\ntype = "mediawiki"\n'
        f'url = "http://127.0.0.1:{closed}/w/api.php"\ntimeout_s = 5\n', encoding="utf-8")
    tokens = root / "tokens.json"
    tokens_file(tokens, {TOKEN: ("pat", ["staff"])})
    env = {"EVIDENT_CONFIG": str(root / "evident.toml"), "EVIDENT_INDEX_DIR": str(root / "indexes"),
           "EVIDENT_AUTH_TOKENS_FILE": str(tokens), "EVIDENT_EMBEDDINGS": "none"}
    with dev_server.running(root / "server", env=env) as server:
        yield server


# -- helpers ----------------------------------------------------------------------------------------


def final_state(server: DevServer, question: str, token: str | None = None) -> dict[str, Any]:
    """The same question through the API: what the page must show."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    response = httpx.post(f"{server.url}/runs/wait", json={"assistant_id": "evident", "input": {"query": question}},
                          headers=headers, timeout=WAIT_MS / 1000)
    assert response.status_code == 200, response.text
    return response.json()


def active_marks(page: Page) -> list[str]:
    return page.eval_on_selector_all("#doc-text mark.active", "marks => marks.map(m => m.textContent)")


def marks_by_span(page: Page) -> list[str]:
    """The active marks' text, one string per span: a span that crosses rendered elements (a heading
    and its paragraph, list items) has one mark per piece, all with the span's `data-span`."""
    return page.evaluate("""() => {
      const marks = [...document.querySelectorAll('#doc-text mark.active')];
      const n = Math.max(0, ...marks.map((m) => Number(m.dataset.span) + 1));
      return [...Array(n).keys()].map((i) => marks.filter((m) => m.dataset.span === String(i))
        .map((m) => m.textContent).join(''));
    }""")  # type: ignore[no-any-return]


def check_highlight(page: Page, state: dict[str, Any], index: int) -> None:
    """The open document shows citation `index`: its marks are its quote, at its spans, the first in view."""
    citation = state["citations"][index]
    document = next(d for d in state["documents"] if d["url"] == citation["url"])
    expect(page.locator("#doc-title")).to_have_text(document["title"] or document["url"])
    marks = marks_by_span(page)
    assert marks == [document["content"][s:e] for s, e in citation["spans"]]
    assert "".join(marks) == citation["quote"].replace(" … ", "")
    first = page.locator("#doc-text mark.active >> visible=true").first
    expect(first).to_be_in_viewport()
    box, text_box = first.bounding_box(), page.locator("#doc-text").bounding_box()
    viewport = page.viewport_size
    assert box and text_box and viewport
    assert 0 <= box["y"] and box["y"] + min(box["height"], 20) <= viewport["height"]
    assert text_box["y"] <= box["y"] <= text_box["y"] + text_box["height"]


# Runs in the page: every element with its own text, its colour against the background it is
# drawn on (the first ancestor with an opaque background), with WCAG's contrast ratio.
CONTRAST_JS = """
() => {
  const rgb = (c) => (c.match(/[\\d.]+/g) || []).map(Number);
  const lum = ([r, g, b]) => {
    const f = (v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; };
    return 0.2126 * f(r) + 0.7152 * f(g) + 0.0722 * f(b);
  };
  const background = (el) => {
    for (let e = el; e; e = e.parentElement) {
      const c = rgb(getComputedStyle(e).backgroundColor);
      if (c.length === 3 || (c.length === 4 && c[3] > 0.5)) return c.slice(0, 3);
    }
    return [255, 255, 255];
  };
  const out = [];
  for (const el of document.querySelectorAll("body *")) {
    if (!el.getClientRects().length) continue;
    const own = [...el.childNodes].some((n) => n.nodeType === 3 && n.textContent.trim());
    if (!own) continue;
    const style = getComputedStyle(el);
    if (style.visibility === "hidden" || el.closest("[hidden]")) continue;
    const [a, b] = [lum(rgb(style.color).slice(0, 3)), lum(background(el))];
    const ratio = (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05);
    const size = parseFloat(style.fontSize), bold = parseInt(style.fontWeight, 10) >= 700;
    const large = size >= 24 || (bold && size >= 18.66);
    out.push({text: el.textContent.trim().slice(0, 40), ratio, need: large ? 3 : 4.5});
  }
  return out;
}
"""


def check_contrast(page: Page) -> None:
    checked = page.evaluate(CONTRAST_JS)
    assert len(checked) > 20
    low = [c for c in checked if c["ratio"] < c["need"]]
    assert not low, low


def check_inert(watched: Watched) -> None:
    """Nothing of the hostile document ran or became an element."""
    page = watched.page
    assert watched.dialogs == [] and watched.errors == [] and watched.console == [], (
        watched.dialogs, watched.errors, watched.console)
    assert page.evaluate("window.__xss") is None
    injected = page.evaluate("""() => ({
      scripts: [...document.scripts].map(s => s.getAttribute('src')),
      imgs: document.querySelectorAll('img').length,
      textareas: document.querySelectorAll('textarea').length,
      bold: document.querySelectorAll('b').length,
      handlers: document.querySelectorAll('[onerror], [onmouseover], [onclick], [onload]').length,
      hrefs: [...document.querySelectorAll('[href]')].map(a => a.getAttribute('href')),
    })""")
    assert injected["scripts"] == ["static/app.js"]
    assert injected["imgs"] == injected["textareas"] == injected["bold"] == injected["handlers"] == 0
    for href in injected["hrefs"]:
        assert href.startswith(("http://", "https://", "#", "static/")), href


# -- the page itself --------------------------------------------------------------------------------


def test_the_page_is_served_with_a_strict_policy(served: DevServer) -> None:
    page = httpx.get(f"{served.url}/", timeout=10)
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    policy = page.headers["content-security-policy"]
    for directive in ("default-src 'none'", "script-src 'self'", "style-src 'self'", "connect-src 'self'",
                      "frame-ancestors 'none'", "base-uri 'none'", "require-trusted-types-for 'script'"):
        assert directive in policy
    assert "unsafe" not in policy and "http" not in policy
    assert page.headers["x-content-type-options"] == "nosniff"
    # Every asset the page names is served from evident/web/static/, with the same policy; no inline script.
    assert "<script>" not in page.text and "style=" not in page.text and "://" not in page.text
    for asset in ("static/app.js", "static/views.js", "static/markdown.js", "static/style.css", "static/favicon.svg"):
        response = httpx.get(f"{served.url}/{asset}", timeout=10)
        assert response.status_code == 200 and response.headers["content-security-policy"] == policy
    assert httpx.get(f"{served.url}/static/../app.py", timeout=10).status_code == 404


def test_a_chip_opens_the_cited_span_highlighted_and_in_view(served: DevServer, desktop: Watched,
                                                             tmp_path: Path) -> None:
    state = final_state(served, Q)
    assert state["status"] == "answered" and len(state["citations"]) >= 2
    page = desktop.page
    page.goto(f"{served.url}/")
    ask(page, Q)
    # Steps first, then the answer; the question is in the URL.
    steps = page.eval_on_selector_all("#steps li", "lis => lis.map(li => li.dataset.node)")
    assert steps == ["rewrite", "retrieve", "extract", "align", "generate", "verify", "postprocess"]
    assert page.evaluate("new URL(location.href).searchParams.get('q')") == Q
    expect(page.locator(".machine-note")).to_be_visible()
    chips = page.locator("#answer button.chip")
    assert chips.count() == len(state["citations"])
    assert "30 days" in page.inner_text("#answer")

    # A click opens the first citation's document with its spans highlighted and in view.
    chips.nth(0).click()
    check_highlight(page, state, int(chips.nth(0).get_attribute("data-citation") or -1))
    # Above the highlighted quote, the headings it sits under.
    path = state["citations"][int(chips.nth(0).get_attribute("data-citation") or -1)]["heading_path"]
    assert len(path) >= 2
    expect(page.locator("#doc-path")).to_have_text(" › ".join(path))
    page.screenshot(path=tmp_path / "answer-desktop.png")

    # The keyboard: Tab reaches a chip, its focus is visible, Enter opens its citation.
    last = chips.count() - 1
    chips.nth(last).focus()
    page.keyboard.press("Shift+Tab")
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.dataset.citation") == chips.nth(last).get_attribute("data-citation")
    outline = page.evaluate("getComputedStyle(document.activeElement).outlineStyle")
    assert outline not in ("none", "")
    page.keyboard.press("Enter")
    check_highlight(page, state, int(chips.nth(last).get_attribute("data-citation") or -1))
    page.keyboard.press("Escape")
    expect(page.locator("#doc-panel")).to_be_hidden()

    # Sources: every retrieved document by title, linked (these are http(s) URLs).
    for doc in state["documents"]:
        item = page.locator("#sources li", has_text=doc["title"]).first
        expect(item.locator(f'a[href="{doc["url"]}"]')).to_have_count(1)
    # The evidence trail: every alignment decision, with its overlap.
    decisions = page.eval_on_selector_all("#trail li.decision", "lis => lis.map(li => li.dataset.action)")
    assert decisions == [d["action"] for d in state["alignment"]]
    first = state["alignment"][0]
    expect(page.locator("#trail li.decision").first).to_contain_text(f"{first['overlap']:.2f}")
    check_contrast(page)
    page.screenshot(path=tmp_path / "page-full.png", full_page=True)
    assert desktop.dialogs == [] and desktop.errors == [] and desktop.console == []


def thread_count(server: DevServer) -> int:
    response = httpx.post(f"{server.url}/threads/count", json={}, timeout=10)
    assert response.status_code == 200, response.text
    return int(response.json())


def test_a_link_fills_the_question_and_only_the_user_asks(served: DevServer, desktop: Watched) -> None:
    """A foreign page may link to `/?q=…`; the user's browser must not run that question by itself."""
    page = desktop.page
    before = thread_count(served)
    page.goto(f"{served.url}/?{urlencode({'q': Q})}")
    expect(page.locator("#question")).to_have_value(Q)
    expect(page.locator("#question")).to_be_focused()
    page.wait_for_timeout(1500)  # time a started run would have had to create its thread
    assert thread_count(served) == before
    expect(page.locator("#progress-panel")).to_be_hidden()
    assert page.inner_text("#answer").strip() == ""
    page.press("#question", "Enter")
    wait_for_result(page)
    expect(page.locator("#answer button.chip").first).to_be_visible()
    assert thread_count(served) == before + 1
    assert new_url_question(page) == Q


def new_url_question(page: Page) -> str | None:
    return page.evaluate("new URL(location.href).searchParams.get('q')")  # type: ignore[no-any-return]


def test_at_360_px_nothing_scrolls_sideways(served: DevServer, phone: Watched, tmp_path: Path) -> None:
    page = phone.page
    page.goto(f"{served.url}/")
    ask(page, Q)
    no_side_scroll = "document.documentElement.scrollWidth <= window.innerWidth"
    assert page.evaluate(no_side_scroll)
    chip = page.locator("#answer button.chip").first
    chip.click()
    check_highlight(page, final_state(served, Q), int(chip.get_attribute("data-citation") or -1))
    assert page.evaluate(no_side_scroll)
    page.screenshot(path=tmp_path / "answer-360.png")
    page.locator("#doc-close").click()
    page.locator("#trail-panel").scroll_into_view_if_needed()
    assert page.evaluate(no_side_scroll)
    page.screenshot(path=tmp_path / "page-360.png", full_page=True)


TABLE_Q = "Our pipeline stopped with error TF-2202. How do we fix it?"


def test_a_quoted_table_row_is_shown_as_a_table_row(served: DevServer, phone: Watched) -> None:
    state = final_state(served, TABLE_Q)
    # The row comes under its table's header: the table is one citation, opened by its chip.
    [index] = [i for i, c in enumerate(state["citations"])
               if any(line.startswith("| TF-2202 |") for line in c["sentence"].splitlines())][:1]
    page = phone.page
    page.goto(f"{served.url}/")
    ask(page, TABLE_Q)
    cells = page.eval_on_selector_all("#answer table tr",
                                      "rows => rows.map(r => [...r.cells].map(c => c.innerText))")
    row = ["TF-2202", "Authentication to sink failed", "No", "The pipeline stops after 20 consecutive failures"]
    assert row in cells and ["Code", "Message", "Retryable", "What happens"] in cells
    assert "|" not in page.inner_text("#answer table")
    # The chip after the table opens the row, highlighted where the page has it; nothing scrolls sideways.
    chip = page.locator(f'#answer button.chip[data-citation="{index}"]')
    chip.click()
    check_highlight(page, state, index)
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    assert phone.errors == [] and phone.console == []


def test_insufficient_is_said_plainly(served: DevServer, desktop: Watched) -> None:
    page = desktop.page
    page.goto(f"{served.url}/")
    ask(page, "zzqx blorf wug")
    steps = page.eval_on_selector_all("#steps li", "lis => lis.map(li => li.dataset.node)")
    assert steps == ["rewrite", "retrieve", "extract", "align", "insufficient", "postprocess"]
    expect(page.locator(".banner.info")).to_contain_text("Insufficient")
    assert page.locator("#answer button.chip").count() == 0


def test_a_hedged_answer_says_so_above_it(served: DevServer, desktop: Watched) -> None:
    # The examples say how a stay abroad is requested, not whether Italy for three weeks is allowed: the answer
    # hedges, the state says so for programs (`evidence`), and the page above the answer and above its turn.
    weak = "Can I work temporarily from Italy for three weeks next summer, and how do I request the stay?"
    assert final_state(served, weak)["evidence"] == "weak"
    page = desktop.page
    page.goto(f"{served.url}/")
    ask(page, weak)
    expect(page.locator("#evidence .evidence-note")).to_contain_text("Weak evidence")
    expect(page.locator("#answer")).to_contain_text("The documentation does not explicitly state")
    assert "weak evidence" in page.inner_text("#steps [data-node=postprocess]")
    ask(page, Q)  # the next question: a clear answer, and the hedged one kept with its note as an earlier turn
    assert page.locator("#evidence .evidence-note").count() == 0
    expect(page.locator("#history .turn").nth(0).locator(".evidence-note")).to_contain_text("Weak evidence")
    assert desktop.errors == [] and desktop.console == []


def test_server_failures_are_said_plainly(served: DevServer, desktop: Watched) -> None:
    page = desktop.page
    page.goto(f"{served.url}/")
    page.route("**/runs/stream", lambda route: route.abort("connectionrefused"))
    ask(page, Q)
    expect(page.locator(".banner.error")).to_contain_text("cannot be reached")
    page.unroute("**/runs/stream")
    page.route("**/runs/stream", lambda route: route.fulfill(
        status=500, content_type="application/json", body=json.dumps({"detail": "the graph crashed"})))
    ask(page, Q)
    expect(page.locator(".banner.error")).to_contain_text("HTTP 500")
    expect(page.locator(".banner.error")).to_contain_text("the graph crashed")
    expect(page.locator("#ask-button")).to_be_enabled()


# -- a hostile corpus, a failing source, a token ----------------------------------------------------


def test_a_hostile_document_renders_inert(served_hostile: DevServer, desktop: Watched, tmp_path: Path) -> None:
    state = final_state(served_hostile, ZEBRA_Q, TOKEN)
    assert "<script>" in state["answer"] and "javascript:" in state["answer"]
    page = desktop.page
    page.goto(f"{served_hostile.url}/")
    expect(page.locator("#token-box")).to_be_visible()
    page.fill("#token", TOKEN)
    ask(page, ZEBRA_Q)
    # The markup is there, as text, in the answer, the title and the document.
    answer = page.inner_text("#answer")
    assert "<img src=x onerror=" in answer and "<script>" in answer
    assert "[open the zebra form](javascript:" in answer
    expect(page.locator("#sources .source-title").first).to_contain_text("<script>")
    page.locator("#answer button.chip").first.click()
    assert "</textarea><b onmouseover=" in page.inner_text("#doc-text")
    check_highlight(page, state, 0)
    page.locator("#trail li.decision").first.hover()
    page.locator("#doc-text").hover()
    page.screenshot(path=tmp_path / "hostile.png", full_page=True)
    check_inert(desktop)


def test_a_failing_source_shows_the_degraded_banner(served_hostile: DevServer, desktop: Watched) -> None:
    page = desktop.page
    page.goto(f"{served_hostile.url}/")
    page.fill("#token", TOKEN)
    ask(page, ZEBRA_Q)
    banner = page.locator(".banner.warn")
    expect(banner).to_be_visible()
    expect(banner).to_contain_text("Degraded")
    expect(banner).to_contain_text("wiki")
    expect(page.locator("#source-failures")).to_contain_text("wiki")
    check_contrast(page)


def test_the_token_is_asked_for_and_kept_for_the_tab(served_hostile: DevServer, desktop: Watched) -> None:
    page = desktop.page
    page.goto(f"{served_hostile.url}/")
    ask(page, ZEBRA_Q)  # no token
    expect(page.locator(".banner.error")).to_contain_text("needs an access token")
    expect(page.locator("#token")).to_be_focused()
    page.fill("#token", TOKEN)
    page.reload()
    assert page.input_value("#token") == TOKEN
    page.fill("#question", ZEBRA_Q)
    page.press("#question", "Enter")
    wait_for_result(page)
    expect(page.locator("#answer button.chip").first).to_be_visible()
    # The token went to the API only as a bearer header: it is in this tab's storage, not in the URL.
    assert TOKEN not in page.url


# -- a deployment with a model ----------------------------------------------------------------------

POLICY = "https://policies.tessellate.example/finance/travel-and-expenses"
HOW_TO = "https://wiki.tessellate.example/finance/how-to-submit-expenses"
DEADLINE = "Expense reports must be submitted in Ledgerly within 30 days of the trip's end date."
HOTEL = ("The nightly hotel cap is 250 USD in standard United States cities and 350 USD in New York, "
         "San Francisco, Boston and Seattle.")
INVENTED = "Employees may expense a personal yacht for team offsites every quarter."
# Everything the page's answer ever shows while the run streams (recorded in the page, read at the end).
ANSWER_RECORDER = """
window.__answers = [];
new MutationObserver(() => {
  const answer = document.getElementById("answer");
  if (answer && answer.textContent) window.__answers.push(answer.textContent);
}).observe(document, {subtree: true, childList: true, attributes: true, characterData: true});
"""


def test_only_the_verified_answer_is_shown(served_llm: DevServer, model: OpenAIServer,
                                           desktop: Watched, tmp_path: Path) -> None:
    # The model quotes one page, cites another page's sentence to the wrong page, invents a passage,
    # and its draft repeats the invention, which verification then removes.
    model.script(extract=[passages_reply((POLICY, DEADLINE), (HOW_TO, HOTEL), (POLICY, INVENTED))],
                 generate=[Reply(content=f"{DEADLINE} [{POLICY}] Staff may expense a personal yacht every quarter. "
                                 f"[{POLICY}]", chunk_chars=8, tokens_per_s=40)])
    page = desktop.page
    page.add_init_script(ANSWER_RECORDER)
    page.goto(f"{served_llm.url}/")
    ask(page, Q)
    # The draft's unsupported sentence is never shown as the answer, not even while the run streams.
    shown = page.evaluate("window.__answers")
    assert shown and not any("yacht" in text for text in shown), shown
    # The verified answer: the draft's supported sentence, cited; the unsupported one removed and listed.
    answer = page.inner_text("#answer")
    assert DEADLINE in answer and "yacht" not in answer
    expect(page.locator("#removed")).to_contain_text("personal yacht")
    chip = page.locator("#answer button.chip").first
    chip.click()
    assert "".join(active_marks(page)) == DEADLINE
    # The evidence trail shows what the model proposed and what alignment rejected or moved.
    actions = page.eval_on_selector_all("#trail li.decision", "lis => lis.map(li => li.dataset.action)")
    assert {"kept", "relinked", "dropped"} <= set(actions)
    dropped = page.locator("#trail li.decision[data-action=dropped]").first
    expect(dropped).to_contain_text(INVENTED)
    expect(dropped).to_contain_text("0.00")
    relinked = page.locator("#trail li.decision[data-action=relinked]").first
    expect(relinked.locator(f'a[href="{HOW_TO}"]')).to_have_count(1)
    expect(relinked.locator(f'a[href="{POLICY}"]')).to_have_count(1)
    page.locator("#trail-panel").screenshot(path=tmp_path / "evidence-trail.png")
    assert desktop.errors == [] and desktop.console == []


def test_a_model_failure_is_said_plainly(served_llm: DevServer, model: OpenAIServer, desktop: Watched) -> None:
    model.script(extract=[passages_reply((POLICY, DEADLINE))],
                 generate=[Reply(status=500, error="the model is overloaded")])
    page = desktop.page
    page.goto(f"{served_llm.url}/")
    ask(page, Q)
    banner = page.locator(".banner.warn")
    expect(banner).to_contain_text("Degraded")
    expect(banner).to_contain_text("the model failed")
    # The answer still comes, from the documents, and its citations still open their spans.
    page.locator("#answer button.chip").first.click()
    assert active_marks(page)
