"""`evident index SOURCE… [--index PATH]`: build or refresh the embedded search index."""

from __future__ import annotations

from pathlib import Path

from evident.commands.common import fail, print_json, warn


def run(sources: list[Path], index_path: Path | None, json_out: bool) -> int:
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    from evident.connectors.index import IndexFileError, IndexStats, LocalIndex, default_index_path
    from evident.connectors.loaders import CorpusError

    if not sources:
        fail("index", "give at least one corpus folder or JSONL file")
    for src in sources:
        if not src.exists():
            fail("index", f"{src}: no such file or directory")
    target = index_path or default_index_path(sources)
    err = Console(stderr=True)
    totals = IndexStats()
    try:
        with LocalIndex(target) as index, Progress(
            TextColumn("[bold]indexing[/] {task.description}"), BarColumn(), MofNCompleteColumn(),
            console=err, transient=True, disable=not err.is_terminal,
        ) as bar:
            for src in sources:
                task = bar.add_task(str(src), total=None)
                stats = index.add_corpus(
                    src,
                    progress=lambda done, total, task=task: bar.update(task, completed=done, total=total),
                    on_skip=lambda path, reason: warn("index", f"skipped {path}: {reason}"),
                )
                for field in totals.model_fields:
                    setattr(totals, field, getattr(totals, field) + getattr(stats, field))
            totals.removed += index.retain_roots(sources)
            count = index.count()
    except (CorpusError, IndexFileError, OSError) as exc:
        fail("index", str(exc))
    if count == 0:
        fail("index", f"no documents found in {', '.join(map(str, sources))}")
    if json_out:
        print_json({"index": str(target), "documents": count, **totals.model_dump()})
    else:
        print(
            f"{target}: {count} documents ({totals.added} added, {totals.updated} updated, "
            f"{totals.unchanged} unchanged, {totals.removed} removed, {totals.skipped} skipped)"
        )
    return 0
