"""The Unix-socket server: one framed request, one framed answer, per connection.

Every connection is wrapped so that one bad client cannot hurt the others: its peer uid is
checked, its frame is bounded in size and in time, and whatever goes wrong becomes an error
answer (or, for garbage, a closed connection) — never an exception that reaches the task group.

A hook sends its whole request right after connecting, and most answers need no waiting, so the
accept loop serves such a connection on the spot: one receive, the handler, one send, close —
no task, no deadline timer, no trip through the event loop. Only a connection whose request has
not fully arrived, whose handler must wait, or whose answer does not fit the socket buffer gets
a task of its own, with the request deadline around it. Connections are plain non-blocking
sockets awaited with `anyio.wait_readable`/`wait_writable` rather than anyio streams, whose
per-connection machinery cost more than the request itself (bench/daemon_load.py).
"""

from __future__ import annotations

import logging
import os
import socket
import struct
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import anyio.lowlevel
import orjson
from anyio.abc import TaskGroup

from ctxd import protocol
from ctxd.errors import CtxdError, ProtocolError
from ctxd.protocol import Request

logger = logging.getLogger(__name__)

REQUEST_DEADLINE = 5.0
MAX_CONCURRENT = 256
# Connections served on the spot before the accept loop lets other tasks run (the watcher,
# signals, connections that wait): a flood of hooks must not starve them.
INLINE_BURST = 32
RECEIVE_SIZE = 65536

# A handler answers at once (bytes) or, when it must wait for something, with an awaitable.
Answer = bytes | Awaitable[bytes]
Handler = Callable[[Request], Answer]

_UCRED = struct.Struct("3i")


def peer_uid(sock: socket.socket) -> int | None:
    """The connecting process's uid (Linux SO_PEERCRED; macOS LOCAL_PEERCRED), None if unknown."""
    if hasattr(socket, "SO_PEERCRED"):
        creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _UCRED.size)
        return int(_UCRED.unpack(creds)[1])
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

    async def send(self, data: bytes | memoryview) -> None:
        view = memoryview(data)
        while view:
            try:
                sent = self.sock.send(view)
            except BlockingIOError:
                await anyio.wait_writable(self.sock)
                continue
            view = view[sent:]


def _complete_frame(data: bytes, limit: int) -> bytes | None:
    """The body of the frame `data` holds, None while it is incomplete; ProtocolError when the
    frame is over `limit` or followed by more bytes than it announced."""
    if len(data) < protocol.HEADER_SIZE:
        return None
    size = protocol.frame_size(data[: protocol.HEADER_SIZE], limit)
    if len(data) - protocol.HEADER_SIZE < size:
        return None
    if len(data) - protocol.HEADER_SIZE > size:
        raise ProtocolError("more bytes than the frame announced")
    return data[protocol.HEADER_SIZE :]


async def _receive_frame(conn: Connection, received: bytes, limit: int) -> bytes:
    """One frame's body, starting from the bytes `received` already."""
    while len(received) < protocol.HEADER_SIZE:
        received += await conn.receive(RECEIVE_SIZE)
    size = protocol.frame_size(received[: protocol.HEADER_SIZE], limit)
    chunks = [received[protocol.HEADER_SIZE :]]
    have = len(chunks[0])
    while have < size:
        chunk = await conn.receive(min(size - have, 1 << 20))
        chunks.append(chunk)
        have += len(chunk)
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
        self.in_flight = 0  # connections with a task of their own

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
                    served = 0
                    while True:
                        try:
                            sock, _ = listener.accept()
                        except BlockingIOError:
                            served = 0
                            await anyio.wait_readable(listener)
                            continue
                        self._accepted(sock, connections)
                        served += 1
                        if served >= INLINE_BURST:
                            served = 0
                            await anyio.lowlevel.checkpoint()

    def _accepted(self, sock: socket.socket, connections: TaskGroup) -> None:
        """Serve `sock` on the spot when its request is all there and needs no waiting;
        otherwise hand what is left to a task of its own."""
        try:
            sock.setblocking(False)
            answer = self._answer_now(sock)
            if answer is None:
                sock.close()  # connected and went away
                return
            if isinstance(answer, bytes):
                sent = _send_some(sock, answer)
                if sent == len(answer):
                    sock.close()
                    return
                answer = answer[sent:]  # a large `status`: a task sends the rest
            elif self.in_flight >= MAX_CONCURRENT:
                # Bounded by a counter: a CapacityLimiter's checkpoints cost each request two
                # trips through the event loop. A hook told "busy" prints nothing.
                self.refused += 1
                _close_awaitable(answer)
                sock.send(protocol.encode_error("busy: too many requests in flight"))
                sock.close()
                return
        except OSError:  # the client went away, or will not take a few bytes
            sock.close()
            return
        self.in_flight += 1
        connections.start_soon(self._finish, sock, answer)

    def _answer_now(self, sock: socket.socket) -> Answer | None:
        """The answer to what `sock` sent, or an awaitable that reads the rest of the request
        or waits for the handler; None when the client closed without a word."""
        uid = peer_uid(sock)
        if uid is not None and uid != self.uid:
            self.refused += 1
            logger.warning("refused a connection from uid %s", uid)
            return protocol.encode_error(f"uid {uid} may not use this daemon")
        try:
            received = sock.recv(RECEIVE_SIZE)
        except BlockingIOError:
            received = b""  # connected, not sent yet
        else:
            if not received:
                return None
        try:
            body = _complete_frame(received, protocol.MAX_REQUEST)
        except ProtocolError as exc:
            self.refused += 1
            return protocol.encode_error(str(exc))
        if body is None:
            return self._receive_and_answer(Connection(sock), received)
        return self._handle(body)

    async def _receive_and_answer(self, conn: Connection, received: bytes) -> bytes:
        body = await _receive_frame(conn, received, protocol.MAX_REQUEST)
        answer = self._handle(body)
        return answer if isinstance(answer, bytes) else await answer

    def _handle(self, body: bytes) -> Answer:
        """The handler's answer to a complete request body; errors are answers."""
        try:
            request = protocol.decode_request(body)
        except ProtocolError as exc:
            self.refused += 1
            return protocol.encode_error(str(exc))
        self.requests += 1
        try:
            return self.handlers[request.op](request)
        except Exception as exc:
            return self._error_answer(exc, request.op)

    async def _finish(self, sock: socket.socket, answer: Answer) -> None:
        """A connection's task: await its answer and send it, within the request deadline."""
        conn = Connection(sock)
        with sock:
            try:
                with anyio.move_on_after(REQUEST_DEADLINE) as scope:
                    if not isinstance(answer, bytes):
                        try:
                            answer = await answer
                        except (anyio.EndOfStream, OSError):
                            raise
                        except Exception as exc:
                            answer = self._error_answer(exc, "request")
                    await conn.send(answer)
                if scope.cancelled_caught:
                    self.refused += 1
                    error = protocol.encode_error(
                        f"request not complete within {REQUEST_DEADLINE:g} s"
                    )
                    sock.send(error)  # best effort: a client this slow may not read it
            except (anyio.EndOfStream, OSError):
                pass  # the client went away; nothing to answer
            except Exception:
                logger.exception("connection failed")
            finally:
                self.in_flight -= 1

    def _error_answer(self, exc: Exception, op: str) -> bytes:
        if isinstance(exc, ProtocolError):
            self.refused += 1
        if isinstance(exc, CtxdError):
            return protocol.encode_error(str(exc))
        logger.error("%s failed", op, exc_info=exc)
        return protocol.encode_error(f"internal error: {type(exc).__name__}")


def _send_some(sock: socket.socket, data: bytes) -> int:
    """How much of `data` the socket took without waiting."""
    try:
        return sock.send(data)
    except BlockingIOError:
        return 0


def _close_awaitable(answer: Awaitable[bytes]) -> None:
    """Drop an answer that will never be awaited without a "never awaited" warning."""
    close = getattr(answer, "close", None)
    if close is not None:
        close()


def json_answer(value: Any) -> bytes:
    return protocol.encode_ok(orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS))
