"""Requests and answers between ctxd and its clients, over `ctxd_wire`'s frames.

`ctxd_wire` (stdlib only, shared with the hook client) defines the frame, the limits and the
success header; this module adds what needs JSON: decoding a request's header line and encoding
error answers. The server frames every answer; handlers return an `Answer`: result bytes, or
an awaitable of them for an answer that waits for something (`resolve` gets the bytes).
"""

from __future__ import annotations

from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Any

import ctxd_wire as wire
import orjson

from ctxd.errors import ProtocolError

OPS = ("hook", "status", "status_view", "line", "stop", "ping")

__all__ = [
    "OPS",
    "Answer",
    "Request",
    "decode_request",
    "decode_response",
    "encode_error",
    "encode_ok",
    "encode_request",
    "resolve",
]

#: A handler's answer: the result bytes, at once or once something was waited for.
Answer = bytes | Awaitable[bytes]


async def resolve(answer: Answer) -> bytes:
    """The bytes of an answer, waiting for them if they are still to come."""
    return answer if isinstance(answer, bytes) else await answer


@dataclass(frozen=True, slots=True)
class Request:
    op: str
    header: dict[str, Any]
    payload: bytes


def encode_request(op: str, payload: bytes = b"", **fields: Any) -> bytes:
    header = orjson.dumps({"v": wire.VERSION, "op": op, **fields})
    return wire.frame(header + b"\n" + payload)


def decode_request(body: bytes) -> Request:
    header_line, _, payload = body.partition(b"\n")
    try:
        header = orjson.loads(header_line)
    except orjson.JSONDecodeError as exc:
        raise ProtocolError("request header is not JSON") from exc
    if not isinstance(header, dict):
        raise ProtocolError("request header is not an object")
    if header.get("v") != wire.VERSION:
        raise ProtocolError(
            f"unsupported protocol version {header.get('v')!r}, want {wire.VERSION}"
        )
    op = header.get("op")
    if op not in OPS:
        raise ProtocolError(f"unknown op {op!r}")
    return Request(op=op, header=header, payload=payload)


def encode_ok(result: bytes = b"") -> bytes:
    # One copy of a result that may be megabytes (a status of 10,000 sessions), not two.
    size = len(wire.OK_HEADER) + 1 + len(result)
    return b"".join((size.to_bytes(wire.HEADER_SIZE, "big"), wire.OK_HEADER, b"\n", result))


def encode_error(message: str) -> bytes:
    return wire.frame(orjson.dumps({"v": wire.VERSION, "ok": False, "error": message}) + b"\n")


def decode_response(body: bytes) -> bytes:
    """The result bytes of an answer body; ProtocolError carrying the daemon's error message."""
    result = wire.ok_result(body)
    if result is not None:
        return result
    header_line = body.partition(b"\n")[0]
    try:
        header = orjson.loads(header_line)
    except orjson.JSONDecodeError as exc:
        raise ProtocolError("response header is not JSON") from exc
    if not isinstance(header, dict) or header.get("v") != wire.VERSION:
        raise ProtocolError("response is not a ctxd v1 answer")
    raise ProtocolError(str(header.get("error") or "the daemon refused the request"))
