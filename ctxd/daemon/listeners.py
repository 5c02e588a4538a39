"""The HTTP server's listening socket: bound on loopback only, or adopted from systemd.

With socket activation (`ctxd.socket` listing a second `ListenStream=127.0.0.1:PORT` beside the
Unix socket) systemd holds the port while no daemon runs, so an HTTP hook then starts one
instead of failing; the daemon finds the TCP listener among the descriptors systemd passed.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping

from ctxd.errors import CtxdError

__all__ = ["SD_LISTEN_FDS_START", "adopted_http_listener", "open_http_listener"]

#: The first descriptor systemd passes (sd_listen_fds(3)); the Unix socket is that one.
SD_LISTEN_FDS_START = 3


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
