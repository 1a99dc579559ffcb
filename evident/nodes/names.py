"""The graph's node names, defined once: the builder, its routes, the traces and the progress
lines all use these (framework-free, so the CLI can import them cheaply)."""

from __future__ import annotations

from typing import Final

REWRITE: Final = "rewrite"
RETRIEVE: Final = "retrieve"
EXTRACT_BATCH: Final = "extract_batch"
EXTRACT: Final = "extract"
ALIGN: Final = "align"
INSUFFICIENT: Final = "insufficient"
GENERATE: Final = "generate"
VERIFY: Final = "verify"
POSTPROCESS: Final = "postprocess"


def batch_timing(batch: object) -> str:
    """The `timings_ms` key of one extraction batch (they run in parallel, each timed on its own)."""
    return f"{EXTRACT_BATCH}_{batch}"
