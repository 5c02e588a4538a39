"""The Unix-socket server: one framed request, one framed answer, per connection.

Every connection is wrapped so that one bad client cannot hurt the others: its peer uid is
checked, its frame is bounded in size and in time, and whatever goes wrong becomes an error
answer (or, for garbage, a closed connection) — never an exception that reaches the task group.

Connections are plain non-blocking sockets awaited with `anyio.wait_readable`/`wait_writable`
rather than anyio streams: a hook is one short request per connection, and a stream's
per-connection machinery (an asyncio transport and protocol) cost more than the request
itself (bench/daemon_load.py).
"""

from __future__ import annotations

import logging
import os
import socket
import struct
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import orjson

from ctxd import protocol
from ctxd.errors import CtxdError, ProtocolError
from ctxd.protocol import Request

logger = logging.getLogger(__name__)

REQUEST_DEADLINE = 5.0
MAX_CONCURRENT = 256

Handler = Callable[[Request], Awaitable[bytes]]


def peer_uid(sock: socket.socket) -> int | None:
    """The connecting process's uid (Linux SO_PEERCRED; macOS LOCAL_PEERCRED), None if unknown."""
    if hasattr(socket, "SO_PEERCRED"):
        creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        _pid, uid, _gid = struct.unpack("3i", creds)
        return int(uid)
    local_peercred = getattr(socket, "LOCAL_PEERCRED", None)
    if local_peercred is not None:  # macOS: struct xucred {u_int version; uid_t uid; ...}
        creds = sock.getsockopt(0, local_peercred, struct.calcsize("2I"))
        return int(struct.unpack("2I", creds)[1])
    return None


class Connection:
    """One accepted, non-blocking socket with the two awaits a request needs."""

    __slots__ = ("sock",)

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock

    async def receive(self, max_bytes: int) -> bytes:
        """Some bytes (at most `max_bytes`); `anyio.EndOfStream` when the peer closed."""
        while True:
            try:
                data = self.sock.recv(max_bytes)
            except BlockingIOError:
                await anyio.wait_readable(self.sock)
                continue
            if not data:
                raise anyio.EndOfStream
            return data

    async def send(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            try:
                sent = self.sock.send(view)
            except BlockingIOError:
                await anyio.wait_writable(self.sock)
                continue
            view = view[sent:]


async def _receive_frame(conn: Connection, limit: int) -> bytes:
    """One frame's body. A hook's request usually arrives in a single read; more are made only
    when it did not."""
    data = await conn.receive(65536)
    while len(data) < protocol.HEADER_SIZE:
        data += await conn.receive(65536)
    size = protocol.frame_size(data[: protocol.HEADER_SIZE], limit)
    chunks = [data[protocol.HEADER_SIZE :]]
    received = len(chunks[0])
    while received < size:
        chunk = await conn.receive(min(size - received, 1 << 20))
        chunks.append(chunk)
        received += len(chunk)
    body = b"".join(chunks)
    if len(body) > size:
        raise ProtocolError("more bytes than the frame announced")
    return body


class Server:
    """Serves `handlers[op]` on a listener until cancelled."""

    def __init__(self, handlers: dict[str, Handler], uid: int | None = None) -> None:
        self.handlers = handlers
        self.uid = os.getuid() if uid is None else uid
        self.requests = 0
        self.refused = 0
        self.in_flight = 0

    async def serve(self, listener: socket.socket, stopping: anyio.Event) -> None:
        """Accept on the listening socket until `stopping` is set; then let the connections
        already accepted finish (bounded by their request deadline) instead of cutting them off
        mid-answer. The listener is closed on return."""
        listener.setblocking(False)
        with listener:
            async with anyio.create_task_group() as connections:
                with anyio.CancelScope() as accepting:

                    async def stop_accepting() -> None:
                        await stopping.wait()
                        accepting.cancel()

                    connections.start_soon(stop_accepting)
                    while True:
                        try:
                            sock, _ = listener.accept()
                        except BlockingIOError:
                            await anyio.wait_readable(listener)
                            continue
                        sock.setblocking(False)
                        connections.start_soon(self._guarded, sock)

    async def _guarded(self, sock: socket.socket) -> None:
        with sock:
            try:
                await self._connection(sock, Connection(sock))
            except (anyio.EndOfStream, OSError):
                pass  # the client went away; nothing to answer
            except Exception:
                logger.exception("connection failed")

    async def _connection(self, sock: socket.socket, conn: Connection) -> None:
        uid = peer_uid(sock)
        if uid is not None and uid != self.uid:
            self.refused += 1
            logger.warning("refused a connection from uid %s", uid)
            await conn.send(protocol.encode_error(f"uid {uid} may not use this daemon"))
            return
        if self.in_flight >= MAX_CONCURRENT:
            # Bounded without a CapacityLimiter, whose checkpoints cost each request two trips
            # through the event loop; a hook told "busy" prints nothing and the agent goes on.
            self.refused += 1
            await conn.send(protocol.encode_error("busy: too many requests in flight"))
            return
        self.in_flight += 1
        try:
            answer = await self._answer(conn)
        finally:
            self.in_flight -= 1
        if answer is not None:
            await conn.send(answer)

    async def _answer(self, conn: Connection) -> bytes | None:
        with anyio.move_on_after(REQUEST_DEADLINE) as scope:
            try:
                body = await _receive_frame(conn, protocol.MAX_REQUEST)
                request = protocol.decode_request(body)
            except ProtocolError as exc:
                self.refused += 1
                return protocol.encode_error(str(exc))
            self.requests += 1
            try:
                return await self.handlers[request.op](request)
            except CtxdError as exc:
                return protocol.encode_error(str(exc))
            except Exception as exc:
                logger.exception("handler for %s failed", request.op)
                return protocol.encode_error(f"internal error: {type(exc).__name__}")
        if scope.cancelled_caught:
            self.refused += 1
            return protocol.encode_error(f"request not complete within {REQUEST_DEADLINE:g} s")
        return None


def json_answer(value: Any) -> bytes:
    return protocol.encode_ok(orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS))
