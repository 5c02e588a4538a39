"""The CLI's side of the socket: one blocking request, one answer, translated errors.

`ctxd status` and `ctxd watch` are a round trip and some text, so this module imports only what
the round trip needs: `ctxd_wire` (stdlib only, the frame and the socket's place, shared with the
daemon) and the stdlib's `json` for one header line and one answer. The daemon's side of the
protocol (`ctxd.protocol`: orjson, dataclasses) costs more to import than the request itself.
"""

from __future__ import annotations

import _socket
import json
import os

import ctxd_wire as wire

from ctxd.errors import DaemonNotRunning, DaemonUnavailable, ProtocolError

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs start-up time; the checker alone needs it
    from collections.abc import Mapping
    from typing import Any

__all__ = ["request", "request_json"]


def _encode(op: str, payload: bytes, fields: dict[str, Any]) -> bytes:
    header = json.dumps({"v": wire.VERSION, "op": op, **fields}, separators=(",", ":"))
    return wire.frame(header.encode() + b"\n" + payload)


def _result(body: bytes) -> bytes:
    """The result bytes of an answer body; ProtocolError carrying the daemon's error message."""
    result = wire.ok_result(body)
    if result is not None:
        return result
    try:
        header = json.loads(body.partition(b"\n")[0])
    except ValueError:
        raise ProtocolError("response header is not JSON") from None
    if not isinstance(header, dict) or header.get("v") != wire.VERSION:
        raise ProtocolError("response is not a ctxd v1 answer")
    raise ProtocolError(str(header.get("error") or "the daemon refused the request"))


def request(
    op: str,
    payload: bytes = b"",
    *,
    env: Mapping[str, str] = os.environ,
    timeout: float = 10.0,
    **fields: Any,
) -> bytes:
    """Send one request to the daemon; the answer's result bytes, or a CtxdError."""
    path = wire.socket_path(env)
    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        sock.settimeout(timeout)
        try:
            sock.connect(path)
        except (FileNotFoundError, ConnectionRefusedError):
            raise DaemonNotRunning(f"no ctxd daemon is running (socket {path})", path) from None
        except OSError as exc:
            raise DaemonUnavailable(f"cannot reach ctxd at {path}: {exc.strerror or exc}") from None
        try:
            sock.sendall(_encode(op, payload, fields))
            body = wire.read_frame(sock, wire.MAX_STATUS)
        except wire.FrameTooLarge as exc:
            raise ProtocolError(str(exc)) from None
        except TimeoutError:
            raise DaemonUnavailable(f"ctxd at {path} did not answer within {timeout:g} s") from None
        except OSError as exc:
            raise DaemonUnavailable(f"lost the connection to ctxd at {path}: {exc}") from None
    finally:
        sock.close()
    return _result(body)


def request_json(op: str, *, env: Mapping[str, str] = os.environ, **fields: Any) -> Any:
    try:
        return json.loads(request(op, env=env, **fields))
    except ValueError:  # UnicodeDecodeError included
        raise ProtocolError(f"the daemon's answer to {op!r} is not JSON") from None
