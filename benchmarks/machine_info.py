"""The line every benchmark prints about the machine it ran on (figures mean little without it)."""

from __future__ import annotations

import os
import platform
from pathlib import Path


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown CPU"


def describe(*extra: str) -> str:
    """CPU, core count, OS, Python, and any `extra` facts (e.g. the SQLite version)."""
    parts = [cpu_name(), f"{os.cpu_count()} CPUs", f"{platform.system()} {platform.release()}",
             f"Python {platform.python_version()} ({platform.python_implementation()})", *extra]
    return ", ".join(parts)
