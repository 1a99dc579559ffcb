"""What keeps a cold `evident ask` short (issue 29 item 7; benchmarks/startup.py measures it)."""

from __future__ import annotations

import gc
import subprocess
import sys

from evident.cli import _collector_paused


def test_opening_the_index_does_not_load_the_file_readers() -> None:
    # An unchanged corpus is only walked; the readers (an HTML parser among them) load with the first changed file.
    probe = (
        "import sys\n"
        "import evident.connectors.index.retriever\n"
        "print('LOADED', sorted(m for m in sys.modules if m.startswith(('selectolax', 'pypdf'))"
        " or m in ('evident.connectors.index.formats', 'evident.connectors.index.jsonl')))\n"
    )
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split("\n")[0] == "LOADED []"


def test_the_collector_is_off_while_paused_and_back_after() -> None:
    assert gc.isenabled()
    with _collector_paused():
        assert not gc.isenabled()
    assert gc.isenabled()
    gc.unfreeze()


def test_a_collector_switched_off_by_the_caller_stays_off() -> None:
    gc.disable()
    try:
        with _collector_paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()
