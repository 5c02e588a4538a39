"""The daemon's listening sockets and what it tells systemd: the Unix socket (bound 0600, or
adopted from systemd), the HTTP server's socket (bound on loopback only, or adopted), readiness
notifications, and how many connections the descriptor limit leaves room for.

With socket activation (`ctxd.socket` listing a second `ListenStream=127.0.0.1:PORT` beside the
Unix socket) systemd holds the port while no daemon runs, so an HTTP hook then starts one
instead of failing; the daemon finds the TCP listener among the descriptors systemd passed.
"""

from __future__ import annotations

import logging
import os
import resource
import socket
import stat
from collections.abc import Mapping
from pathlib import Path

from ctxd.daemon.server import MAX_CONNECTIONS
from ctxd.errors import CtxdError

__all__ = [
    "SD_LISTEN_FDS_START",
    "adopted_http_listener",
    "connection_limit",
    "notify_systemd",
    "open_http_listener",
    "open_listener",
    "systemd_socket",
]

logger = logging.getLogger(__name__)

#: The first descriptor systemd passes (sd_listen_fds(3)); the Unix socket is that one.
SD_LISTEN_FDS_START = 3
# Descriptors kept for everything but connections: listener, lock, log, journal, watcher, event
# loop, transcripts being read, worker threads' files.
RESERVED_FDS = 64


def systemd_socket(env: Mapping[str, str]) -> socket.socket | None:
    """The listening socket systemd passed us (socket activation), if any."""
    if env.get("LISTEN_PID") != str(os.getpid()) or int(env.get("LISTEN_FDS", "0") or 0) < 1:
        return None
    sock = socket.socket(fileno=SD_LISTEN_FDS_START)
    sock.setblocking(False)
    return sock


def notify_systemd(env: Mapping[str, str], message: str) -> None:
    """sd_notify(3) without libsystemd: one datagram to $NOTIFY_SOCKET, if set."""
    address = env.get("NOTIFY_SOCKET")
    if not address:
        return
    if address.startswith("@"):
        address = "\0" + address[1:]
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        try:
            sock.sendto(message.encode(), address)
        except OSError as exc:
            logger.warning("cannot notify systemd: %s", exc)


def open_listener(path: Path) -> socket.socket:
    """Bind the socket 0600 from the start (umask), replacing a stale file from a crashed daemon.

    Only called with the daemon's lock held, so the file it replaces is never a live daemon's.
    """
    if path.exists() or path.is_symlink():
        if not stat.S_ISSOCK(path.lstat().st_mode):
            raise CtxdError(f"{path} exists and is not a socket; remove it or set CTXD_SOCKET")
        path.unlink()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old_umask = os.umask(0o177)
    try:
        sock.bind(str(path))
        sock.listen(socket.SOMAXCONN)
    except OSError as exc:
        sock.close()
        raise CtxdError(f"cannot listen on {path}: {exc.strerror or exc}") from None
    finally:
        os.umask(old_umask)
    os.chmod(path, 0o600)
    return sock


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


def adopted_http_listener(env: Mapping[str, str]) -> socket.socket | None:
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


def connection_limit() -> int:
    """How many connections the server may hold open: MAX_CONNECTIONS, or fewer when the
    descriptor limit (raised to its hard maximum first) leaves less room than that."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = MAX_CONNECTIONS + RESERVED_FDS
    if soft != resource.RLIM_INFINITY and soft < wanted:
        target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (OSError, ValueError):
            pass
    if soft == resource.RLIM_INFINITY:
        return MAX_CONNECTIONS
    return max(8, min(MAX_CONNECTIONS, soft - RESERVED_FDS))
