"""A stand-in for the daemon on a private socket, for `ctxd doctor`'s runs of installed hooks.

Doctor runs the hook commands an agent really has in its settings, on a real payload, with
`CTXD_SOCKET` pointing here: the command goes through everything the agent's run goes through
(its interpreter, the copied client, the wire), yet no probe session appears in the user's
daemon. Each request is parsed with ctxd's own parser for that agent and answered with what
ctxd's renderer makes of a fixed reply, so doctor can tell whether the command printed the answer
verbatim, printed something else, or never asked.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import ctxd_wire as wire

from ctxd import agents, protocol
from ctxd.core.events import Reply
from ctxd.errors import CtxdError

__all__ = ["PROBE_TEXT", "Exchange", "ProbeServer", "open_probe"]

#: The context text every probe answer carries.
PROBE_TEXT = "ctxd doctor: probe answer, not a real warning"
#: The line a statusline probe is answered with.
PROBE_LINE = b"ctxd doctor probe\n"


@dataclass(frozen=True, slots=True)
class Exchange:
    """One request the probe served: the answer's result bytes, or why it refused."""

    agent: str
    event: str | None
    answer: bytes
    error: str | None = None


class ProbeServer:
    """Serve hook requests on `path` from a thread until `close`; `exchanges` in order."""

    def __init__(self, directory: Path) -> None:
        self.path = directory / "probe.sock"
        self.exchanges: list[Exchange] = []
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._sock.bind(str(self.path))
        self._sock.listen(8)
        self._sock.settimeout(0.1)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="ctxd-doctor-probe", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            # One bad request must not end the probe.
            with conn, contextlib.suppress(OSError, ValueError):
                self._handle(conn)

    def _handle(self, conn: socket.socket) -> None:
        conn.settimeout(5)
        request = protocol.decode_request(wire.read_frame(conn, wire.MAX_REQUEST))
        agent = str(request.header.get("agent"))
        hint = request.header.get("event")
        event = str(hint) if hint else None
        try:
            answer = self._answer(agent, event, request.payload)
        except CtxdError as exc:
            self.exchanges.append(Exchange(agent, event, b"", str(exc)))
            conn.sendall(protocol.encode_error(str(exc)))
            return
        self.exchanges.append(Exchange(agent, event, answer))
        conn.sendall(protocol.encode_ok(answer))

    @staticmethod
    def _answer(agent: str, event: str | None, payload: bytes) -> bytes:
        spec = agents.spec(agent)
        if event == "statusline" and spec.statusline is not None:
            spec.statusline.parse(payload)
            return PROBE_LINE
        hook = agents.parse(agent, payload, event)
        return agents.render(hook, Reply(context=PROBE_TEXT))

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self._sock.close()


@contextlib.contextmanager
def open_probe() -> Iterator[ProbeServer]:
    """A `ProbeServer` in a fresh private directory, removed afterwards."""
    directory = Path(tempfile.mkdtemp(prefix="ctxd-doctor-"))
    os.chmod(directory, 0o700)
    server = ProbeServer(directory)
    try:
        yield server
    finally:
        server.close()
        shutil.rmtree(directory, ignore_errors=True)
