"""What the Unix-socket server and the HTTP server share: one accept loop, the accepted
connection's awaits, and the bounds that mean the same for both.

The loop accepts until `stopping` is set, then lets the connections already accepted finish
(each bounded by its own deadline) instead of cutting them off mid-answer. It hands every socket
to its server's `accepted`, which serves it on the spot, starts a task for it or keeps it for
`settle`, and never raises for one bad client. After `batch` sockets in a row, and whenever the
backlog is empty, it awaits the server's `settle`, which finishes what `accepted` kept (the HTTP
server looks up the owners of a whole batch at once) and lets other tasks run: a flood of
connections must not starve the watcher, signals, or connections that wait.

accept() failing for lack of descriptors or memory (EMFILE, ENFILE, ENOBUFS, ENOMEM) is logged,
the connection that has waited longest for its request dropped to free a descriptor, and
accepting resumes after ACCEPT_BACKOFF (as trio's `serve_listeners` does): an overloaded daemon
is still a daemon. Other failures (a connection aborted before it was accepted) are logged and
retried alike; only a listener that is gone ends the loop.

Connections are plain non-blocking sockets awaited with `anyio.wait_readable`/`wait_writable`
rather than anyio streams, whose per-connection machinery cost more than the request itself
(bench/daemon_load.py).
"""

from __future__ import annotations

import errno
import logging
import socket
import time
from collections.abc import Callable
from typing import Protocol, TypeVar

import anyio
import anyio.lowlevel
from anyio.abc import TaskGroup

__all__ = [
    "ACCEPT_BACKOFF",
    "INLINE_BURST",
    "RECEIVE_SIZE",
    "REQUEST_DEADLINE",
    "Accepting",
    "Acceptor",
    "Connection",
]

logger = logging.getLogger(__name__)

#: Seconds a request has, from its connection's first byte to its answer's last.
REQUEST_DEADLINE = 5.0
RECEIVE_SIZE = 65536
#: Bytes handed to the kernel per send call; big answers go out in turns with other work.
SEND_SLICE = 256 * 1024
#: Sockets handed on before the loop lets other tasks run (a server's usual `batch`).
INLINE_BURST = 32
ACCEPT_BACKOFF = 0.1
ACCEPT_LOG_EVERY = 10.0  # seconds between log lines about the same accept() failure
OUT_OF_RESOURCES = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})
_LISTENER_GONE = frozenset({errno.EBADF, errno.EINVAL, errno.ENOTSOCK})

_A = TypeVar("_A")
_T = TypeVar("_T")


class Accepting(Protocol):
    """What a server gives the accept loop."""

    @property
    def in_flight(self) -> int:
        """Connections open now (for the log line about a failed accept)."""
        ...

    @property
    def batch(self) -> int:
        """Sockets accepted in a row before `settle`."""
        ...

    def accepted(self, sock: socket.socket, connections: TaskGroup) -> None:
        """Serve `sock`, at once, in a task of `connections`, or in `settle`; never raises."""

    async def settle(self, connections: TaskGroup) -> None:
        """Serve what `accepted` kept since the last call; let other tasks run. Never raises
        for one bad client; the sockets it still holds are closed if it is cancelled."""

    def make_room(self) -> bool:
        """Drop the connection that has waited longest for its request; False if none waits."""
        ...


class Acceptor:
    """The accept loop of one server, and its count of accept() failures."""

    def __init__(self, server: Accepting, name: str) -> None:
        self.server = server
        self.name = name  # in log lines: which listener failed
        self.errors = 0
        self._logged: dict[int | None, float] = {}

    async def serve(self, listener: socket.socket, stopping: anyio.Event) -> None:
        """Accept on `listener` until `stopping` is set, then wait for the connections already
        accepted. The listener is closed on return."""
        listener.setblocking(False)
        with listener:
            async with anyio.create_task_group() as connections:
                with anyio.CancelScope() as accepting:

                    async def stop_accepting() -> None:
                        await stopping.wait()
                        accepting.cancel()

                    connections.start_soon(stop_accepting)
                    served = 0
                    while True:
                        try:
                            sock, _ = listener.accept()
                        except BlockingIOError:
                            if served:
                                served = 0
                                await self.server.settle(connections)
                                continue  # more may have come meanwhile
                            await anyio.wait_readable(listener)
                            continue
                        except OSError as exc:
                            if exc.errno in _LISTENER_GONE:
                                raise
                            self._failed(exc)
                            await anyio.sleep(ACCEPT_BACKOFF)
                            continue
                        self.server.accepted(sock, connections)
                        served += 1
                        if served >= self.server.batch:
                            served = 0
                            await self.server.settle(connections)

    def _failed(self, exc: OSError) -> None:
        self.errors += 1
        if exc.errno in OUT_OF_RESOURCES:
            self.server.make_room()  # its descriptor is free for the next accept
        now = time.monotonic()
        if now - self._logged.get(exc.errno, -ACCEPT_LOG_EVERY) >= ACCEPT_LOG_EVERY:
            self._logged[exc.errno] = now
            logger.error(
                "%s: accept() failed (%s); %d connections open; accepting again in %g s",
                self.name,
                exc.strerror or exc,
                self.server.in_flight,
                ACCEPT_BACKOFF,
            )


class Connection:
    """One accepted, non-blocking socket with the awaits a request needs."""

    __slots__ = ("sock",)

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock

    async def receive(self, max_bytes: int) -> bytes:
        """Some bytes (at most `max_bytes`); `anyio.EndOfStream` when the peer closed."""
        data = await self._when_readable(self.sock.recv, max_bytes)
        if not data:
            raise anyio.EndOfStream
        return data

    async def receive_into(self, view: memoryview) -> int:
        """Fill some of `view`; how many bytes. `anyio.EndOfStream` when the peer closed."""
        size = await self._when_readable(self.sock.recv_into, view)
        if not size:
            raise anyio.EndOfStream
        return size

    async def _when_readable(self, read: Callable[[_A], _T], arg: _A) -> _T:
        while True:
            try:
                return read(arg)
            except BlockingIOError:
                await anyio.wait_readable(self.sock)

    async def send(self, data: bytes | memoryview) -> None:
        view = memoryview(data)
        while view:
            try:
                # At most SEND_SLICE at a time, others' turn between: the kernel copying a
                # status of megabytes into a roomy socket in one go held the event loop.
                sent = self.sock.send(view[:SEND_SLICE])
            except BlockingIOError:
                await anyio.wait_writable(self.sock)
                continue
            view = view[sent:]
            if view:
                await anyio.lowlevel.checkpoint()
