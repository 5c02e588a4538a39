"""The optional loopback HTTP listener: HTTP hooks (Claude Code's and Qwen Code's, the agents
whose `Installer.http_hooks` is set), `GET /metrics`, the dashboard.

Served by the daemon's own event loop, beside the Unix socket, and answered by the same
handlers: `POST /ctxd/hook/<agent>[/<event>]` builds the very `Request` the hook client frames
and hands it to the daemon's `hook` handler (so answers, policy and session tracking are those
of the command path), and the body of a 200 is exactly what the command hook would print (empty
when there is nothing to say). A hook that fails inside the daemon is answered like the command
client answers it: 200 with an empty body, since the agent must never be broken by its monitor.

A loopback port, unlike the 0600 socket, is reachable by every local user. Each connection's
owner is asked of the kernel when it is accepted (ctxd/daemon/peer.py), for a whole batch of
connections at once (ACCEPT_BATCH: where that means reading /proc/net/tcp, one read for all,
in a worker thread). Anyone else's connection is closed there and then, before any task or
timer: with a 403 (FOREIGN_ANSWERS a second at most) and a log line, nothing else; it never
holds one of the owner's places, and a flood of them costs the owner little. Where the kernel
cannot say, a per-user secret must come with every request, as the `X-Ctxd-Token` header or the
`ctxd_token` cookie that `/?token=` sets. A page from elsewhere in the owner's own browser is
kept out by the Host and Origin checks (DNS rebinding, cross-site requests) and, for hooks, by
requiring `Content-Type: application/json` (which a cross-site form cannot send).

Bounded like the socket, and accepted by the same loop (ctxd/daemon/accept.py): at most
MAX_CONNECTIONS open (when all are taken, the one idle longest makes room), a request head
bounded by ctxd/daemon/httpwire.py, a body of at most `ctxd_wire.MAX_PAYLOAD` drawn from
BODY_BUDGET, every request within REQUEST_DEADLINE, an idle keep-alive connection closed after
IDLE_TIMEOUT.
"""

from __future__ import annotations

import contextlib
import importlib.resources
import logging
import os
import socket
import struct
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import anyio
import anyio.lowlevel
import anyio.to_thread
import ctxd_wire as wire
import orjson
from anyio.abc import TaskGroup

from ctxd.daemon import metrics
from ctxd.daemon.accept import RECEIVE_SIZE, REQUEST_DEADLINE, Acceptor, Connection
from ctxd.daemon.config import load_http_settings
from ctxd.daemon.history import HISTORY_FILE, History, record_history
from ctxd.daemon.httpwire import (
    HttpError,
    HttpRequest,
    body_length,
    parse_head,
    request_line,
    response,
    response_parts,
    split_head,
)
from ctxd.daemon.listeners import adopted_http_listener, open_http_listener
from ctxd.daemon.peer import (
    TOKEN_COOKIE,
    TOKEN_FILE,
    OwnerCheck,
    PeerOwner,
    load_or_create_token,
    proc_net_available,
)
from ctxd.daemon.sessions import Sessions
from ctxd.errors import CtxdError
from ctxd.protocol import Answer, Request, resolve

__all__ = [
    "BODY_BUDGET",
    "HOOK_PATH",
    "MAX_CONNECTIONS",
    "STATUS_PATH",
    "HttpListening",
    "HttpServer",
    "hook_url",
    "start",
]

logger = logging.getLogger(__name__)

HOOK_PATH = "/ctxd/hook/"
#: The versioned status document (with the dashboard's history), and the path it had before it
#: was versioned, kept for the tools that use it: both answer the same bytes.
STATUS_PATH = "/api/v1/status"
STATUS_PATHS = frozenset({STATUS_PATH, "/api/status"})
MAX_CONNECTIONS = 256
BODY_BUDGET = 4 * wire.MAX_PAYLOAD
IDLE_TIMEOUT = 5.0
MAX_REQUESTS_PER_CONNECTION = 1000
#: Connections accepted before their owners are looked up, all at once.
ACCEPT_BATCH = 128
#: Other users' connections answered 403 per second, at most (the rest are closed unanswered).
FOREIGN_ANSWERS = 16
ENV_HEADER = b"x-ctxd-env-"
_RESET = struct.pack("ii", 1, 0)  # SO_LINGER on, 0 s: close() resets the connection

Handler = Callable[[Request], Answer]
_STATUS_REQUEST = Request("status", {"v": wire.VERSION, "op": "status"}, b"")


def hook_url(port: int, agent: str, host: str = "127.0.0.1") -> str:
    """The URL an agent's HTTP hook posts to."""
    return f"http://{host}:{port}{HOOK_PATH}{agent}"


class _Budget:
    def __init__(self, size: int) -> None:
        self.size = size
        self.used = 0


class _Conn(Connection):
    """One accepted socket (the shared awaits), the bytes received past the last request, and
    its peer's uid."""

    __slots__ = ("buffer", "looked_up", "uid")

    def __init__(self, sock: socket.socket, uid: int | None) -> None:
        super().__init__(sock)
        self.uid = uid
        self.buffer = b""
        self.looked_up = 0.0  # seconds the owner lookup took at accept

    async def read_head(self) -> bytes | None:
        """The next request's head (without the blank line); None when the peer closed
        between requests."""
        while (split := split_head(self.buffer)) is None:
            try:
                data = await self.receive(RECEIVE_SIZE)
            except anyio.EndOfStream:
                if self.buffer:
                    raise
                return None
            self.buffer += data
        head, self.buffer = split
        return head

    async def read_body(self, size: int) -> bytes:
        body = bytearray(self.buffer[:size])
        self.buffer = self.buffer[size:]
        while len(body) < size:
            body += await self.receive(RECEIVE_SIZE)
        if len(body) > size:  # a pipelined next request
            self.buffer = bytes(body[size:])
            del body[size:]
        return bytes(body)


def _refused(status: int, body: bytes = b"") -> bytes:
    """An answer after which the connection is closed."""
    return response(status, body, "text/plain", keep_alive=False)


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
        self._arrivals: list[socket.socket] = []  # accepted, owner not looked up yet
        self._answers = float(FOREIGN_ANSWERS)  # 403s other users may still be given now
        self._answers_at = time.monotonic()
        self._idle: dict[_Conn, anyio.CancelScope] = {}  # waiting for a request, oldest first
        self.budget = _Budget(BODY_BUDGET)
        #: Seconds from a request's last byte to its answer's, per request (for the histogram).
        self.durations = metrics.Histogram()
        self.check = OwnerCheck(self.uid, port, token)
        self._acceptor = Acceptor(self, "HTTP")

    @property
    def accept_errors(self) -> int:
        return self._acceptor.errors

    async def serve(self, listener: socket.socket, stopping: anyio.Event) -> None:
        """Accept on `listener` until `stopping` is set, then let the connections already
        accepted finish. The listener is closed on return."""
        with contextlib.closing(self.owner):
            await self._acceptor.serve(listener, stopping)

    # ------------------------------------------------------------------ a connection

    @property
    def batch(self) -> int:
        return ACCEPT_BATCH

    def accepted(self, sock: socket.socket, connections: TaskGroup) -> None:
        """Keep `sock` for `settle`, which looks up the owners of a whole batch at once; with
        a token instead of the kernel's word, give it its task now."""
        if self.token is None:
            self._arrivals.append(sock)
        else:
            self._admit(sock, None, 0.0, connections)

    async def settle(self, connections: TaskGroup) -> None:
        """Look up the peers' owners of the connections accepted since the last call (in a
        worker thread when that reads /proc/net/tcp), give the owner's their tasks first, and
        refuse everyone else's on the spot: no task, no timer, nothing held."""
        arrivals, self._arrivals = self._arrivals, []
        try:
            started = time.perf_counter()
            if not arrivals:
                uids: list[int | None] = []
            elif self.owner.reads_table:
                uids = await anyio.to_thread.run_sync(self.owner.uids, arrivals)
            else:
                uids = self.owner.uids(arrivals)
            looked_up = time.perf_counter() - started
        except BaseException:
            for sock in arrivals:
                sock.close()
            raise
        foreign = []
        for sock, uid in zip(arrivals, uids, strict=True):
            if uid == self.uid:
                self._admit(sock, uid, looked_up, connections)
            else:
                foreign.append((sock, uid))
        for sock, uid in foreign:
            self._refuse_foreign(sock, uid)
        await anyio.lowlevel.checkpoint()

    def _admit(
        self, sock: socket.socket, uid: int | None, looked_up: float, connections: TaskGroup
    ) -> None:
        """Give an owner's connection its task; when every place is taken, the connection idle
        longest (waiting for a request) makes room, or this one is told 503."""
        if self.in_flight >= self.max_connections and not self.make_room():
            self.refused += 1
            with contextlib.suppress(OSError):
                sock.send(_refused(503))
            sock.close()
            return
        self.in_flight += 1
        conn = _Conn(sock, uid)
        conn.looked_up = looked_up
        connections.start_soon(self._connection, conn)

    def _refuse_foreign(self, sock: socket.socket, uid: int | None) -> None:
        """Another user's connection, closed at once: with a 403 while the bucket of answers
        holds one (the first bytes of its request, if already there, go in the log line), else
        reset, which also spares the table of sockets the flooder's time-wait row (every row
        there makes each /proc/net/tcp read of the owner's lookups slower)."""
        self.refused += 1
        with sock:
            now = time.monotonic()
            self._answers = min(
                FOREIGN_ANSWERS, self._answers + (now - self._answers_at) * FOREIGN_ANSWERS
            )
            self._answers_at = now
            method = target = "-"
            why = "not the owner: reset"
            try:
                sock.setblocking(False)
                if self._answers >= 1:
                    self._answers -= 1
                    why = "not the owner"
                    with contextlib.suppress(BlockingIOError):
                        if head := sock.recv(RECEIVE_SIZE):
                            method, target = request_line(head)
                    sock.send(_refused(403, b"forbidden\n"))
                    sock.shutdown(socket.SHUT_WR)
                else:
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _RESET)
            except OSError:
                pass
            self.check.log(uid, method, target, sock, why)

    def make_room(self) -> bool:
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
                answer, keep = await self._read_and_answer(conn)
            except HttpError as exc:
                self.refused += 1
                answer = _refused(exc.status, f"{exc}\n".encode())
            for part in (answer,) if isinstance(answer, bytes) else answer:
                await conn.send(part)
        if deadline.cancelled_caught:
            self.refused += 1
            with contextlib.suppress(OSError):
                conn.sock.send(_refused(408))
            return False
        return keep

    async def _read_and_answer(self, conn: _Conn) -> tuple[bytes | list[bytes], bool]:
        head = await conn.read_head()
        if head is None:
            raise anyio.EndOfStream
        request = parse_head(head)
        length = body_length(request, wire.MAX_PAYLOAD)
        if length:
            if self.budget.used + length > self.budget.size:
                raise HttpError(503, "busy: too many request bytes being read")
            self.budget.used += length
            try:
                request.body = await conn.read_body(length)
            finally:
                self.budget.used -= length
        # The owner lookup at accept counts toward the connection's first request.
        started = time.perf_counter() - conn.looked_up
        conn.looked_up = 0.0
        refusal = self.check.refusal(conn.uid, request)
        if refusal is not None:
            self.refused += 1
            self.check.log(conn.uid, request.method, request.target, conn.sock, refusal)
            return _refused(403, b"forbidden\n"), False
        self.requests += 1
        answer = await self._route(request)
        self.durations.observe(time.perf_counter() - started)
        return answer, request.keep_alive

    # ------------------------------------------------------------------ routes

    async def _route(self, request: HttpRequest) -> bytes | list[bytes]:
        keep = request.keep_alive
        path = urlsplit(request.target).path
        if path.startswith(HOOK_PATH):
            if request.method != "POST":
                return response(405, b"", "text/plain", keep_alive=keep, extra=[("Allow", "POST")])
            return await self._hook(request, path[len(HOOK_PATH) :])
        if request.method != "GET":
            return response(405, b"", "text/plain", keep_alive=keep, extra=[("Allow", "GET")])
        if path == "/":
            if self.token is not None and "token=" in request.target:
                # The token leaves the address bar for a cookie only this host gets.
                value = f"{TOKEN_COOKIE}={self.token}; HttpOnly; SameSite=Strict; Path=/"
                return response(
                    303,
                    b"",
                    "text/plain",
                    keep_alive=keep,
                    extra=[("Location", "/"), ("Set-Cookie", value)],
                )
            return response(200, self.dashboard, "text/html; charset=utf-8", keep_alive=keep)
        if path == "/metrics":
            doc = await self._status()
            extra = {"refused": {"http": self.refused}, "errors": {"http": self.errors}}
            text = metrics.render(doc, extra) + self.durations.render(
                "ctxd_http_request_duration_seconds",
                "Time from a request's last byte to its answer, in the daemon.",
            )
            return response(200, text.encode(), metrics.CONTENT_TYPE, keep_alive=keep)
        if path in STATUS_PATHS:
            # The status document's bytes go out as the daemon encoded them: decoding 10,000
            # rows to encode them again cost more than building them.
            status = await resolve(self.status(_STATUS_REQUEST))
            history = self.history.encoded()
            return response_parts(
                200, (b'{"status":', status, b',"history":', history, b"}"), keep_alive=keep
            )
        return response(404, b"not found\n", "text/plain", keep_alive=keep)

    async def _status(self) -> dict[str, Any]:
        answer = self.status(_STATUS_REQUEST)
        result = await resolve(answer)
        doc: dict[str, Any] = orjson.loads(result)
        return doc

    async def _hook(self, request: HttpRequest, rest: str) -> bytes:
        keep = request.keep_alive
        content_type = (request.header(b"content-type") or "").split(";")[0].strip().lower()
        if content_type != "application/json":
            return response(415, b"", "text/plain", keep_alive=keep)
        parts = rest.split("/")
        if not 1 <= len(parts) <= 2 or not all(_plain(part) for part in parts):
            return response(404, b"not found\n", "text/plain", keep_alive=keep)
        env = {
            name[len(ENV_HEADER) :].decode("ascii", "replace").upper(): value.decode("latin-1")
            for name, value in request.headers.items()
            if name.startswith(ENV_HEADER) and value
        }
        header: dict[str, Any] = {"v": wire.VERSION, "op": "hook", "agent": parts[0], "env": env}
        if len(parts) == 2:
            header["event"] = parts[1]
        try:
            result = await resolve(self.hook(Request("hook", header, request.body)))
        except Exception as exc:
            # As the command client does with an error answer: nothing for the agent.
            self.errors += 1
            if isinstance(exc, CtxdError):
                logger.info("HTTP hook %s not answered: %s", rest, exc)
            else:
                logger.error("HTTP hook %s failed", rest, exc_info=exc)
            reason = str(exc).replace("\r", " ").replace("\n", " ")[:200]
            return response(200, b"", keep_alive=keep, extra=[("X-Ctxd-Error", reason)])
        return response(200, result, keep_alive=keep)


def _plain(part: str) -> bool:
    return 0 < len(part) <= 64 and all(c.isascii() and (c.isalnum() or c in "_-") for c in part)


@dataclass(frozen=True, slots=True)
class HttpListening:
    """What came of `[http]` when the daemon started (`status` and `doctor` show it): whether
    the config enabled it, where the daemon listens, or why it does not (the port taken, say).
    A later change of the config takes a restart."""

    enabled: bool
    url: str | None = None
    error: str | None = None

    def as_json(self) -> dict[str, object]:
        return asdict(self)


async def start(
    env: Mapping[str, str],
    config: Path,
    state_dir: Path,
    handlers: Mapping[str, Handler],
    sessions: Sessions,
    tg: TaskGroup,
    stopping: anyio.Event,
) -> HttpListening:
    """Serve HTTP in `tg` (until `stopping`) when the config's `[http]` enables it, on the
    listener systemd passed (`adopted_http_listener`) or a new one. When it is off, or the port
    cannot be had (logged: the Unix socket serves on regardless), says so."""
    try:
        settings = await anyio.to_thread.run_sync(load_http_settings, config)
    except CtxdError as exc:
        logger.error("HTTP listener not started: %s", exc)
        return HttpListening(True, error=str(exc))
    adopted = adopted_http_listener(env)
    if not settings.enabled:
        if adopted is not None:
            logger.warning("systemd passed a TCP listener, but [http] is off: not serving it")
            adopted.close()
        return HttpListening(False)
    try:
        listener = adopted or open_http_listener(settings.port, settings.host)
        # Where the kernel cannot name a peer's owner, a secret proves it.
        token = None if proc_net_available() else load_or_create_token(state_dir / TOKEN_FILE)
    except CtxdError as exc:
        logger.error("HTTP listener not started: %s", exc)
        return HttpListening(True, error=str(exc))
    host, port = listener.getsockname()[:2]
    if adopted is not None and port != settings.port:
        logger.warning(
            "systemd's TCP listener is on port %d; the config says %d", port, settings.port
        )
    server = HttpServer(handlers["hook"], handlers["status"], port=port, token=token)
    tg.start_soon(server.serve, listener, stopping)
    tg.start_soon(record_history, server.history, sessions, stopping, state_dir / HISTORY_FILE)
    logger.info(
        "HTTP on http://%s:%d%s (owner checked by %s)",
        host,
        port,
        " (from systemd)" if adopted is not None else "",
        "token" if token else "the kernel's socket table",
    )
    shown = f"[{host}]" if ":" in host else host
    return HttpListening(True, url=f"http://{shown}:{port}/")
