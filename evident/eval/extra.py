"""The `eval` extra: the statistics and plotting packages only `evident eval` and its benchmarks use.

A plain `pip install evident-rag` leaves them out; `pip install 'evident-rag[eval]'` brings them (so does
the `dev` extra). They load lazily, at the first interval (`stats`) or figure (`plots`), which is after a
run's work: a command asks `missing()` first and refuses at once.
"""

from __future__ import annotations

import importlib.util

PACKAGES = ("statsmodels", "scipy", "matplotlib")
INSTALL_HINT = "pip install 'evident-rag[eval]'"


def missing() -> list[str]:
    """The extra's packages this interpreter cannot import, in `PACKAGES` order (found, not imported)."""
    absent = []
    for name in PACKAGES:
        try:
            found = importlib.util.find_spec(name) is not None
        except (ImportError, ValueError):  # a finder that refuses the name; a module without a spec
            found = False
        if not found:
            absent.append(name)
    return absent


def problem() -> str | None:
    """One line naming the missing packages and the extra that brings them, or None when all are there."""
    absent = missing()
    if not absent:
        return None
    return f"needs the eval extra ({', '.join(absent)} missing): {INSTALL_HINT}"
