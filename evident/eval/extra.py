"""The `eval` extra: the statistics and plotting packages only `evident eval` and its benchmarks use.

A plain `pip install evident-rag` leaves them out; `pip install 'evident-rag[eval]'` brings them (so does
the `dev` extra). They load lazily, at the first interval (`stats`) or figure (`plots`), which is after a
run's work: a command asks `problem()` first and refuses at once.
"""

from __future__ import annotations

import importlib.util

PACKAGES = ("statsmodels", "scipy", "matplotlib")
INSTALL_HINT = "pip install 'evident-rag[eval]'"


def problem() -> str | None:
    """One line naming the extra's packages this interpreter cannot find (looked up, not imported) and
    the install line; None when all are there."""
    absent = [name for name in PACKAGES if not _found(name)]
    return f"needs the eval extra ({', '.join(absent)} missing): {INSTALL_HINT}" if absent else None


def _found(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):  # a finder that refuses the name; a module without a spec
        return False
