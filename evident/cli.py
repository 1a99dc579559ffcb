"""The `evident` command line.

Commands import their implementation lazily: `evident verify` must start fast and must not pull
in LangChain or LangGraph, and every command must turn bad input into one clear line and a
non-zero exit code rather than a traceback.
"""

from __future__ import annotations

import gc
import sys
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Annotated, Any

import typer

from evident.commands.common import error_object, errors_as_json, fail, print_json

# Plain help (rich_markup_mode=None): Typer's boxed help writes a type such as `<bool>` after every
# flag, and leaving it out spares `--help` importing rich's layout.
app = typer.Typer(
    name="evident",
    help="EvidenT: answers from your documents, every sentence cited to an exact source span.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


def _json_errors(value: bool) -> bool:
    # Eager, so that even a bad value of a later option is answered in JSON when --json was given.
    errors_as_json(value)
    return value


# Options several commands share, declared once so their names and help read the same everywhere.
JsonFlag = Annotated[
    bool, typer.Option("--json", help="Machine-readable JSON output (errors too).", callback=_json_errors,
                       is_eager=True)]
ConfigFile = Annotated[Path | None, typer.Option("--config", metavar="FILE", help="evident.toml settings file.")]
CorpusPaths = Annotated[
    list[Path] | None, typer.Option("--corpus", metavar="PATH", help="Corpus folder or JSONL (repeatable).")]


@app.command()
def verify(
    docs: Annotated[
        Path | None, typer.Option("--docs", metavar="FILE", help="JSONL of documents: {url, content|text}.")] = None,
    passages: Annotated[
        Path | None, typer.Option("--passages", metavar="FILE", help="JSONL of passages: {passage_id, url, content}.")
    ] = None,
    answer: Annotated[
        Path | None, typer.Option("--answer", metavar="FILE",
                                  help="An answer `evident ask --json` printed: re-check its citations against "
                                       "the sources now (with --corpus/--config/--index, --user/--group).")
    ] = None,
    corpus: CorpusPaths = None,
    config: ConfigFile = None,
    index_path: Annotated[Path | None, typer.Option("--index", metavar="FILE", help="Index file to use.")] = None,
    user: Annotated[
        str | None, typer.Option("--user", metavar="NAME", help="With --answer: check as this user.")] = None,
    group: Annotated[
        list[str] | None, typer.Option("--group", metavar="GROUP", help="A group of --user (repeatable).")] = None,
    n: Annotated[int, typer.Option("--n", metavar="N", help="n-gram size.")] = 5,
    threshold: Annotated[float, typer.Option("--threshold", metavar="T", help="Overlap threshold in [0, 1].")] = 0.7,
    drift: Annotated[
        str, typer.Option("--drift", metavar="MODE", help="'extended' (default) or 'paper' (search only at overlap 0).")
    ] = "extended",
    json_out: JsonFlag = False,
) -> None:
    """Check passages against documents (--docs, --passages): one keep/truncate/relink/drop decision per
    passage; or re-check a stored answer's citations against their sources now (--answer)."""
    if answer is not None:
        if docs is not None or passages is not None:
            fail("verify", "give either --answer or --docs with --passages, not both")
        # start-up time: the answer mode loads the sources; the passages mode must not load LangChain
        from evident.commands.verify_answer import run as run_answer

        principal = {"user": user or "", "groups": group or []} if (user or group) else None
        raise typer.Exit(run_answer(answer, corpus=corpus, config=config, index=index_path, principal=principal,
                                    json_out=json_out))
    if docs is None or passages is None:
        fail("verify", "give --docs and --passages (alignment of passages), or --answer (re-check an answer)")
    if corpus or config is not None or index_path is not None or user or group:
        fail("verify", "--corpus, --config, --index, --user and --group go with --answer")
    # start-up time: each command loads only its own implementation (verify must not load LangChain)
    from evident.commands.verify import run

    raise typer.Exit(run(docs, passages, n=n, threshold=threshold, drift=drift, json_out=json_out))


_INDEX_CONFIG_HELP = ("Refresh the local, docs and loader sources of this evident.toml "
                      "(crawls docs sites, runs loaders).")
_REBUILD_HELP = "Build the index from scratch and replace it (a damaged index file)."


@app.command()
def index(
    sources: Annotated[
        list[Path] | None, typer.Argument(metavar="SOURCE", help="Corpus folders or JSONL files.")] = None,
    index_path: Annotated[
        Path | None, typer.Option("--index", metavar="FILE", help="Index file (default: one per set of sources).")
    ] = None,
    config: Annotated[Path | None, typer.Option("--config", metavar="FILE", help=_INDEX_CONFIG_HELP)] = None,
    only: Annotated[
        list[str] | None, typer.Option("--source", metavar="NAME", help="With --config: only this source (repeatable).")
    ] = None,
    rebuild: Annotated[bool, typer.Option("--rebuild", help=_REBUILD_HELP)] = False,
    follow_symlinks: Annotated[
        bool | None, typer.Option("--follow-symlinks", help="Index files linked from outside the corpus folders.")
    ] = None,
    max_file_mb: Annotated[
        float | None, typer.Option("--max-file-mb", metavar="MB", min=0.001, help="Skip larger files (default 20).")
    ] = None,
    section_chars: Annotated[
        int | None,
        typer.Option("--section-chars", metavar="CHARS", min=1000, help="Index longer documents as sections."),
    ] = None,
    exclude: Annotated[
        list[str] | None,
        typer.Option("--exclude", metavar="GLOB", help="Leave out these files or folders (repeatable; replaces "
                     "the default _sources, _static; --exclude '' leaves out nothing)."),
    ] = None,
    json_out: JsonFlag = False,
) -> None:
    """Build or refresh the embedded search index (only changed files are re-read)."""
    if config is not None:
        # start-up time: each command loads only its own implementation
        from evident.commands.sources import run_index

        if sources:
            fail("index", "give either corpus paths or --config, not both")
        if rebuild or follow_symlinks is not None or max_file_mb is not None or section_chars is not None or exclude:
            fail("index", "with --config, set follow_symlinks, max_file_mb, section_chars and exclude per source in "
                          "the file; --rebuild takes corpus paths")
        raise typer.Exit(run_index(config, only or [], json_out))
    # start-up time: each command loads only its own implementation
    from evident.commands.index import run

    raise typer.Exit(run(sources or [], index_path, json_out, rebuild=rebuild, follow_symlinks=follow_symlinks,
                         max_file_mb=max_file_mb, section_chars=section_chars,
                         exclude=None if exclude is None else [glob for glob in exclude if glob.strip()]))


@app.command()
def sources(
    config: ConfigFile = None,
    query: Annotated[str, typer.Option("--query", metavar="TEXT", help="Probe query sent to every source.")] = "help",
    json_out: JsonFlag = False,
) -> None:
    """List the configured sources and check that each one answers (with its latency)."""
    # start-up time: each command loads only its own implementation
    from evident.commands.sources import run

    raise typer.Exit(run(config, query=query, json_out=json_out))


@contextmanager
def collector_paused() -> Iterator[None]:
    """The cyclic garbage collector off for the duration; then what was made is set aside for good
    (`gc.freeze`) and the collector is back as it was.

    A cold start makes a few hundred thousand objects that live as long as the process (modules,
    classes, pydantic schemas, the compiled graph) and next to no garbage, and the collector kept
    walking all of them, and once more at exit: a fifth of the CPU time of one `ask`
    (benchmarks/startup.py). Frozen, they are not walked at exit; an in-process caller (a test's
    `CliRunner`) keeps what one answer left uncollected."""
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.freeze()
            gc.enable()


@app.command()
def ask(
    question: Annotated[str | None, typer.Argument(metavar="QUESTION", help="The question.")] = None,
    corpus: CorpusPaths = None,
    config: ConfigFile = None,
    index_path: Annotated[Path | None, typer.Option("--index", metavar="FILE", help="Index file to use.")] = None,
    batch: Annotated[
        Path | None,
        typer.Option("--batch", metavar="FILE", help="JSONL of {id, query, history?}: one JSON line out per line in."),
    ] = None,
    user: Annotated[
        str | None, typer.Option("--user", metavar="NAME", help="Ask as this user (document permissions).")] = None,
    group: Annotated[
        list[str] | None, typer.Option("--group", metavar="GROUP", help="A group of --user (repeatable).")] = None,
    stream: Annotated[
        bool, typer.Option("--stream", help="Show each step on stderr and the answer's tokens as they come.")
    ] = False,
    json_out: JsonFlag = False,
) -> None:
    """Answer a question: every sentence cited, every citation resolved to its source span."""
    principal = {"user": user or "", "groups": group or []} if (user or group) else None
    # One question is a short process; a batch runs as long as its file, where collecting pays.
    with collector_paused() if batch is None else nullcontext():
        # start-up time: each command loads only its own implementation
        from evident.commands.ask import run

        raise typer.Exit(
            run(question, corpus=corpus, config=config, index=index_path, batch=batch, json_out=json_out,
                principal=principal, stream=stream)
        )


@app.command()
def serve(
    host: Annotated[str, typer.Option("--host", metavar="HOST", help="Interface to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", metavar="PORT", help="Port to listen on.")] = 2024,
    config: ConfigFile = None,
    corpus: Annotated[
        list[Path] | None,
        typer.Option("--corpus", metavar="PATH", help="Corpus folder or JSONL to serve (repeatable)."),
    ] = None,
    jobs: Annotated[int, typer.Option("--jobs", metavar="N", min=1, help="Queries run at the same time.")] = 8,
    reload: Annotated[bool, typer.Option("--reload", help="Restart when the code changes (development).")] = False,
    langgraph_config: Annotated[
        Path | None,
        typer.Option("--langgraph-config", metavar="FILE", help="langgraph.json to serve (default: the project's)."),
    ] = None,
    insecure: Annotated[bool, typer.Option(
        "--insecure", help="Serve a non-loopback --host without authentication (everyone is anonymous).")] = False,
    database: Annotated[str | None, typer.Option(
        "--database", help="PostgreSQL URL for threads, runs and checkpoints: serve on Aegra (one replica).")] = None,
    redis: Annotated[str | None, typer.Option(
        "--redis", help="Redis URL that the replicas of one database share their runs through.")] = None,
    migrate: Annotated[bool, typer.Option(
        "--migrate/--no-migrate", help="Migrate the database at start (one replica of a deployment).")] = True,
    migrate_only: Annotated[bool, typer.Option(
        "--migrate-only", help="Migrate the database, then exit (the deployment's migration step).")] = False,
    json_out: JsonFlag = False,
) -> None:
    """Serve the graph with the LangGraph API server, offline: `langgraph dev` in memory, or with --database
    a replica of Aegra on PostgreSQL. Studio API, the page, /health, /version."""
    # start-up time: each command loads only its own implementation
    from evident.commands.serve import run

    raise typer.Exit(run(host=host, port=port, reload=reload, jobs=jobs, config=config, corpus=corpus,
                         langgraph_config=langgraph_config, json_out=json_out, insecure=insecure,
                         database=database, redis=redis, migrate=migrate, migrate_only=migrate_only))


_DATASET_HELP = "JSONL of {id, query, answerable?, gold_urls, gold_evidence?, answer?, history?}."
_OUT_HELP = "Folder for report.md, results.json, plots and the resumable cache."


@app.command(name="eval")
def eval_(
    dataset: Annotated[Path, typer.Option("--dataset", metavar="FILE", help=_DATASET_HELP)],
    corpus: CorpusPaths = None,
    config: ConfigFile = None,
    method: Annotated[
        list[str] | None,
        typer.Option("--method", metavar="METHOD", help="evident, pilot, direct, ges, bm25 or all (repeatable)."),
    ] = None,
    limit: Annotated[int | None, typer.Option("--limit", metavar="N", help="Only the first N questions.")] = None,
    out: Annotated[Path | None, typer.Option("--out", metavar="DIR", help=_OUT_HELP)] = None,
    ablation: Annotated[
        bool, typer.Option("--ablation", help="Also sweep n and t over the recorded extractions (paper Table 7).")
    ] = False,
    judge: Annotated[
        bool, typer.Option("--judge", help="Also ask the model whether each cited source entails its sentence.")
    ] = False,
    jobs: Annotated[
        int | None, typer.Option("--jobs", metavar="N", help="Questions run at once (default: 4 with a model, else 1).")
    ] = None,
    json_out: JsonFlag = False,
) -> None:
    """Measure EvidenT and the paper's baselines on a question file, with confidence intervals and tests."""
    # start-up time: each command loads only its own implementation
    from evident.commands.eval import run

    raise typer.Exit(run(dataset=dataset, corpus=corpus, config=config, methods=method or ["all"], limit=limit,
                         out=out, json_out=json_out, ablation=ablation, judge=judge, jobs=jobs))


model_app = typer.Typer(help="The configured chat model and embeddings.", no_args_is_help=True)
app.add_typer(model_app, name="model")


@model_app.command("check")
def model_check(
    config: ConfigFile = None,
    json_out: JsonFlag = False,
    embeddings: Annotated[
        bool, typer.Option("--embeddings", help="Check only the embeddings (no chat model needed).")
    ] = False,
) -> None:
    """Check the embeddings (provider, model, a sample similarity, or why words only), then probe the
    configured model (context window, slots, structured output, output cap, a sample extraction and
    generation) and print the settings it recommends."""
    # start-up time: each command loads only its own implementation
    from evident.commands.model import run

    raise typer.Exit(run(config, json_out=json_out, embeddings_only=embeddings))


def _asks_for_json(args: list[str]) -> bool:
    """Whether the command line has `--json` among its options (not after `--`, where it is an argument)."""
    return "--json" in (args[: args.index("--")] if "--" in args else args)


def _command_of(context: Any) -> str:
    """The command a usage error is about ("model check"), without the program's own name."""
    names: list[str] = []
    while context is not None and context.parent is not None:
        names.insert(0, str(context.info_name))
        context = context.parent
    return " ".join(names) or "evident"


def _run_for_json() -> int:
    """The app, with a usage error (an unknown option, a missing value, a bad number) answered in JSON
    too: these are found before any command runs, so `fail` never sees them."""
    try:
        code = app(standalone_mode=False)
    except typer.TyperException as exc:
        print_json(error_object(_command_of(getattr(exc, "ctx", None)), exc.format_message()))
        show = getattr(exc, "show", None)
        if callable(show):
            show()
        return exc.exit_code
    except typer.Abort:
        return 1
    return code if isinstance(code, int) else 0


def main() -> None:
    json_errors = _asks_for_json(sys.argv[1:])
    errors_as_json(json_errors)
    try:
        if json_errors:
            sys.exit(_run_for_json())
        app()
    except KeyboardInterrupt:
        print("evident: interrupted", file=sys.stderr)
        sys.exit(130)
    except Exception as exc:  # a bug of ours must still not print a traceback at the user
        print(f"evident: internal error: {type(exc).__name__}: {exc}", file=sys.stderr)
        if json_errors:
            print_json(error_object("evident", f"internal error: {type(exc).__name__}: {exc}"))
        sys.exit(1)


if __name__ == "__main__":
    main()
