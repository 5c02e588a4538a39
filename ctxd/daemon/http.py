"""The optional loopback HTTP listener: Claude Code's HTTP hooks, `GET /metrics`, the dashboard.

Served by the daemon's own event loop, beside the Unix socket, and answered by the same
handlers: `POST /ctxd/hook/<agent>[/<event>]` builds the very `Request` the hook client frames
and hands it to the daemon's `hook` handler (so answers, policy and session tracking are those
of the command path), and the body of a 200 is exactly what the command hook would print (empty
when there is nothing to say). A hook that fails inside the daemon is answered like the command
client answers it: 200 with an empty body, since the agent must never be broken by its monitor.

A loopback port, unlike the 0600 socket, is reachable by every local user. Each connection's
owner is asked of the kernel when it is accepted, on Linux: the uid of the peer's socket, by an
exact sock_diag lookup over netlink, else from its row in `/proc/net/tcp{,6}` (the row whose
local address is the peer's and whose remote address is ours). Anyone else gets a 403 and a log
line, nothing else, and never holds one of the owner's places: MAX_FOREIGN of their connections
are answered, the rest closed at once. Where the kernel cannot say, a per-user secret (a 0600
file in the state dir) must come with every request, as the `X-Ctxd-Token` header or the
`ctxd_token` cookie that `/?token=` sets. A page from elsewhere in the owner's own browser is
kept out by the Host and Origin checks (DNS rebinding, cross-site requests) and, for hooks, by
requiring `Content-Type: application/json` (which a cross-site form cannot send).

Bounded like the socket: at most MAX_CONNECTIONS open (when all are taken, the one idle longest
makes room), a request head of MAX_HEAD bytes and MAX_HEADERS lines, a body of at most
`ctxd_wire.MAX_PAYLOAD` drawn from BODY_BUDGET, every request within REQUEST_DEADLINE, an idle
keep-alive connection closed after IDLE_TIMEOUT.
"""

from __future__ import annotations

import contextlib
import errno
import hmac
import importlib.resources
import logging
import os
import secrets
import socket
import struct
import sys
import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import anyio
import anyio.lowlevel
import anyio.to_thread
import ctxd_wire as wire
import orjson
from anyio.abc import TaskGroup

from ctxd.daemon import metrics
from ctxd.daemon.config import load_http_settings
from ctxd.daemon.server import Connection
from ctxd.daemon.sessions import Sessions
from ctxd.errors import CtxdError
from ctxd.fileio import write_atomic
from ctxd.protocol import Request

__all__ = [
    "BODY_BUDGET",
    "HOOK_PATH",
    "MAX_CONNECTIONS",
    "MAX_HEAD",
    "MAX_HEADERS",
    "REQUEST_DEADLINE",
    "History",
    "HttpServer",
    "PeerOwner",
    "adopted_listener",
    "hook_url",
    "load_or_create_token",
    "open_http_listener",
    "proc_net_uid",
    "start",
]

logger = logging.getLogger(__name__)

HOOK_PATH = "/ctxd/hook/"
MAX_CONNECTIONS = 256
MAX_HEAD = 16 * 1024
MAX_HEADERS = 64
BODY_BUDGET = 4 * wire.MAX_PAYLOAD
REQUEST_DEADLINE = 5.0
IDLE_TIMEOUT = 5.0
MAX_REQUESTS_PER_CONNECTION = 1000
RECEIVE_SIZE = 65536
ACCEPT_BACKOFF = 0.1
REFUSAL_LOG_EVERY = 1.0  # seconds between log lines about refusals of the same peer uid
#: Other users' connections answered 403 at once (the rest are closed unanswered), and how long
#: one may take to send its request line.
MAX_FOREIGN = 16
FOREIGN_DEADLINE = 1.0
TOKEN_HEADER = b"x-ctxd-token"
TOKEN_COOKIE = "ctxd_token"
ENV_HEADER = b"x-ctxd-env-"
#: The per-user secret, in the state dir, where the kernel cannot tell a peer's uid.
TOKEN_FILE = "http-token"
SD_LISTEN_FDS_START = 3
#: Points of each session's context kept for the dashboard's chart.
HISTORY_POINTS = 600
HISTORY_TICK = 1.0

Handler = Callable[[Request], bytes | Awaitable[bytes]]

_REASONS = {
    200: "OK",
    303: "See Other",
    400: "Bad Request",
    403: "Forbidden",
    404: "Not Found",
    405: "Method Not Allowed",
    408: "Request Timeout",
    411: "Length Required",
    413: "Content Too Large",
    415: "Unsupported Media Type",
    431: "Request Header Fields Too Large",
    500: "Internal Server Error",
    503: "Service Unavailable",
}
_OUT_OF_RESOURCES = {errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM}


def hook_url(port: int, agent: str, host: str = "127.0.0.1") -> str:
    """The URL an agent's HTTP hook posts to."""
    return f"http://{host}:{port}{HOOK_PATH}{agent}"


# ---------------------------------------------------------------------- owner


def _hex_address(address: str, family: int) -> str:
    """An address as /proc/net/tcp{,6} prints it: each 32-bit word in host byte order, %08X."""
    packed = socket.inet_pton(family, address)
    return "".join(
        f"{int.from_bytes(packed[i : i + 4], sys.byteorder):08X}" for i in range(0, len(packed), 4)
    )


def proc_net_uid(sock: socket.socket, proc: Path = Path("/proc/net")) -> int | None:
    """The uid owning the other end of a loopback TCP connection, as the kernel reports it in
    /proc/net/tcp (or tcp6): the row whose local address is our peer's and whose remote address
    is ours. None when the table is not there or holds no such row (the peer is gone)."""
    family = sock.family
    peer = sock.getpeername()
    ours = sock.getsockname()
    table = "tcp" if family == socket.AF_INET else "tcp6"
    needle = (
        f" {_hex_address(peer[0], family)}:{peer[1]:04X} {_hex_address(ours[0], family)}:"
        f"{ours[1]:04X} "
    ).encode()
    try:
        with open(proc / table, "rb") as f:
            data = f.read()
    except OSError:
        return None
    at = data.find(needle)
    if at < 0:
        return None
    end = data.find(b"\n", at)
    fields = data[at : end if end >= 0 else len(data)].split()
    # local rem st tx:rx tr:when retrnsmt uid ...
    try:
        return int(fields[6])
    except (IndexError, ValueError):
        return None


def proc_net_available(proc: Path = Path("/proc/net")) -> bool:
    return (proc / "tcp").is_file()


# netlink sock_diag (linux/sock_diag.h, linux/inet_diag.h)
_NETLINK_SOCK_DIAG = 4
_SOCK_DIAG_BY_FAMILY = 20
_NLM_F_REQUEST = 1
_NLMSG_ERROR = 2
_NLMSG_HEADER = struct.Struct("=IHHII")
_DIAG_REQUEST = struct.Struct("=BBBBI")  # family, protocol, ext, pad, states
_DIAG_PORTS = struct.Struct("!HH16s16s")  # sport, dport (big-endian), src, dst
_DIAG_TAIL = struct.Struct("=III")  # interface, cookie (none: all ones)
_UID_OFFSET = _NLMSG_HEADER.size + 64  # inet_diag_msg: 4 bytes, sockid 48, 3 u32, then uid


class PeerOwner:
    """The uid owning the other end of an accepted loopback connection, as the kernel knows
    it: an exact socket lookup over netlink (sock_diag, the table /proc/net/tcp prints, without
    printing all of it: reading /proc/net/tcp costs milliseconds once a few hundred sockets
    exist, the lookup tens of microseconds), else the row in /proc/net/tcp{,6}."""

    def __init__(self, proc: Path = Path("/proc/net")) -> None:
        self.proc = proc
        self._netlink: socket.socket | None = None
        self._netlink_failed = False
        self._seq = 0

    def uid(self, sock: socket.socket) -> int | None:
        if not self._netlink_failed:
            try:
                return self._diag_uid(sock)
            except OSError as exc:
                self._netlink_failed = True
                logger.info("sock_diag unavailable (%s); reading %s instead", exc, self.proc)
        return proc_net_uid(sock, self.proc)

    def _diag_uid(self, sock: socket.socket) -> int | None:
        if self._netlink is None:
            self._netlink = socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, _NETLINK_SOCK_DIAG)
            self._netlink.settimeout(1.0)
        family = sock.family
        peer, ours = sock.getpeername(), sock.getsockname()
        self._seq = (self._seq + 1) & 0xFFFFFFFF
        body = (
            _DIAG_REQUEST.pack(family, socket.IPPROTO_TCP, 0, 0, 0xFFFFFFFF)
            + _DIAG_PORTS.pack(
                peer[1],
                ours[1],
                socket.inet_pton(family, peer[0]).ljust(16, b"\0"),
                socket.inet_pton(family, ours[0]).ljust(16, b"\0"),
            )
            + _DIAG_TAIL.pack(0, 0xFFFFFFFF, 0xFFFFFFFF)
        )
        header = _NLMSG_HEADER.pack(
            _NLMSG_HEADER.size + len(body), _SOCK_DIAG_BY_FAMILY, _NLM_F_REQUEST, self._seq, 0
        )
        self._netlink.send(header + body)
        while True:
            reply = self._netlink.recv(8192)
            _, kind, _, seq, _ = _NLMSG_HEADER.unpack_from(reply)
            if seq == self._seq:
                break  # an answer to an earlier, abandoned question is skipped
        if kind == _NLMSG_ERROR or len(reply) < _UID_OFFSET + 4:
            return None  # no such socket: the peer is gone
        return int.from_bytes(reply[_UID_OFFSET : _UID_OFFSET + 4], sys.byteorder)

    def close(self) -> None:
        if self._netlink is not None:
            self._netlink.close()


def load_or_create_token(path: Path) -> str:
    """The per-user secret kept in `path` (0600), created on first use."""
    try:
        token = path.read_text().strip()
        if token and path.stat().st_mode & 0o077 == 0:
            return token
    except FileNotFoundError:
        pass
    except OSError as exc:
        raise CtxdError(f"cannot read the HTTP token {path}: {exc.strerror or exc}") from None
    token = secrets.token_urlsafe(32)
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    write_atomic(path, (token + "\n").encode(), 0o600)
    return token


# ---------------------------------------------------------------------- history


class History:
    """Each session's context over time, for the dashboard's chart: a point when its tokens or
    compactions change, at most HISTORY_POINTS per session, dropped with the session."""

    def __init__(self, points: int = HISTORY_POINTS) -> None:
        self.points = points
        self.series: dict[str, deque[tuple[float, int, int]]] = {}

    def record(self, samples: Iterable[tuple[str, float, int | None, int]]) -> None:
        """`samples`: (key, time, tokens, compactions) of every session tracked now."""
        live: set[str] = set()
        for key, at, tokens, compactions in samples:
            live.add(key)
            if tokens is None:
                continue
            series = self.series.get(key)
            if series is None:
                series = self.series[key] = deque(maxlen=self.points)
            if not series or series[-1][1:] != (tokens, compactions):
                series.append((at, tokens, compactions))
        for key in self.series.keys() - live:
            del self.series[key]

    def export(self) -> dict[str, list[tuple[float, int, int]]]:
        return {key: list(series) for key, series in self.series.items()}


# ---------------------------------------------------------------------- requests


class _HttpError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass(slots=True)
class _Request:
    method: str
    target: str
    version: str
    headers: dict[bytes, bytes]
    body: bytes = b""

    def header(self, name: bytes) -> str | None:
        value = self.headers.get(name)
        return None if value is None else value.decode("latin-1")

    @property
    def keep_alive(self) -> bool:
        connection = (self.header(b"connection") or "").lower()
        if self.version == "HTTP/1.0":
            return "keep-alive" in connection
        return "close" not in connection


def _parse_head(head: bytes) -> _Request:
    lines = head.split(b"\r\n")
    try:
        method, target, version = lines[0].decode("ascii").split(" ")
    except (UnicodeDecodeError, ValueError):
        raise _HttpError(400, "malformed request line") from None
    if version not in ("HTTP/1.1", "HTTP/1.0"):
        raise _HttpError(400, f"unsupported version {version[:16]!r}")
    if len(lines) - 1 > MAX_HEADERS:
        raise _HttpError(431, f"more than {MAX_HEADERS} header lines")
    headers: dict[bytes, bytes] = {}
    for line in lines[1:]:
        name, colon, value = line.partition(b":")
        if not colon or not name or name != name.strip():
            raise _HttpError(400, "malformed header line")
        key = name.lower()
        if key in headers and key in (b"content-length", b"host", b"transfer-encoding"):
            raise _HttpError(400, f"repeated {key.decode()} header")
        headers[key] = value.strip()
    return _Request(method, target, version, headers)


class _Budget:
    def __init__(self, size: int) -> None:
        self.size = size
        self.used = 0


class _Conn(Connection):
    """One accepted socket (the socket server's awaits), the bytes received past the last
    request, and its peer's uid."""

    __slots__ = ("buffer", "looked_up", "uid")

    def __init__(self, sock: socket.socket, uid: int | None) -> None:
        super().__init__(sock)
        self.uid = uid
        self.buffer = b""
        self.looked_up = 0.0  # seconds the owner lookup took at accept

    async def read_head(self) -> bytes | None:
        """The next request's head (without the blank line); None when the peer closed
        between requests."""
        while True:
            end = self.buffer.find(b"\r\n\r\n", 0, MAX_HEAD + 4)
            if end >= 0:
                head, self.buffer = self.buffer[:end], self.buffer[end + 4 :]
                return head
            if len(self.buffer) > MAX_HEAD:
                raise _HttpError(431, f"request head over {MAX_HEAD} bytes")
            try:
                data = await self.receive(RECEIVE_SIZE)
            except anyio.EndOfStream:
                if self.buffer:
                    raise
                return None
            self.buffer += data

    async def read_body(self, size: int) -> bytes:
        body = bytearray(self.buffer[:size])
        self.buffer = self.buffer[size:]
        while len(body) < size:
            body += await self.receive(RECEIVE_SIZE)
        if len(body) > size:  # a pipelined next request
            self.buffer = bytes(body[size:])
            del body[size:]
        return bytes(body)


def _response(
    status: int,
    body: bytes = b"",
    content_type: str = "application/json",
    *,
    keep_alive: bool = True,
    extra: Iterable[tuple[str, str]] = (),
) -> bytes:
    lines = [
        f"HTTP/1.1 {status} {_REASONS.get(status, 'Error')}",
        f"Content-Type: {content_type}",
        f"Content-Length: {len(body)}",
        "Cache-Control: no-store",
        "X-Content-Type-Options: nosniff",
        "Connection: keep-alive" if keep_alive else "Connection: close",
        *(f"{name}: {value}" for name, value in extra),
    ]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


# ---------------------------------------------------------------------- server


class HttpServer:
    """Serves hooks, metrics and the dashboard on a loopback listener until cancelled.

    `hook` and `status` are the daemon's own protocol handlers. `uid` is the owner; `token`,
    when set, is required of every request (where the kernel cannot tell a peer's uid).
    """

    def __init__(
        self,
        hook: Handler,
        status: Handler,
        *,
        port: int,
        uid: int | None = None,
        token: str | None = None,
        history: History | None = None,
        max_connections: int = MAX_CONNECTIONS,
        proc: Path = Path("/proc/net"),
    ) -> None:
        self.hook = hook
        self.status = status
        self.port = port
        self.uid = os.getuid() if uid is None else uid
        self.token = token
        self.history = history or History()
        self.max_connections = max_connections
        self.owner = PeerOwner(proc)
        self.dashboard = (
            importlib.resources.files("ctxd.daemon").joinpath("dashboard.html").read_bytes()
        )
        self.requests = 0
        self.refused = 0
        self.errors = 0
        self.in_flight = 0
        self.evicted = 0
        self._foreign = 0  # other users' connections being refused now
        self._idle: dict[_Conn, anyio.CancelScope] = {}  # waiting for a request, oldest first
        self.budget = _Budget(BODY_BUDGET)
        #: Seconds from a request's last byte to its answer's, per request (for the histogram).
        self.durations = metrics.Histogram()
        self._refusals_logged: dict[object, float] = {}
        self._hosts = {f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}"}
        self._origins = {f"http://{host}" for host in self._hosts}

    # ------------------------------------------------------------------ accepting

    async def serve(self, listener: socket.socket, stopping: anyio.Event) -> None:
        listener.setblocking(False)
        with listener, contextlib.closing(self.owner):
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
                        except OSError as exc:
                            if exc.errno not in _OUT_OF_RESOURCES:
                                raise
                            logger.error("HTTP accept() failed (%s)", exc.strerror or exc)
                            await anyio.sleep(ACCEPT_BACKOFF)
                            continue
                        self._accepted(sock, connections)

    async def record_history(self, sessions: Sessions, stopping: anyio.Event) -> None:
        """Record every session's context in `history` every HISTORY_TICK until `stopping`."""
        while not stopping.is_set():
            try:
                self.history.record(
                    (
                        state.transcript_path or state.key,
                        state.usage_at or state.updated_at,
                        state.tokens,
                        state.compactions,
                    )
                    for state in sessions
                )
            except Exception:  # the chart is not worth the daemon
                logger.exception("recording the history failed")
            with anyio.move_on_after(HISTORY_TICK):
                await stopping.wait()

    # ------------------------------------------------------------------ a connection

    def _accepted(self, sock: socket.socket, connections: TaskGroup) -> None:
        """Give `sock` a task, once its peer is known to be the owner. Other users' connections
        never take the owner's places: a few get their 403, the rest are closed at once. When
        every place is taken, the connection idle longest (waiting for a request) makes room."""
        uid = None
        looked_up = 0.0
        if self.token is None:
            started = time.perf_counter()
            try:
                uid = self.owner.uid(sock)
            except OSError:
                uid = None
            looked_up = time.perf_counter() - started
            if uid != self.uid:
                self._foreign_accepted(sock, uid, connections)
                return
        if self.in_flight >= self.max_connections and not self._evict_idle():
            self.refused += 1
            with contextlib.suppress(OSError):
                sock.send(_response(503, b"", "text/plain", keep_alive=False))
            sock.close()
            return
        self.in_flight += 1
        conn = _Conn(sock, uid)
        conn.looked_up = looked_up
        connections.start_soon(self._connection, conn)

    def _foreign_accepted(self, sock: socket.socket, uid: int | None, tg: TaskGroup) -> None:
        if self._foreign >= MAX_FOREIGN:
            self.refused += 1
            self._log_refusal(uid, "-", "-", _peer(sock), "too many of theirs open: closed")
            sock.close()
            return
        self._foreign += 1
        tg.start_soon(self._foreign_connection, _Conn(sock, uid))

    async def _foreign_connection(self, conn: _Conn) -> None:
        """Another user's connection: its request read (briefly), a 403, a log line."""
        try:
            with conn.sock:
                conn.sock.setblocking(False)
                method = target = "-"
                with anyio.move_on_after(FOREIGN_DEADLINE):
                    with contextlib.suppress(_HttpError, anyio.EndOfStream, OSError):
                        head = await conn.read_head()
                        if head is not None:
                            line = head.partition(b"\r\n")[0].decode("latin-1").split(" ")
                            method, target = line[0], line[1] if len(line) > 1 else "-"
                self.refused += 1
                self._log_refusal(conn.uid, method, target, _peer(conn.sock), "not the owner")
                with contextlib.suppress(OSError):
                    conn.sock.send(_response(403, b"forbidden\n", "text/plain", keep_alive=False))
                    conn.sock.shutdown(socket.SHUT_WR)
        finally:
            self._foreign -= 1

    def _evict_idle(self) -> bool:
        """Close the connection idle longest; False when none is idle."""
        conn = next(iter(self._idle), None)
        if conn is None:
            return False
        self._idle.pop(conn).cancel()
        self.evicted += 1
        return True

    async def _connection(self, conn: _Conn) -> None:
        sock = conn.sock
        try:
            with sock:
                sock.setblocking(False)
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                for _ in range(MAX_REQUESTS_PER_CONNECTION):
                    if not await self._one_request(conn):
                        break
                    # A kept-alive client whose next request is always there at once must not
                    # keep the loop from the other connections.
                    await anyio.lowlevel.checkpoint()
        except (anyio.EndOfStream, OSError):
            pass
        except Exception:
            logger.exception("HTTP connection failed")
        finally:
            self._idle.pop(conn, None)
            self.in_flight -= 1

    async def _one_request(self, conn: _Conn) -> bool:
        """Read, check and answer one request; whether the connection stays open."""
        if not conn.buffer:
            # Usually the request is there already: no idle timer for it.
            try:
                conn.buffer = conn.sock.recv(RECEIVE_SIZE)
            except BlockingIOError:
                pass
            else:
                if not conn.buffer:
                    return False  # the client closed
        if not conn.buffer:
            with anyio.move_on_after(IDLE_TIMEOUT) as self._idle[conn]:
                try:
                    conn.buffer = await conn.receive(RECEIVE_SIZE)
                except anyio.EndOfStream:
                    return False
                finally:
                    self._idle.pop(conn, None)
            if not conn.buffer:
                return False  # idle too long between requests, or evicted
        keep = False
        with anyio.move_on_after(REQUEST_DEADLINE) as deadline:
            try:
                response, keep = await self._read_and_answer(conn)
            except _HttpError as exc:
                self.refused += 1
                response = _response(
                    exc.status, f"{exc}\n".encode(), "text/plain", keep_alive=False
                )
            await conn.send(response)
        if deadline.cancelled_caught:
            self.refused += 1
            with contextlib.suppress(OSError):
                conn.sock.send(_response(408, b"", "text/plain", keep_alive=False))
            return False
        return keep

    async def _read_and_answer(self, conn: _Conn) -> tuple[bytes, bool]:
        head = await conn.read_head()
        if head is None:
            raise anyio.EndOfStream
        request = _parse_head(head)
        if b"transfer-encoding" in request.headers:
            raise _HttpError(411, "send a Content-Length, not a Transfer-Encoding")
        length_text = request.header(b"content-length") or "0"
        if not length_text.isdigit() or len(length_text) > 12:
            raise _HttpError(400, "malformed Content-Length")
        length = int(length_text)
        if length > wire.MAX_PAYLOAD:
            raise _HttpError(413, f"a body is at most {wire.MAX_PAYLOAD} bytes")
        if length:
            if self.budget.used + length > self.budget.size:
                raise _HttpError(503, "busy: too many request bytes being read")
            self.budget.used += length
            try:
                request.body = await conn.read_body(length)
            finally:
                self.budget.used -= length
        # The owner lookup at accept counts toward the connection's first request.
        started = time.perf_counter() - conn.looked_up
        conn.looked_up = 0.0
        refusal = self._refusal(conn, request)
        if refusal is not None:
            self._refuse(conn, request, refusal)
            return _response(403, b"forbidden\n", "text/plain", keep_alive=False), False
        self.requests += 1
        response = await self._route(request)
        self.durations.observe(time.perf_counter() - started)
        return response, request.keep_alive

    # ------------------------------------------------------------------ owner checks

    def _refusal(self, conn: _Conn, request: _Request) -> str | None:
        """Why `request` may not be answered; None when it may."""
        if self.token is not None:
            if not self._token_ok(request):
                return "no valid token"
        elif conn.uid is None:
            return "peer's owner unknown"
        elif conn.uid != self.uid:
            return f"uid {conn.uid}"
        if request.header(b"host") not in self._hosts:
            return f"Host {request.header(b'host')!r}"
        origin = request.header(b"origin")
        if origin is not None and origin not in self._origins:
            return f"Origin {origin!r}"
        return None

    def _token_ok(self, request: _Request) -> bool:
        assert self.token is not None
        offered = request.header(TOKEN_HEADER)
        if offered is None:
            offered = _cookie(request.header(b"cookie") or "", TOKEN_COOKIE)
        if offered is None and request.method == "GET":
            offered = parse_qs(urlsplit(request.target).query).get("token", [None])[0]
        return offered is not None and hmac.compare_digest(offered.encode(), self.token.encode())

    def _refuse(self, conn: _Conn, request: _Request, reason: str) -> None:
        self.refused += 1
        self._log_refusal(conn.uid, request.method, request.target, _peer(conn.sock), reason)

    def _log_refusal(self, uid: int | None, method: str, target: str, peer: str, why: str) -> None:
        """One log line per refusal, at most one a second per peer uid (or reason)."""
        now = time.monotonic()
        key = uid if uid is not None else why
        if now - self._refusals_logged.get(key, -REFUSAL_LOG_EVERY) >= REFUSAL_LOG_EVERY:
            if len(self._refusals_logged) > 1000:
                self._refusals_logged.clear()
            self._refusals_logged[key] = now
            who = f"uid {uid}" if uid is not None else "unknown owner"
            logger.warning(
                "HTTP: refused %s %s from %s (%s): %s", method, target[:200], peer, who, why
            )

    # ------------------------------------------------------------------ routes

    async def _route(self, request: _Request) -> bytes:
        keep = request.keep_alive
        path = urlsplit(request.target).path
        if path.startswith(HOOK_PATH):
            if request.method != "POST":
                return _response(405, b"", "text/plain", keep_alive=keep, extra=[("Allow", "POST")])
            return await self._hook(request, path[len(HOOK_PATH) :])
        if request.method != "GET":
            return _response(405, b"", "text/plain", keep_alive=keep, extra=[("Allow", "GET")])
        if path == "/":
            if self.token is not None and "token=" in request.target:
                # The token leaves the address bar for a cookie only this host gets.
                cookie = f"{TOKEN_COOKIE}={self.token}; HttpOnly; SameSite=Strict; Path=/"
                return _response(
                    303,
                    b"",
                    "text/plain",
                    keep_alive=keep,
                    extra=[("Location", "/"), ("Set-Cookie", cookie)],
                )
            return _response(200, self.dashboard, "text/html; charset=utf-8", keep_alive=keep)
        if path == "/metrics":
            doc = await self._status()
            extra = {"refused": {"http": self.refused}, "errors": {"http": self.errors}}
            text = metrics.render(doc, extra) + self.durations.render(
                "ctxd_http_request_duration_seconds",
                "Time from a request's last byte to its answer, in the daemon.",
            )
            return _response(200, text.encode(), metrics.CONTENT_TYPE, keep_alive=keep)
        if path == "/api/status":
            doc = await self._status()
            body = orjson.dumps({"status": doc, "history": self.history.export()})
            return _response(200, body, keep_alive=keep)
        return _response(404, b"not found\n", "text/plain", keep_alive=keep)

    async def _status(self) -> dict[str, Any]:
        answer = self.status(Request("status", {"v": wire.VERSION, "op": "status"}, b""))
        result = answer if isinstance(answer, bytes) else await answer
        doc: dict[str, Any] = orjson.loads(result)
        return doc

    async def _hook(self, request: _Request, rest: str) -> bytes:
        keep = request.keep_alive
        content_type = (request.header(b"content-type") or "").split(";")[0].strip().lower()
        if content_type != "application/json":
            return _response(415, b"", "text/plain", keep_alive=keep)
        parts = rest.split("/")
        if not 1 <= len(parts) <= 2 or not all(_plain(part) for part in parts):
            return _response(404, b"not found\n", "text/plain", keep_alive=keep)
        env = {
            name[len(ENV_HEADER) :].decode("ascii", "replace").upper(): value.decode("latin-1")
            for name, value in request.headers.items()
            if name.startswith(ENV_HEADER) and value
        }
        header: dict[str, Any] = {"v": wire.VERSION, "op": "hook", "agent": parts[0], "env": env}
        if len(parts) == 2:
            header["event"] = parts[1]
        try:
            answer = self.hook(Request("hook", header, request.body))
            result = answer if isinstance(answer, bytes) else await answer
        except Exception as exc:
            # As the command client does with an error answer: nothing for the agent.
            self.errors += 1
            if isinstance(exc, CtxdError):
                logger.info("HTTP hook %s not answered: %s", rest, exc)
            else:
                logger.error("HTTP hook %s failed", rest, exc_info=exc)
            reason = str(exc).replace("\r", " ").replace("\n", " ")[:200]
            return _response(200, b"", keep_alive=keep, extra=[("X-Ctxd-Error", reason)])
        return _response(200, result, keep_alive=keep)


def _plain(part: str) -> bool:
    return 0 < len(part) <= 64 and all(c.isascii() and (c.isalnum() or c in "_-") for c in part)


def _cookie(header: str, name: str) -> str | None:
    for item in header.split(";"):
        key, _, value = item.strip().partition("=")
        if key == name:
            return value
    return None


def _peer(sock: socket.socket) -> str:
    try:
        host, port = sock.getpeername()[:2]
    except OSError:
        return "?"
    return f"{host}:{port}"


def open_http_listener(port: int, host: str = "127.0.0.1") -> socket.socket:
    """A listening TCP socket on loopback `host`:`port`; CtxdError (one line) when it cannot be
    bound (the port is taken, or `host` is not a loopback address)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        packed = socket.inet_pton(family, host)
    except OSError:
        raise CtxdError(f"[http] listens on loopback only; {host!r} is not an address") from None
    if not (
        packed[0] == 127 if family == socket.AF_INET else packed == socket.inet_pton(family, "::1")
    ):
        raise CtxdError(f"[http] listens on loopback only; {host} is not loopback")
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(socket.SOMAXCONN)
    except OSError as exc:
        sock.close()
        raise CtxdError(f"cannot listen on http://{host}:{port}: {exc.strerror or exc}") from None
    sock.setblocking(False)
    return sock


def adopted_listener(env: Mapping[str, str]) -> socket.socket | None:
    """The loopback TCP listener systemd passed us beside the Unix socket (socket activation
    with a second `ListenStream=127.0.0.1:PORT`), if any: it keeps the port while no daemon
    runs, so an HTTP hook then starts one instead of failing."""
    if env.get("LISTEN_PID") != str(os.getpid()):
        return None
    count = int(env.get("LISTEN_FDS", "0") or 0)
    for fd in range(SD_LISTEN_FDS_START + 1, SD_LISTEN_FDS_START + count):
        try:
            sock = socket.socket(fileno=fd)
        except OSError:
            continue
        if sock.family in (socket.AF_INET, socket.AF_INET6) and sock.type == socket.SOCK_STREAM:
            sock.setblocking(False)
            return sock
        sock.detach()  # not ours to close
    return None


async def start(
    env: Mapping[str, str],
    config: Path,
    state_dir: Path,
    handlers: Mapping[str, Handler],
    sessions: Sessions,
    tg: TaskGroup,
    stopping: anyio.Event,
) -> HttpServer | None:
    """Serve HTTP in `tg` (until `stopping`) when the config's `[http]` enables it, on the
    listener systemd passed (`adopted_listener`) or a new one; None when it is off, or when the
    port cannot be had (logged: the Unix socket serves on regardless)."""
    try:
        settings = await anyio.to_thread.run_sync(load_http_settings, config)
    except CtxdError as exc:
        logger.error("HTTP listener not started: %s", exc)
        return None
    adopted = adopted_listener(env)
    if not settings.enabled:
        if adopted is not None:
            logger.warning("systemd passed a TCP listener, but [http] is off: not serving it")
            adopted.close()
        return None
    try:
        listener = adopted or open_http_listener(settings.port, settings.host)
        # Where the kernel cannot name a peer's owner, a secret proves it.
        token = None if proc_net_available() else load_or_create_token(state_dir / TOKEN_FILE)
    except CtxdError as exc:
        logger.error("HTTP listener not started: %s", exc)
        return None
    host, port = listener.getsockname()[:2]
    if adopted is not None and port != settings.port:
        logger.warning(
            "systemd's TCP listener is on port %d; the config says %d", port, settings.port
        )
    server = HttpServer(handlers["hook"], handlers["status"], port=port, token=token)
    tg.start_soon(server.serve, listener, stopping)
    tg.start_soon(server.record_history, sessions, stopping)
    logger.info(
        "HTTP on http://%s:%d%s (owner checked by %s)",
        host,
        port,
        " (from systemd)" if adopted is not None else "",
        "token" if token else "the kernel's socket table",
    )
    return server
