"""Ports for the servers a test starts, safe when several pytest processes (xdist's workers) start them at once.

Binding port 0 and releasing it races: the kernel hands the same ephemeral port to the next `bind(0)` or
outgoing connection (of another worker, or of any client on the machine) before the server binds it.
So the ports come from below the kernel's ephemeral range (which it never hands out by itself), from a
slice of their own for each xdist worker (PYTEST_XDIST_WORKER, `gw0`, `gw1`, …), each used at most once by
a process, and only if nothing is bound to it now.
"""

from __future__ import annotations

import itertools
import os
import random
import re
import socket
import threading
from pathlib import Path

# Below Linux's default ephemeral range (32768–60999) and above the usual well-known services.
_LOW, _HIGH = 20000, 32768
_SLICES = 16  # xdist workers with a slice of their own; more share slices (the bind check still holds)
_lock = threading.Lock()
_counter: itertools.count[int] | None = None


def _ephemeral_low() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text(encoding="ascii").split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def _slice() -> range:
    high = min(_HIGH, _ephemeral_low())
    if high - _LOW < _SLICES * 64:  # an unusual ephemeral range: fall back on the whole unprivileged range
        return range(10000, 65536)
    worker = re.fullmatch(r"gw(\d+)", os.environ.get("PYTEST_XDIST_WORKER", ""))
    size = (high - _LOW) // _SLICES
    start = _LOW + size * ((int(worker.group(1)) if worker else _SLICES - 1) % _SLICES)
    return range(start, start + size)


def _unused(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port() -> int:
    """A loopback port nothing is bound to now, and not returned before by this process (until its slice wraps)."""
    global _counter
    ports = _slice()
    with _lock:
        if _counter is None:  # a random start: two test sessions on one machine seldom meet
            _counter = itertools.count(random.randrange(len(ports)))
        for _ in range(len(ports)):
            port = ports[next(_counter) % len(ports)]
            if _unused(port):
                return port
    raise RuntimeError(f"no free loopback port in {ports.start}–{ports.stop - 1}")
