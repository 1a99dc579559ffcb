"""`evident sources`: list the configured sources and check that each one answers.

`evident index --config` also lands here: it refreshes the sources that have an embedded index
(local folders, crawled documentation sites, LangChain loaders); wikis are searched live and need no index.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from evident.commands.common import fail, print_json, safe_text, warn
from evident.connectors.config import (
    Defaults,
    DocsSettings,
    LoaderSettings,
    LocalSettings,
    PostgresSettings,
    build_sources,
    parse_settings,
    postgres_dsn,
)
from evident.connectors.federated import FederatedRetriever
from evident.connectors.index.loaders import CorpusError, CorpusLimits
from evident.connectors.source import SourceConfigError, SourceFailure
from evident.context import EvidentContext
from evident.embeddings import EmbeddingsError, resolve_embeddings
from evident.settings import ConfigError

PROBE_QUERY = "help"


def _context(config: Path | None) -> Any:
    try:
        return EvidentContext.from_env(config)
    except ConfigError as exc:
        fail("sources", str(exc))


def _raw_sources(ctx: Any) -> list[Any]:
    """The configured sources; with none, the default corpus is the one source there is."""
    if ctx.sources:
        extra: list[dict[str, Any]] = (
            [{"name": "local", "type": "local", "paths": list(ctx.corpus)}] if ctx.corpus else []
        )
        if extra and ctx.index_path:
            extra[0]["index_path"] = ctx.index_path
        names = {s.get("name") for s in ctx.sources if isinstance(s, dict)}
        if extra and "local" in names:
            extra[0]["name"] = "corpus"
        return [*extra, *ctx.sources]
    return [{"name": "local", "type": "local", "paths": ctx.corpus_paths()}]


def check_sources(ctx: Any, query: str = PROBE_QUERY) -> list[dict[str, Any]]:
    """One row per source: its settings summary and how it answered `query` (no titles, no text)."""
    raws = _raw_sources(ctx)
    sources, errors = build_sources(raws, Defaults(k=ctx.k, timeout_s=ctx.retrieve_timeout_s))
    result = FederatedRetriever(sources=sources, unavailable=errors, top_n=ctx.top_n).search(query)
    runs = {r.source: r for r in result.runs}
    messages: dict[str, str] = {}
    for error in result.errors:
        messages.setdefault(error.source, error.message)
    built = {s.name: s for s in sources}
    rows = []
    for position, raw in enumerate(raws, start=1):
        label = raw.get("name") if isinstance(raw, dict) else None
        name = label if isinstance(label, str) else f"#{position}"
        run = runs.get(name)
        source = built.get(name)
        rows.append({
            "name": name,
            "type": raw.get("type", "") if isinstance(raw, dict) else "",
            "source_type": source.source_type if source else "",
            "status": run.status if run else "config",
            "latency_ms": run.latency_ms if run and run.status != "config" else None,
            "documents": (run.documents + run.denied) if run else 0,
            "timeout_s": source.timeout_s if source else None,
            "message": messages.get(name, ""),
        })
    return rows


def run(config: Path | None, *, query: str, json_out: bool) -> int:
    ctx = _context(config)
    rows = check_sources(ctx, query)
    healthy = all(row["status"] in {"ok", "empty"} for row in rows)
    if json_out:
        print_json({"query": query, "ok": healthy, "sources": rows})
    else:
        table = Table(title=f"Sources (probe query {query!r})", expand=False)
        for column in ("name", "type", "status", "latency", "hits", "message"):
            table.add_column(column, overflow="fold")
        for row in rows:
            colour = "green" if row["status"] in {"ok", "empty"} else "red"
            latency = f"{row['latency_ms']:.0f} ms" if row["latency_ms"] is not None else "-"
            table.add_row(escape(safe_text(row["name"])), escape(row["type"]), f"[{colour}]{row['status']}[/]",
                          latency, str(row["documents"]), escape(safe_text(row["message"])))
        Console(highlight=False, soft_wrap=True).print(table)
    return 0 if healthy else 1


def _skip_warning(source: str) -> Callable[[Any, str], None]:
    """What `evident index` says about a file, page or loaded item of `source` that it skipped."""
    return lambda what, why: warn("index", f"{source}: skipped {what}: {why}")


def _refresh_postgres(settings: Any, ctx: Any, on_skip: Callable[[Any, str], None]) -> dict[str, Any]:
    """Refresh a PostgreSQL source from its paths, then give it the configured embeddings' vectors (a
    failure of the embeddings is a warning: the source ranks by words until the next run)."""
    # optional dependency: psycopg, the [postgres] extra
    from evident.connectors.postgres.connections import Connections
    from evident.connectors.postgres.refresh import embed_missing, refresh
    dsn = postgres_dsn(settings)
    connections = Connections(dsn, connect_timeout_s=settings.timeout_s or 15.0, statement_timeout_ms=None)
    stats = refresh(connections, settings.db_schema, settings.text_search_config,
                    [settings.path(p) for p in settings.paths], limits=CorpusLimits.from_settings(settings),
                    on_skip=on_skip)  # fmt: skip
    row: dict[str, Any] = dict(index=f"{dsn.where}, schema {settings.db_schema!r}", documents=stats.documents,
                               added=stats.added, updated=stats.updated, removed=stats.removed, status="ok")
    resolved = resolve_embeddings(ctx)
    if resolved.scorer is None:
        row["embeddings"] = f"off ({resolved.reason})"
        return row
    try:
        embedded = embed_missing(connections, settings.db_schema, resolved.scorer)
    except EmbeddingsError as exc:
        warn("index", f"{settings.name}: embeddings: {exc.message}; the source ranks by words until "
                      "`evident index` runs again")
        row["embeddings"] = f"failed ({exc.message})"
        return row
    row["embeddings"] = f"on ({resolved.model_id}): {embedded.documents} documents embedded"
    return row


def run_index(config: Path, only: list[str], json_out: bool) -> int:
    """Refresh the index of every local, docs and loader source in `config` (or of the ones named in `only`)."""
    # start-up time: the index writers, crawler and loaders (~0.2 s) load for a refresh, not for `evident sources`
    from evident.connectors.index.embedded import IndexFileError, LocalIndex, default_index_path
    from evident.connectors.index.loader_source import LoaderMapping, refresh_loader_index
    from evident.connectors.remote.docs_index import refresh_docs_index
    ctx = _context(config)
    raws = _raw_sources(ctx)
    known = {raw.get("name") for raw in raws if isinstance(raw, dict)}
    for name in only:
        if name not in known:
            fail("index", f"no source named {name!r} in {config}")
    rows: list[dict[str, Any]] = []
    for position, raw in enumerate(raws, start=1):
        row: dict[str, Any] = {"name": raw.get("name", f"#{position}") if isinstance(raw, dict) else f"#{position}"}
        if only and row["name"] not in only:
            continue
        try:
            settings = parse_settings(raw, position)
            row["type"] = settings.type
            if isinstance(settings, LocalSettings):
                paths = [settings.path(p) for p in settings.paths]
                target = settings.path(settings.index_path) if settings.index_path else default_index_path(paths)
                with LocalIndex(target, limits=CorpusLimits.from_settings(settings)) as index:
                    # One transaction: a vanished or renamed path can never leave the index empty.
                    stats = index.refresh(paths, on_skip=_skip_warning(row["name"]))
                    row.update(index=str(target), documents=index.count(), added=stats.added,
                               updated=stats.updated, removed=stats.removed, status="ok")
            elif isinstance(settings, DocsSettings):
                target = settings.index_file()
                refreshed = refresh_docs_index(
                    settings.crawl_settings(), target,
                    on_skip=_skip_warning(row["name"]),
                )
                row.update(index=str(target), documents=refreshed.pages, added=refreshed.added,
                           updated=refreshed.updated, removed=refreshed.removed, fetched=refreshed.fetched,
                           reused=refreshed.reused, status="ok")
            elif isinstance(settings, LoaderSettings):
                target = settings.index_file()
                loaded = refresh_loader_index(
                    settings.loader_object(),
                    LoaderMapping(source_name=settings.name, source_type=settings.source_type or "",
                                  url_template=settings.url_template, max_documents=settings.max_documents),
                    target, on_skip=_skip_warning(row["name"]),
                )
                row.update(index=str(target), documents=loaded.pages, added=loaded.added, updated=loaded.updated,
                           removed=loaded.removed, status="ok")
            elif isinstance(settings, PostgresSettings):
                row.update(_refresh_postgres(settings, ctx, _skip_warning(row["name"])))
            else:
                row.update(status="live", message="searched live; nothing to index")
        except (SourceConfigError, SourceFailure, CorpusError, IndexFileError, OSError) as exc:
            message = exc.message if isinstance(exc, (SourceConfigError, SourceFailure)) else str(exc)
            row.update(status="error", message=message)
            warn("index", f"{row['name']}: {message}")
        rows.append(row)
    if json_out:
        print_json({"config": str(config), "sources": rows})
    else:
        for row in rows:
            if row["status"] == "ok":
                print(safe_text(f"{row['name']}: {row['documents']} documents ({row['added']} added, "
                                f"{row['updated']} updated, {row['removed']} removed) in {row['index']}"))
            elif row["status"] == "live":
                print(safe_text(f"{row['name']}: {row['message']}"))
    return 1 if any(row["status"] == "error" for row in rows) else 0
