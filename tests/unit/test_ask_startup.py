"""The collector pause of a cold `evident ask` (issue 29 item 7; benchmarks/startup.py measures it)."""

from __future__ import annotations

import gc

from evident.cli import collector_paused


def test_the_collector_is_off_while_paused_and_back_after() -> None:
    assert gc.isenabled()
    with collector_paused():
        assert not gc.isenabled()
    assert gc.isenabled()
    gc.unfreeze()


def test_a_collector_switched_off_by_the_caller_stays_off() -> None:
    gc.disable()
    try:
        with collector_paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()
