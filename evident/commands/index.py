"""`evident index SOURCE… [--index PATH] [--rebuild]`: build or refresh the embedded search index."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

from evident.commands.common import fail, log_warnings_to_stderr, print_json, safe_text, warn
from evident.connectors.index.embedded import (
    IndexFileError,
    IndexStats,
    LocalIndex,
    default_index_path,
    rebuild_index,
)
from evident.connectors.index.loaders import CorpusError, CorpusLimits
from evident.context import ConfigError, EvidentContext
from evident.embeddings import EmbeddingsError, resolve_embeddings


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
        TextColumn("[bold]indexing[/] {task.description}"), BarColumn(), MofNCompleteColumn(),
        console=err, transient=True, disable=not err.is_terminal,
    ) as bar:
        tasks: dict[Path, Any] = {}

        def progress(root: Path, done: int, total: int) -> None:
            if root not in tasks:
                tasks[root] = bar.add_task(str(root), total=None)
            bar.update(tasks[root], completed=done, total=total)

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
    try:
        with LocalIndex(target) as index:
            stats = index.embed(resolved.scorer,
                                progress=lambda done, total: bar.update(task, completed=done, total=total))
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
