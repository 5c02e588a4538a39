"""Who is at the other end of an accepted loopback TCP connection.

A loopback port, unlike the 0600 Unix socket, is reachable by every local user, so each
connection's owner is asked of the kernel when it is accepted, on Linux: the uid of the peer's
socket, by an exact sock_diag lookup over netlink, else from its row in `/proc/net/tcp{,6}` (the
row whose local address is the peer's and whose remote address is ours). Where the kernel cannot
say, a per-user secret (a 0600 file in the state dir, TOKEN_FILE) proves the owner instead.
`OwnerCheck` decides, per request, whether it may be answered.
"""

from __future__ import annotations

import hmac
import logging
import secrets
import socket
import struct
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

from ctxd.daemon.httpwire import HttpRequest, cookie
from ctxd.errors import CtxdError
from ctxd.fileio import write_atomic

__all__ = [
    "TOKEN_COOKIE",
    "TOKEN_FILE",
    "TOKEN_HEADER",
    "OwnerCheck",
    "PeerOwner",
    "load_or_create_token",
    "proc_net_available",
    "proc_net_uid",
    "table_uids",
]

logger = logging.getLogger(__name__)

#: The per-user secret, in the state dir, where the kernel cannot tell a peer's uid, and where
#: a request carries it.
TOKEN_FILE = "http-token"
TOKEN_HEADER = b"x-ctxd-token"
TOKEN_COOKIE = "ctxd_token"
REFUSAL_LOG_EVERY = 1.0  # seconds between log lines about refusals of the same peer uid


def _hex_address(address: str, family: int) -> str:
    """An address as /proc/net/tcp{,6} prints it: each 32-bit word in host byte order, %08X."""
    packed = socket.inet_pton(family, address)
    return "".join(
        f"{int.from_bytes(packed[i : i + 4], sys.byteorder):08X}" for i in range(0, len(packed), 4)
    )


def _connection_key(sock: socket.socket) -> tuple[str, bytes, bytes] | None:
    """Which table holds the peer's row, the peer's address as that table prints it, and ours
    with the space around it; None once the peer is gone (no address)."""
    family = sock.family
    try:
        peer = sock.getpeername()
        ours = sock.getsockname()
    except OSError:
        return None
    table = "tcp" if family == socket.AF_INET else "tcp6"
    theirs = f"{_hex_address(peer[0], family)}:{peer[1]:04X}".encode()
    return table, theirs, f" {_hex_address(ours[0], family)}:{ours[1]:04X} ".encode()


def table_uids(socks: Sequence[socket.socket], proc: Path = Path("/proc/net")) -> list[int | None]:
    """The uid owning the other end of each loopback TCP connection in `socks`, from the rows of
    /proc/net/tcp (or tcp6) whose local address is a peer's and whose remote address is ours:
    each table read once for the whole batch, since one read costs milliseconds once thousands
    of sockets exist (and another user can make them exist). None for a connection whose row is
    not there (the peer is gone), or whose row has no inode: an orphaned or time-wait socket,
    which the kernel prints as uid 0 whoever made it."""
    keys = [_connection_key(sock) for sock in socks]
    found: dict[tuple[str, bytes, bytes], int] = {}
    wanted: dict[tuple[str, bytes], set[bytes]] = {}
    for key in keys:
        if key is not None:
            wanted.setdefault((key[0], key[2]), set()).add(key[1])
    tables: dict[str, bytes] = {}
    for (table, ours), theirs in wanted.items():
        if table not in tables:
            try:
                with open(proc / table, "rb") as f:
                    tables[table] = f.read()
            except OSError:
                tables[table] = b""
        data = tables[table]
        # Only rows whose remote address is ours are looked at: a bytes search, not a parse of
        # every row.
        at = data.find(ours)
        while at >= 0:
            start = data.rfind(b" ", 0, at) + 1
            if data[start - 2 : start] == b": ":  # ours is the remote column, theirs the local
                local = data[start:at]
                if local in theirs:
                    end = data.find(b"\n", at)
                    uid = _row_uid(data[start : end if end >= 0 else len(data)])
                    if uid is not None:
                        found[(table, local, ours)] = uid
            at = data.find(ours, at + len(ours))
    return [None if key is None else found.get(key) for key in keys]


def _row_uid(row: bytes) -> int | None:
    # local rem st tx:rx tr:when retrnsmt uid timeout inode ...
    fields = row.split()
    try:
        uid, inode = int(fields[6]), int(fields[8])
    except (IndexError, ValueError):
        return None
    return uid if inode else None


def proc_net_uid(sock: socket.socket, proc: Path = Path("/proc/net")) -> int | None:
    """The uid owning the other end of one loopback TCP connection (`table_uids`)."""
    return table_uids([sock], proc)[0]


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
_UID_OFFSET = _NLMSG_HEADER.size + 64  # inet_diag_msg: 4 bytes, sockid 48, 3 u32, uid, inode


class PeerOwner:
    """The uid owning the other end of an accepted loopback connection, as the kernel knows
    it: an exact socket lookup over netlink (sock_diag, the table /proc/net/tcp prints, without
    printing all of it: reading /proc/net/tcp costs milliseconds once a few hundred sockets
    exist, the lookup tens of microseconds), else the rows of /proc/net/tcp{,6}, read once for
    a whole batch of connections (`reads_table`: where netlink is refused, as under the
    systemd unit's RestrictAddressFamilies)."""

    def __init__(self, proc: Path = Path("/proc/net")) -> None:
        self.proc = proc
        self._netlink: socket.socket | None = None
        self._netlink_failed = False
        self._seq = 0

    @property
    def reads_table(self) -> bool:
        """Whether a lookup reads /proc/net/tcp (milliseconds: worth a worker thread)."""
        return self._netlink_failed

    def uid(self, sock: socket.socket) -> int | None:
        return self.uids([sock])[0]

    def uids(self, socks: Sequence[socket.socket]) -> list[int | None]:
        """The peer's uid of each of `socks` (None: gone, or not known)."""
        if not self._netlink_failed:
            try:
                return [self._diag_uid(sock) for sock in socks]
            except OSError as exc:
                self._netlink_failed = True
                logger.info("sock_diag unavailable (%s); reading %s instead", exc, self.proc)
        return table_uids(socks, self.proc)

    def _diag_uid(self, sock: socket.socket) -> int | None:
        if self._netlink is None:
            self._netlink = socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, _NETLINK_SOCK_DIAG)
            self._netlink.settimeout(1.0)
        family = sock.family
        try:
            peer, ours = sock.getpeername(), sock.getsockname()
        except OSError:
            return None  # the peer is gone
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
        if kind == _NLMSG_ERROR or len(reply) < _UID_OFFSET + 8:
            return None  # no such socket: the peer is gone
        uid, inode = struct.unpack_from("=II", reply, _UID_OFFSET)
        # An orphaned or time-wait socket has no inode, and uid 0 whoever made it.
        return uid if inode else None

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


class OwnerCheck:
    """Whether a request may be answered: it comes from the owner (by its peer's uid or, where
    the kernel cannot tell, by the token it carries) and from a page of ctxd's own (the Host
    and Origin checks, against DNS rebinding and cross-site requests). Refusals are logged at
    most once a second per peer uid (or reason)."""

    def __init__(self, uid: int, port: int, token: str | None) -> None:
        self.uid = uid
        self.token = token
        self._hosts = {f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}"}
        self._origins = {f"http://{host}" for host in self._hosts}
        self._logged: dict[object, float] = {}

    def refusal(self, uid: int | None, request: HttpRequest) -> str | None:
        """Why `request`, on a connection whose peer is `uid`, may not be answered; None when
        it may."""
        if self.token is not None:
            if not self._token_ok(request):
                return "no valid token"
        elif uid is None:
            return "peer's owner unknown"
        elif uid != self.uid:
            return f"uid {uid}"
        if request.header(b"host") not in self._hosts:
            return f"Host {request.header(b'host')!r}"
        origin = request.header(b"origin")
        if origin is not None and origin not in self._origins:
            return f"Origin {origin!r}"
        return None

    def _token_ok(self, request: HttpRequest) -> bool:
        assert self.token is not None
        offered = request.header(TOKEN_HEADER)
        if offered is None:
            offered = cookie(request.header(b"cookie") or "", TOKEN_COOKIE)
        if offered is None and request.method == "GET":
            offered = parse_qs(urlsplit(request.target).query).get("token", [None])[0]
        return offered is not None and hmac.compare_digest(offered.encode(), self.token.encode())

    def log(self, uid: int | None, method: str, target: str, sock: socket.socket, why: str) -> None:
        """One log line for a refusal, unless one was logged for `uid` (or `why`) just now."""
        now = time.monotonic()
        key = uid if uid is not None else why
        if now - self._logged.get(key, -REFUSAL_LOG_EVERY) >= REFUSAL_LOG_EVERY:
            if len(self._logged) > 1000:
                self._logged.clear()
            self._logged[key] = now
            who = f"uid {uid}" if uid is not None else "unknown owner"
            logger.warning(
                "HTTP: refused %s %s from %s (%s): %s",
                method,
                target[:200],
                _peer_address(sock),
                who,
                why,
            )


def _peer_address(sock: socket.socket) -> str:
    """`host:port` of the peer, for log lines; "?" once it is gone."""
    try:
        host, port = sock.getpeername()[:2]
    except OSError:
        return "?"
    return f"{host}:{port}"
