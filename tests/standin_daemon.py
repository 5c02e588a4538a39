"""A broken daemon for the plugins' tests: it answers every hook with what the test says, on a
Unix socket of the test's own, and records what it was asked (tests/clients/, tests/e2e/)."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
from pathlib import Path
from typing import Any

import ctxd_wire as wire

__all__ = ["StandIn"]


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
            with conn:
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
