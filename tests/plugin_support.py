"""What the tests of ctxd's OpenCode plugin and pi extension share (tests/clients/, tests/e2e/):
where pi's extension loader is, and a broken daemon that answers every hook with what the test
says, on a Unix socket of the test's own, recording what it was asked."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import threading
from pathlib import Path
from typing import Any

import ctxd_wire as wire

__all__ = ["JITI", "StandIn"]

#: pi's extension loader (jiti, which pi itself loads extensions with), where
#: tests/e2e/install-agents.sh installs pi 1.x, else pi 0.x.
_CACHE = Path(os.environ.get("CTXD_E2E_CACHE") or Path(__file__).parent / "e2e" / ".cache")
JITI = next(
    (
        path
        for path in (
            _CACHE / "pi/node_modules/jiti/lib/jiti.mjs",
            _CACHE / "npm/node_modules/jiti/lib/jiti.mjs",
        )
        if path.exists()
    ),
    _CACHE / "pi/node_modules/jiti/lib/jiti.mjs",
)


class StandIn:
    """A daemon that answers the hooks with `results` in turn, the last one for ever after (a
    broken one), on a Unix socket of its own, from a thread: it records each request's payload
    and, per answer, how many of its bytes the client took before hanging up."""

    def __init__(self, path: Path, results: tuple[bytes, ...]) -> None:
        self.path = path
        self.answers = [wire.frame(wire.OK_HEADER + b"\n" + r) for r in results]
        self.payloads: list[dict[str, Any]] = []
        self.sent: list[int] = []
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._sock.bind(str(path))
        self._sock.listen(8)
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return  # closed
            # A client that hangs up mid-request (an agent exiting) ends that exchange only.
            with conn, contextlib.suppress(OSError, ValueError):
                conn.settimeout(10)
                body = wire.read_frame(conn, wire.MAX_REQUEST)
                self.payloads.append(json.loads(body.partition(b"\n")[2]))
                answer = self.answers[min(len(self.sent), len(self.answers) - 1)]
                self.sent.append(self._send(conn, answer))

    def _send(self, conn: socket.socket, answer: bytes) -> int:
        view = memoryview(answer)
        done = 0
        with contextlib.suppress(OSError):  # the client hung up
            while done < len(view):
                done += conn.send(view[done : done + 65536])
        return done

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)
        self._sock.close()
        self._thread.join(5)
