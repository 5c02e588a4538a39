"""The little of HTTP/1.1 that ctxd's loopback listener speaks: a request's head parsed and
bounded, its body's length checked, an answer's bytes. Pure: bytes in, values or `HttpError`
out; no sockets, no clock.

Bounds: a request head of at most MAX_HEAD bytes and MAX_HEADERS lines; a body announced by
Content-Length only (no chunked encoding), and no larger than its caller allows. An error is
the answer's status and a one-line reason.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

__all__ = [
    "MAX_HEAD",
    "MAX_HEADERS",
    "HttpError",
    "HttpRequest",
    "body_length",
    "cookie",
    "parse_head",
    "request_line",
    "response",
    "response_parts",
    "split_head",
]

MAX_HEAD = 16 * 1024
MAX_HEADERS = 64

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


class HttpError(Exception):
    """A request that gets `status` and the message, then the connection closed."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass(slots=True)
class HttpRequest:
    method: str
    target: str
    version: str
    headers: dict[bytes, bytes]  # names in lower case
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


def split_head(buffer: bytes) -> tuple[bytes, bytes] | None:
    """(the head without its blank line, the bytes after it) once `buffer` holds a whole head;
    None while it may still come; HttpError 431 when it is over MAX_HEAD."""
    end = buffer.find(b"\r\n\r\n", 0, MAX_HEAD + 4)
    if end >= 0:
        return buffer[:end], buffer[end + 4 :]
    if len(buffer) > MAX_HEAD:
        raise HttpError(431, f"request head over {MAX_HEAD} bytes")
    return None


def parse_head(head: bytes) -> HttpRequest:
    """The request line and headers of `head`; HttpError when malformed or over MAX_HEADERS."""
    lines = head.split(b"\r\n")
    try:
        method, target, version = lines[0].decode("ascii").split(" ")
    except (UnicodeDecodeError, ValueError):
        raise HttpError(400, "malformed request line") from None
    if version not in ("HTTP/1.1", "HTTP/1.0"):
        raise HttpError(400, f"unsupported version {version[:16]!r}")
    if len(lines) - 1 > MAX_HEADERS:
        raise HttpError(431, f"more than {MAX_HEADERS} header lines")
    headers: dict[bytes, bytes] = {}
    for line in lines[1:]:
        name, colon, value = line.partition(b":")
        if not colon or not name or name != name.strip():
            raise HttpError(400, "malformed header line")
        key = name.lower()
        if key in headers and key in (b"content-length", b"host", b"transfer-encoding"):
            raise HttpError(400, f"repeated {key.decode()} header")
        headers[key] = value.strip()
    return HttpRequest(method, target, version, headers)


def request_line(head: bytes) -> tuple[str, str]:
    """(method, target) of a head, however malformed, for a log line; "-" for what is missing."""
    line = head.partition(b"\r\n")[0].decode("latin-1").split(" ")
    return line[0], line[1] if len(line) > 1 else "-"


def body_length(request: HttpRequest, limit: int) -> int:
    """How many body bytes follow `request`'s head; HttpError unless a Content-Length (or
    none: 0) of at most `limit` says so."""
    if b"transfer-encoding" in request.headers:
        raise HttpError(411, "send a Content-Length, not a Transfer-Encoding")
    text = request.header(b"content-length") or "0"
    if not text.isdigit() or len(text) > 12:
        raise HttpError(400, "malformed Content-Length")
    length = int(text)
    if length > limit:
        raise HttpError(413, f"a body is at most {limit} bytes")
    return length


def cookie(header: str, name: str) -> str | None:
    """The value of cookie `name` in a Cookie header; None when it is not there."""
    for item in header.split(";"):
        key, _, value = item.strip().partition("=")
        if key == name:
            return value
    return None


def response(
    status: int,
    body: bytes = b"",
    content_type: str = "application/json",
    *,
    keep_alive: bool = True,
    extra: Iterable[tuple[str, str]] = (),
) -> bytes:
    """A whole answer: status line, headers (never cached, never sniffed; `extra` too), body."""
    return b"".join(
        response_parts(status, (body,), content_type, keep_alive=keep_alive, extra=extra)
    )


def response_parts(
    status: int,
    body: Sequence[bytes],
    content_type: str = "application/json",
    *,
    keep_alive: bool = True,
    extra: Iterable[tuple[str, str]] = (),
) -> list[bytes]:
    """`response` as its head and the parts of its body, to be sent one after the other: a
    body of megabytes is not copied to be put behind its head."""
    lines = [
        f"HTTP/1.1 {status} {_REASONS.get(status, 'Error')}",
        f"Content-Type: {content_type}",
        f"Content-Length: {sum(len(part) for part in body)}",
        "Cache-Control: no-store",
        "X-Content-Type-Options: nosniff",
        "Connection: keep-alive" if keep_alive else "Connection: close",
        *(f"{name}: {value}" for name, value in extra),
    ]
    return [("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"), *body]
