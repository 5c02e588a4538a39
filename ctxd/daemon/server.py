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
from collections.abc import Awaitable, Callable, Generator
from typing import Any

import anyio
import anyio.lowlevel
import ctxd_wire as wire
import orjson
from anyio.abc import TaskGroup

from ctxd import protocol
from ctxd.errors import CtxdError, ProtocolError
from ctxd.protocol import Request

__all__ = ["REQUEST_DEADLINE", "Answer", "Handler", "Server", "json_result"]

logger = logging.getLogger(__name__)

REQUEST_DEADLINE = 5.0
MAX_CONCURRENT = 256
# Connections served on the spot before the accept loop lets other tasks run (the watcher,
# signals, connections that wait): a flood of hooks must not starve them.
INLINE_BURST = 32
RECEIVE_SIZE = 65536

# A handler returns its result (the bytes after the answer's header line) at once or, when it
# must wait for something, as an awaitable; the server frames it. Errors it raises are answers.
Answer = bytes | Awaitable[bytes]
Handler = Callable[[Request], Answer]
# What goes on the wire: a whole framed answer, or an awaitable of one.
_Framed = bytes | Awaitable[bytes]


def _frame_size(prefix: bytes, limit: int) -> int:
    try:
        return wire.frame_size(prefix, limit)
    except wire.FrameTooLarge as exc:
        raise ProtocolError(str(exc)) from None


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
    if len(data) < wire.HEADER_SIZE:
        return None
    size = _frame_size(data[: wire.HEADER_SIZE], limit)
    if len(data) - wire.HEADER_SIZE < size:
        return None
    if len(data) - wire.HEADER_SIZE > size:
        raise ProtocolError("more bytes than the frame announced")
    return data[wire.HEADER_SIZE :]


async def _receive_frame(conn: Connection, received: bytes, limit: int) -> bytes:
    """One frame's body, starting from the bytes `received` already."""
    while len(received) < wire.HEADER_SIZE:
        received += await conn.receive(RECEIVE_SIZE)
    size = _frame_size(received[: wire.HEADER_SIZE], limit)
    chunks = [received[wire.HEADER_SIZE :]]
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

    def _answer_now(self, sock: socket.socket) -> _Framed | None:
        """The answer to what `sock` sent, or an awaitable that reads the rest of the request
        or waits for the handler; None when the client closed without a word."""
        uid = wire.peer_uid(sock)
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
            body = _complete_frame(received, wire.MAX_REQUEST)
        except ProtocolError as exc:
            self.refused += 1
            return protocol.encode_error(str(exc))
        if body is None:
            return self._receive_and_answer(Connection(sock), received)
        return self._handle(body)

    async def _receive_and_answer(self, conn: Connection, received: bytes) -> bytes:
        body = await _receive_frame(conn, received, wire.MAX_REQUEST)
        answer = self._handle(body)
        return answer if isinstance(answer, bytes) else await answer

    def _handle(self, body: bytes) -> _Framed:
        """The framed answer to a complete request body; errors are answers."""
        try:
            request = protocol.decode_request(body)
        except ProtocolError as exc:
            self.refused += 1
            return protocol.encode_error(str(exc))
        self.requests += 1
        try:
            result = self.handlers[request.op](request)
        except Exception as exc:
            return self._error_answer(exc, request.op)
        if isinstance(result, bytes):
            return protocol.encode_ok(result)
        return _FramedAnswer(result)

    async def _finish(self, sock: socket.socket, answer: _Framed) -> None:
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


class _FramedAnswer:
    """A handler's awaitable result, framed once it is there; `close` drops it unawaited."""

    __slots__ = ("result",)

    def __init__(self, result: Awaitable[bytes]) -> None:
        self.result = result

    def __await__(self) -> Generator[Any, None, bytes]:
        return self._framed().__await__()

    async def _framed(self) -> bytes:
        return protocol.encode_ok(await self.result)

    def close(self) -> None:
        _close_awaitable(self.result)


def json_result(value: Any) -> bytes:
    """`value` as a JSON result (dict keys need not be strings)."""
    return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS)
