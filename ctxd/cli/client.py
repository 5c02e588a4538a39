"""The CLI's side of the socket: one blocking request, one answer, translated errors."""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import ctxd_wire as wire
import orjson

from ctxd import paths, protocol
from ctxd.errors import DaemonUnavailable, ProtocolError

__all__ = ["request", "request_json"]


def request(
    op: str,
    payload: bytes = b"",
    *,
    env: Mapping[str, str] = os.environ,
    timeout: float = 10.0,
    **fields: Any,
) -> bytes:
    """Send one request to the daemon; the answer's result bytes, or a CtxdError."""
    path: Path = paths.socket_path(env)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout)
        try:
            sock.connect(str(path))
        except (FileNotFoundError, ConnectionRefusedError):
            raise DaemonUnavailable(f"no ctxd daemon is running (socket {path})") from None
        except OSError as exc:
            raise DaemonUnavailable(f"cannot reach ctxd at {path}: {exc.strerror or exc}") from None
        try:
            sock.sendall(protocol.encode_request(op, payload, **fields))
            body = wire.read_frame(sock, wire.MAX_STATUS)
        except wire.FrameTooLarge as exc:
            raise ProtocolError(str(exc)) from None
        except TimeoutError:
            raise DaemonUnavailable(f"ctxd at {path} did not answer within {timeout:g} s") from None
        except OSError as exc:
            raise DaemonUnavailable(f"lost the connection to ctxd at {path}: {exc}") from None
    return protocol.decode_response(body)


def request_json(op: str, *, env: Mapping[str, str] = os.environ, **fields: Any) -> Any:
    return orjson.loads(request(op, env=env, **fields))
