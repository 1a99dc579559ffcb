"""`evident verify --answer ANSWER.json`: re-check a stored answer's citations against their sources now.

The answer is what `evident ask --json` printed (or an EvidenT tool's artifact). Each cited document is read
again through the configured sources (`--corpus`, `--config`, `--index`, as for `ask`), as the caller
(`--user`, `--group`) may see it now; one line per citation says `unchanged`, `moved` (the new spans),
`changed` (the nearest passage and its overlap) or `gone` (deleted or no longer visible: the same answer),
or `unchecked` when its source could not be asked. `--json` prints `{"query", "checks": [...], "counts"}`.

Exit code: 0 when every quote still stands (unchanged or moved), 1 when one does not (changed, gone or
unchecked), 2 on bad input.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from evident.commands.common import fail, print_json, safe_text, span_notation
from evident.context import EvidentContext
from evident.settings import ConfigError

COMMAND = "verify"
STALE = 1


def _read_answer(path: Path) -> dict[str, Any]:
    if not path.exists():
        fail(COMMAND, f"{path}: no such file")
    if path.is_dir():
        fail(COMMAND, f"{path}: is a directory, expected the JSON output of `evident ask --json`")
    try:
        value = json.loads(path.read_bytes().decode("utf-8"))
    except UnicodeDecodeError:
        fail(COMMAND, f"{path}: not valid UTF-8")
    except json.JSONDecodeError as exc:
        fail(COMMAND, f"{path}: invalid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})")
    except OSError as exc:
        fail(COMMAND, f"{path}: cannot read: {exc.strerror or exc}")
    if not isinstance(value, dict):
        fail(COMMAND, f"{path}: expected a JSON object (one answer of `evident ask --json`)")
    return value


def _line(check: Any) -> str:
    where = f"{check.url} {span_notation(check.spans)}".strip()
    if check.outcome == "moved":
        return f"moved      {where} → {span_notation(check.spans_now)}"
    if check.outcome == "changed":
        nearest = f': nearest "{check.nearest}"' if check.nearest else ": nothing of the quote remains"
        return f"changed    {where} (overlap {check.overlap:.2f}){nearest}"
    if check.outcome == "unchecked":
        return f"unchecked  {where}: {check.reason}"
    return f"{check.outcome:<10} {where}"


def run(answer: Path, *, corpus: list[Path] | None, config: Path | None, index: Path | None,
        principal: dict[str, Any] | None, json_out: bool) -> int:
    """Run the command; returns the exit code (0 all stand, 1 some do not, 2 bad input)."""
    data = _read_answer(Path(answer))
    for path in corpus or []:
        if not path.exists():
            fail(COMMAND, f"{path}: corpus path does not exist")
    # start-up time: the passages mode never loads LangChain; this mode needs the sources
    from evident.agent.recheck import AnswerError, recheck_answer

    try:
        ctx = EvidentContext.from_env(config, corpus=[str(p) for p in corpus] if corpus else None,
                                      index_path=str(index) if index else None)
        if not ctx.corpus and not ctx.sources and ctx.corpus_paths():
            print(f"evident {COMMAND}: no --corpus: checking against the bundled examples ({ctx.corpus_paths()[0]}); "
                  "pass the --corpus or --config the answer was given with", file=sys.stderr)
        result = recheck_answer(data, context=ctx, principal=principal)
    except AnswerError as exc:
        fail(COMMAND, f"{answer}: {exc}")
    except ConfigError as exc:
        fail(COMMAND, str(exc))
    if json_out:
        print_json(result.model_dump(mode="json"))
    else:
        for check in result.checks:
            print(safe_text(_line(check)))
        summary = ", ".join(f"{count} {outcome}" for outcome, count in result.counts.items())
        print(f"{len(result.checks)} citation{'s' if len(result.checks) != 1 else ''}: {summary or 'none'}")
    return 0 if result.stands else STALE
