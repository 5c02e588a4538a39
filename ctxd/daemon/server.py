"""The Unix-socket server: one framed request, one framed answer, per connection.

Every connection is wrapped so that one bad client cannot hurt the others: its peer uid is
checked, its frame is bounded in size and in time, and whatever goes wrong becomes an error
answer (or, for garbage, a closed connection) — never an exception that reaches the task group.

A hook sends its whole request right after connecting, and most answers need no waiting, so the
accept loop (ctxd/daemon/accept.py, shared with the HTTP server) has such a connection served on
the spot: one receive, the handler, one send, close — no task, no deadline timer, no trip through
the event loop. Only a connection whose request has not fully arrived, whose handler must wait,
or whose answer does not fit the socket buffer gets a task of its own, with the request deadline
around it.

What clients can make the daemon hold is bounded, so that no mix of slow, idle, big or numerous
connections costs other clients their answers or the daemon its memory:

- open connections: at most `max_connections` (MAX_CONNECTIONS, fewer under a low descriptor
  limit). When all are taken, the one that has waited longest for its request is dropped for the
  newcomer: an idle connection can hold a place only until someone needs it, so hooks, which
  send at once, are never locked out by connections that send nothing.
- request bytes: a frame's announced size is reserved from BUFFER_BUDGET before it is read; a
  frame that does not fit is answered "busy" at once. Buffers are filled in place, not grown, so
  the memory held for requests is at most BUFFER_BUDGET plus a few KiB per connection.
- accept() failing for lack of descriptors or memory: see ctxd/daemon/accept.py.
"""

from __future__ import annotations

import contextlib
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
from ctxd.daemon.accept import (
    INLINE_BURST,
    RECEIVE_SIZE,
    REQUEST_DEADLINE,
    Acceptor,
    Connection,
)
from ctxd.errors import CtxdError, ProtocolError
from ctxd.protocol import Answer, Request

__all__ = [
    "BUFFER_BUDGET",
    "MAX_CONNECTIONS",
    "Handler",
    "Server",
    "json_result",
]

logger = logging.getLogger(__name__)

MAX_CONNECTIONS = 1024
# Request bytes being read, across all connections. Frames up to SMALL_FRAME (every ordinary
# hook) and bigger ones draw on separate parts of it, so that big ones cannot crowd hooks out:
# two requests of the largest size at once, beside a thousand hooks of 8 KiB.
SMALL_FRAME = 65536
LARGE_BUDGET = 2 * wire.MAX_REQUEST
SMALL_BUDGET = 8 * 1024 * 1024
BUFFER_BUDGET = LARGE_BUDGET + SMALL_BUDGET

# A handler returns its result (the bytes after the answer's header line) as an `Answer`; the
# server frames it. Errors it raises are answers.
Handler = Callable[[Request], Answer]
# What goes on the wire: a whole framed answer, or an awaitable of one.
_Framed = bytes | Awaitable[bytes]


def _frame_size(prefix: bytes, limit: int) -> int:
    try:
        return wire.frame_size(prefix, limit)
    except wire.FrameTooLarge as exc:
        raise ProtocolError(str(exc)) from None


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


class _Incomplete:
    """A request not all there yet: the bytes received so far."""

    __slots__ = ("received",)

    def __init__(self, received: bytes) -> None:
        self.received = received


class _Busy(Exception):
    """No room to buffer this request now; the message is the answer."""


class _Slot:
    """A connection with a task of its own, as the server tracks it to bound and evict it."""

    __slots__ = ("counted", "large", "reserved", "scope", "sock")

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.scope: anyio.CancelScope | None = None  # while waiting for its request
        self.reserved = 0  # request bytes it holds from the budget
        self.large = False
        self.counted = True  # still counted in `in_flight`


class Server:
    """Serves `handlers[op]` on a listener until cancelled."""

    def __init__(
        self,
        handlers: dict[str, Handler],
        uid: int | None = None,
        max_connections: int = MAX_CONNECTIONS,
    ) -> None:
        self.handlers = handlers
        self.uid = os.getuid() if uid is None else uid
        self.max_connections = max_connections
        self.requests = 0
        self.refused = 0
        self.evicted = 0  # connections dropped, while waiting for their request, for newer ones
        self.in_flight = 0  # connections with a task of their own
        self.buffered = 0  # request bytes reserved, at most BUFFER_BUDGET
        self._large = 0  # of which frames over SMALL_FRAME, at most LARGE_BUDGET
        self._waiting: dict[_Slot, None] = {}  # still reading their request, oldest first
        self._acceptor = Acceptor(self, "Unix socket")

    @property
    def accept_errors(self) -> int:
        return self._acceptor.errors

    async def serve(self, listener: socket.socket, stopping: anyio.Event) -> None:
        """Accept on the listening socket until `stopping` is set; then let the connections
        already accepted finish (bounded by their request deadline) instead of cutting them off
        mid-answer. The listener is closed on return."""
        await self._acceptor.serve(listener, stopping)

    def accepted(self, sock: socket.socket, connections: TaskGroup) -> None:
        """Serve `sock` on the spot when its request is all there and needs no waiting;
        otherwise hand what is left to a task of its own."""
        try:
            sock.setblocking(False)
            work = self._answer_now(sock)
            if work is None:
                sock.close()  # connected and went away
                return
            if isinstance(work, bytes):
                sent = _send_some(sock, work)
                if sent == len(work):
                    sock.close()
                    return
                work = work[sent:]  # a large `status`: a task sends the rest
            if self.in_flight >= self.max_connections and not self.make_room():
                # Every place is taken by a connection that is being answered. A hook told
                # "busy" prints nothing.
                self.refused += 1
                if not isinstance(work, bytes | _Incomplete):
                    _close_awaitable(work)
                sock.send(protocol.encode_error("busy: too many connections"))
                sock.close()
                return
        except OSError:  # the client went away, or will not take a few bytes
            sock.close()
            return
        self.in_flight += 1
        connections.start_soon(self._connection, _Slot(sock), work)

    @property
    def batch(self) -> int:
        return INLINE_BURST

    async def settle(self, connections: TaskGroup) -> None:
        # Every socket was served or given its task in `accepted`: only let others run.
        await anyio.lowlevel.checkpoint()

    def make_room(self) -> bool:
        """Drop the connection that has waited longest for its request; False if none waits."""
        slot = next(iter(self._waiting), None)
        if slot is None:
            return False
        del self._waiting[slot]
        assert slot.scope is not None
        slot.scope.cancel()
        self.evicted += 1
        if slot.counted:
            slot.counted = False
            self.in_flight -= 1
        return True

    def _answer_now(self, sock: socket.socket) -> _Framed | _Incomplete | None:
        """The answer to what `sock` sent, an awaitable when the handler must wait, or what was
        received of a request not complete yet; None when the client closed without a word."""
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
            return _Incomplete(received)
        return self._handle(body)

    async def _connection(self, slot: _Slot, work: _Framed | _Incomplete) -> None:
        """A connection's task: read the rest of its request if need be, await its answer and
        send it, all within the request deadline."""
        sock = slot.sock
        conn = Connection(sock)
        try:
            with sock:
                with anyio.move_on_after(REQUEST_DEADLINE) as deadline:
                    if isinstance(work, _Incomplete):
                        answer = await self._receive_and_handle(slot, conn, work.received)
                        if answer is None:
                            return  # evicted
                        work = answer
                    if not isinstance(work, bytes):
                        try:
                            work = await work
                        except (anyio.EndOfStream, OSError):
                            raise
                        except Exception as exc:
                            work = self._error_answer(exc, "request")
                    await conn.send(work)
                if deadline.cancelled_caught:
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
            self._waiting.pop(slot, None)
            self._release(slot)
            if slot.counted:
                slot.counted = False
                self.in_flight -= 1

    async def _receive_and_handle(
        self, slot: _Slot, conn: Connection, received: bytes
    ) -> _Framed | None:
        """Read the rest of the request and hand it to its handler; None when the connection
        was dropped for a newer one meanwhile."""
        with anyio.CancelScope() as slot.scope:
            self._waiting[slot] = None
            try:
                body = await self._receive_frame(slot, conn, received)
            except ProtocolError as exc:
                self.refused += 1
                return protocol.encode_error(str(exc))
            except _Busy as exc:
                self.refused += 1
                return protocol.encode_error(str(exc))
            finally:
                self._waiting.pop(slot, None)
        if slot.scope.cancelled_caught:
            with contextlib.suppress(OSError):
                slot.sock.send(protocol.encode_error("busy: dropped for a newer connection"))
            return None
        answer = self._handle(body)
        del body
        self._release(slot)
        return answer

    async def _receive_frame(self, slot: _Slot, conn: Connection, received: bytes) -> bytes:
        """One frame's body, starting from the bytes `received` already, read into a buffer of
        its announced size once that is reserved from the budget."""
        while len(received) < wire.HEADER_SIZE:
            received += await conn.receive(RECEIVE_SIZE)
        size = _frame_size(received[: wire.HEADER_SIZE], wire.MAX_REQUEST)
        have = len(received) - wire.HEADER_SIZE
        if have > size:
            raise ProtocolError("more bytes than the frame announced")
        self._reserve(slot, size)
        buffer = bytearray(size)
        view = memoryview(buffer)
        view[:have] = received[wire.HEADER_SIZE :]
        del received
        while have < size:
            have += await conn.receive_into(view[have:])
        view.release()
        return bytes(buffer)

    def _reserve(self, slot: _Slot, size: int) -> None:
        large = size > SMALL_FRAME
        if large and self._large + size > LARGE_BUDGET:
            raise _Busy(f"busy: {self._large:,} bytes of large requests are being read")
        if self.buffered + size > BUFFER_BUDGET:
            raise _Busy(f"busy: {self.buffered:,} bytes of requests are being read")
        slot.reserved, slot.large = size, large
        self.buffered += size
        if large:
            self._large += size

    def _release(self, slot: _Slot) -> None:
        self.buffered -= slot.reserved
        if slot.large:
            self._large -= slot.reserved
        slot.reserved, slot.large = 0, False

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
