"""The answer page in real headless Chromium (Debian's `chromium`, driven by Playwright with
`executable_path`): the browser's settings, a page that records what it said, and asking a question.
The fixtures built on them (`browser`, `desktop`, `phone`) are in tests/e2e/conftest.py."""

from __future__ import annotations

from pathlib import Path

from playwright.sync_api import ConsoleMessage, Dialog, Page

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run"]
DESKTOP = {"width": 1280, "height": 900}
PHONE = {"width": 360, "height": 740}
WAIT_MS = 60_000  # a deadline for a slow machine, not a timing claim


class Watched:
    """A page with every dialog, console message and uncaught error recorded."""

    def __init__(self, page: Page) -> None:
        self.page = page
        self.dialogs: list[str] = []
        self.console: list[str] = []
        self.errors: list[str] = []
        page.on("dialog", self._dialog)
        page.on("console", self._console)
        page.on("pageerror", lambda exc: self.errors.append(str(exc)))

    def _dialog(self, dialog: Dialog) -> None:
        self.dialogs.append(dialog.message)
        dialog.dismiss()

    def _console(self, message: ConsoleMessage) -> None:
        if message.type in ("error", "warning"):
            self.console.append(f"{message.type}: {message.text}")


def ask(page: Page, question: str) -> None:
    """Type the question and press Enter; return when the run is over and its result is shown."""
    page.fill("#question", question)
    page.press("#question", "Enter")
    wait_for_result(page)


def wait_for_result(page: Page) -> None:
    page.wait_for_selector("#steps [data-node=postprocess], .banner.error", timeout=WAIT_MS)
    # A selector, not `wait_for_function`: a string predicate that must be polled is evaluated in the page,
    # whose policy (script-src 'self', no 'unsafe-eval') refuses it when the page is still busy at first look.
    page.wait_for_selector("body:not([aria-busy])", state="attached", timeout=WAIT_MS)
