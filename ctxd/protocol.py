"""The wire format between ctxd and its clients (the hook client, the CLI).

A frame is a 4-byte big-endian length followed by that many bytes of body. A request body is a
JSON header line (`{"v":1,"op":...}`), a newline, and an optional raw payload (a hook's stdin,
forwarded untouched so the hook client never has to parse JSON). A response body is a JSON header
line (`{"v":1,"ok":true}` or `{"v":1,"ok":false,"error":"..."}`), a newline, and the result: for a
hook, the exact bytes the client prints; for other ops, a JSON document.

`ctxd_hook.py` repeats the constants it needs; tests keep the two in step.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from ctxd.errors import ProtocolError

VERSION = 1
HEADER_SIZE = 4
MAX_REQUEST = 8 * 1024 * 1024 + 4096  # a hook payload (8 MiB) plus its header line
MAX_RESPONSE = 1024 * 1024
OPS = ("hook", "status", "stop", "ping")


@dataclass(frozen=True, slots=True)
class Request:
    op: str
    header: dict[str, Any]
    payload: bytes


def frame(body: bytes) -> bytes:
    return len(body).to_bytes(HEADER_SIZE, "big") + body


def frame_size(prefix: bytes, limit: int) -> int:
    """The body length a 4-byte prefix announces; ProtocolError when over `limit`."""
    size = int.from_bytes(prefix, "big")
    if size > limit:
        raise ProtocolError(f"frame of {size} bytes is over the limit of {limit}")
    return size


def encode_request(op: str, payload: bytes = b"", **fields: Any) -> bytes:
    header = orjson.dumps({"v": VERSION, "op": op, **fields})
    return frame(header + b"\n" + payload)


def decode_request(body: bytes) -> Request:
    header_line, _, payload = body.partition(b"\n")
    try:
        header = orjson.loads(header_line)
    except orjson.JSONDecodeError as exc:
        raise ProtocolError("request header is not JSON") from exc
    if not isinstance(header, dict):
        raise ProtocolError("request header is not an object")
    if header.get("v") != VERSION:
        raise ProtocolError(f"unsupported protocol version {header.get('v')!r}, want {VERSION}")
    op = header.get("op")
    if op not in OPS:
        raise ProtocolError(f"unknown op {op!r}")
    return Request(op=op, header=header, payload=payload)


def encode_ok(result: bytes = b"") -> bytes:
    # The hook client recognises success by this exact prefix: keep the key order.
    return frame(b'{"v":1,"ok":true}\n' + result)


def encode_error(message: str) -> bytes:
    return frame(orjson.dumps({"v": VERSION, "ok": False, "error": message}) + b"\n")


def decode_response(body: bytes) -> bytes:
    """The result bytes of a response body; ProtocolError carrying the daemon's error message."""
    header_line, _, result = body.partition(b"\n")
    try:
        header = orjson.loads(header_line)
    except orjson.JSONDecodeError as exc:
        raise ProtocolError("response header is not JSON") from exc
    if not isinstance(header, dict) or header.get("v") != VERSION:
        raise ProtocolError("response is not a ctxd v1 answer")
    if not header.get("ok"):
        raise ProtocolError(str(header.get("error") or "the daemon refused the request"))
    return result
