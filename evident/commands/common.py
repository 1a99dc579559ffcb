"""Shared CLI plumbing: one-line errors on stderr, JSON on stdout."""

from __future__ import annotations

import json
import sys
from typing import Any, NoReturn

import typer

USAGE_ERROR = 2


def fail(command: str, message: str, code: int = USAGE_ERROR) -> NoReturn:
    print(f"evident {command}: {message}", file=sys.stderr)
    raise typer.Exit(code)


def warn(command: str, message: str) -> None:
    print(f"evident {command}: warning: {message}", file=sys.stderr)


def print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, ensure_ascii=False) + "\n")
    sys.stdout.flush()
