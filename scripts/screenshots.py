"""The page's screenshots in the docs, taken the way the browser tests see the page: `evident serve`
(`langgraph dev`) over the bundled examples, offline, and Debian's headless Chromium driven by
Playwright with `executable_path` (no `playwright install`).

    .venv/bin/python scripts/screenshots.py          # writes docs/page.png and docs/img/page-*.png

- docs/page.png: 1280 × 1040, a two-turn conversation, the second chip of the newest answer open;
- docs/img/page-dark.png: the same in the dark palette (`prefers-color-scheme: dark`);
- docs/img/page-phone.png: 390 × 844, a chip open in the bottom sheet;
- docs/img/page-trail.png: the evidence trail, used and unused passages told apart.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from playwright.sync_api import Browser, sync_playwright  # noqa: E402

from tests.e2e import dev_server  # noqa: E402
from tests.e2e.chromium import CHROMIUM, CHROMIUM_ARGS, ask  # noqa: E402
from tests.e2e.corpus import Q  # noqa: E402

FOLLOW_UP = "And what about the receipts?"
DOCS = ROOT / "docs"


def conversation(browser: Browser, url: str, out: Path, *, dark: bool = False) -> None:
    context = browser.new_context(viewport={"width": 1280, "height": 1040}, color_scheme="dark" if dark else "light")
    page = context.new_page()
    page.goto(f"{url}/")
    ask(page, Q)
    ask(page, FOLLOW_UP)
    chips = page.locator("#answer button.chip")
    chips.nth(min(1, chips.count() - 1)).click()
    page.locator("#current-question").scroll_into_view_if_needed()
    page.wait_for_timeout(300)
    page.screenshot(path=out)
    if not dark:
        page.keyboard.press("Escape")
        page.locator("#trail-panel").screenshot(path=DOCS / "img" / "page-trail.png")
    context.close()


def phone(browser: Browser, url: str, out: Path) -> None:
    context = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True,
                                  device_scale_factor=2)
    page = context.new_page()
    page.goto(f"{url}/")
    ask(page, Q)
    page.locator("#answer button.chip").first.click()
    page.wait_for_timeout(300)
    page.screenshot(path=out)
    context.close()


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="evident-screenshots-") as tmp:
        root = Path(tmp)
        env = {"EVIDENT_CORPUS": str(ROOT / "examples" / "corpus"), "EVIDENT_INDEX_DIR": str(root / "indexes"),
               "EVIDENT_EMBEDDINGS": "none"}
        with dev_server.running(root / "server", env=env) as server, sync_playwright() as p:
            browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
            conversation(browser, server.url, DOCS / "page.png")
            conversation(browser, server.url, DOCS / "img" / "page-dark.png", dark=True)
            phone(browser, server.url, DOCS / "img" / "page-phone.png")
            browser.close()
    for name in ("page.png", "img/page-dark.png", "img/page-phone.png", "img/page-trail.png"):
        print(DOCS / name)


if __name__ == "__main__":
    main()
