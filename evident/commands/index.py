"""`evident index SOURCE… [--index PATH] [--rebuild]`: build or refresh the embedded search index."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from evident.commands.common import fail, log_warnings_to_stderr, print_json, safe_text, warn
from evident.connectors.index.corpus import IndexStats
from evident.connectors.index.embedded import (
    IndexFileError,
    LocalIndex,
    default_index_path,
    rebuild_index,
)
from evident.connectors.index.loaders import CorpusError, CorpusLimits
from evident.context import EvidentContext
from evident.embeddings import EmbeddingsError, resolve_embeddings
from evident.settings import ConfigError


def run(
    sources: list[Path],
    index_path: Path | None,
    json_out: bool,
    *,
    rebuild: bool = False,
    follow_symlinks: bool | None = None,
    max_file_mb: float | None = None,
    section_chars: int | None = None,
    exclude: list[str] | None = None,
) -> int:
    log_warnings_to_stderr()
    if not sources:
        fail("index", "give at least one corpus folder or JSONL file")
    for src in sources:
        if not src.exists():
            fail("index", f"{src}: no such file or directory (the index was left as it was)")
    try:
        settings = EvidentContext.from_env(
            None, follow_symlinks=follow_symlinks, max_file_mb=max_file_mb, section_chars=section_chars,
            exclude=exclude,
        )
    except ConfigError as exc:
        fail("index", str(exc))
    limits = CorpusLimits.from_settings(settings)
    target = index_path or default_index_path(sources)
    err = Console(stderr=True)
    with Progress(
        TextColumn("[bold]indexing[/] {task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
        TextColumn("left"), TimeRemainingColumn(), console=err, transient=True, disable=not err.is_terminal,
    ) as bar:
        tasks: dict[Path, Any] = {}
        lines: dict[Path, ProgressLines] = {}

        def progress(root: Path, done: int, total: int) -> None:
            if root not in tasks:
                tasks[root] = bar.add_task(str(root), total=None)
                lines[root] = ProgressLines(f"reading {root}", "files")
            bar.update(tasks[root], completed=done, total=total)
            if bar.disable:
                lines[root].update(done, total)

        def skipped(path: Path, reason: str) -> None:
            warn("index", f"skipped {path}: {reason}")

        try:
            if rebuild:
                totals, count = rebuild_index(target, sources, limits=limits, progress=progress, on_skip=skipped)
            else:
                with LocalIndex(target, limits=limits) as index:
                    totals = index.refresh(sources, progress=progress, on_skip=skipped)
                    count = index.count()
        except (CorpusError, IndexFileError, OSError) as exc:
            fail("index", str(exc))
        vectors = _embed(target, settings, bar)
    assert isinstance(totals, IndexStats)
    if json_out:
        print_json({"index": str(target), "documents": count, **totals.model_dump(), "embeddings": vectors})
    else:
        print(safe_text(
            f"{target}: {count} documents ({totals.added} added, {totals.updated} updated, "
            f"{totals.unchanged} unchanged, {totals.removed} removed, {totals.skipped} skipped)"
        ))
        print(safe_text(f"embeddings: {vectors['summary']}"))
    return 0


def _embed(target: Path, settings: Any, bar: Any) -> dict[str, Any]:
    """Give the index the vectors of the configured embeddings (only documents without them); on any
    failure the index keeps what it has and ranks by words until the next run (a warning, exit 0)."""
    resolved = resolve_embeddings(settings)
    if resolved.scorer is None:
        return {"on": False, "summary": f"off ({resolved.reason})"}
    task = bar.add_task(f"embedding with {resolved.provider}", total=None)
    lines = ProgressLines("embedding", "documents") if bar.disable else None

    def progress(done: int, total: int) -> None:
        bar.update(task, completed=done, total=total)
        if lines is not None:
            lines.update(done, total)

    try:
        with LocalIndex(target) as index:
            stats = index.embed(resolved.scorer, progress=progress)
    except EmbeddingsError as exc:
        warn("index", f"embeddings: {exc.message}; the index ranks by words until `evident index` runs again")
        return {"on": True, "model": resolved.model_id, "error": exc.message,
                "summary": f"failed ({exc.message}); ranking by words"}
    except IndexFileError as exc:
        fail("index", str(exc))
    done = f"{stats.documents} documents ({stats.windows} windows) embedded in {stats.seconds:.1f} s"
    return {"on": True, "model": resolved.model_id, "embedded_documents": stats.documents,
            "windows": stats.windows, "seconds": round(stats.seconds, 2), "reset": stats.reset,
            "summary": f"on ({resolved.model_id}): {done if stats.documents else 'up to date'}"}


class ProgressLines:
    """Progress where no bar can be drawn (stderr is a file, a pipe, a CI log): a line every `every_s`
    seconds, with the time elapsed and an estimate of the time left, and one at the end of a run that
    printed any (a run shorter than `every_s` prints none)."""

    def __init__(self, what: str, unit: str, every_s: float = 10.0, clock: Any = time.monotonic) -> None:
        self.what = what
        self.unit = unit
        self.every_s = every_s
        self._clock = clock
        self._started = clock()
        self._last = self._started
        self._printed = False

    def update(self, done: int, total: int) -> None:
        now = self._clock()
        if now - self._last < self.every_s and not (done >= total and self._printed):
            return
        self._last = now
        self._printed = True
        print(self.line(done, total, now - self._started), file=sys.stderr, flush=True)

    def line(self, done: int, total: int, elapsed: float) -> str:
        share = done / total if total else 1.0
        left = f", about {_duration(elapsed * (1 - share) / share)} left" if 0 < share < 1 else ""
        return (f"evident index: {self.what}: {done:,} of {total:,} {self.unit} ({share:.0%}), "
                f"{_duration(elapsed)} elapsed{left}")


def _duration(seconds: float) -> str:
    seconds = round(seconds)
    if seconds < 60:
        return f"{seconds} s"
    minutes, seconds = divmod(seconds, 60)
    return f"{minutes} min {seconds:02d} s" if minutes < 60 else f"{minutes // 60} h {minutes % 60:02d} min"
