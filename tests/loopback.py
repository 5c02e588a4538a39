"""A loopback TCP port of the test's own, for the listeners tests start (ctxd's `[http]`, a
Prometheus, a mock API): the kernel picks one that is free, never a default a user's own ctxd
may hold."""

from __future__ import annotations

import socket


def free_port() -> int:
    """A port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
