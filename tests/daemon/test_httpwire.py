"""The HTTP/1.1 the loopback listener speaks, as pure functions: heads found and parsed, bounds
as errors with their status, answers' bytes. (The listener itself: test_http.py.)"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxd.daemon.httpwire import (
    MAX_HEAD,
    MAX_HEADERS,
    HttpError,
    body_length,
    cookie,
    parse_head,
    request_line,
    response,
    split_head,
)

GET = b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1:1\r\nX-A:  b \r\n\r\n"
POST = b"POST /ctxd/hook/claude HTTP/1.1\r\nContent-Length: 2\r\n\r\n{}"


def status_of(call: Callable[..., object], *args: object) -> int:
    with pytest.raises(HttpError) as raised:
        call(*args)
    return raised.value.status


def test_a_head_is_split_off_what_follows_it() -> None:
    assert split_head(GET[:-1]) is None
    assert split_head(GET + POST) == (GET[:-4], POST)
    assert status_of(split_head, b"x" * (MAX_HEAD + 1)) == 431


@given(st.integers(min_value=0, max_value=2 * len(GET)))
def test_split_anywhere_the_same_heads_come_out(at: int) -> None:
    """Two pipelined requests arriving in two pieces, cut anywhere: the same two heads."""
    stream = GET + GET.replace(b"/metrics", b"/")
    buffer, heads = stream[:at], []
    for more in (stream[at:], b""):
        while (split := split_head(buffer)) is not None:
            head, buffer = split
            heads.append(head)
        buffer += more
    assert heads == [GET[:-4], GET[:-4].replace(b"/metrics", b"/")]
    assert buffer == b""


def test_a_head_is_parsed_with_lower_case_names_and_trimmed_values() -> None:
    request = parse_head(GET[:-4])
    assert (request.method, request.target, request.version) == ("GET", "/metrics", "HTTP/1.1")
    assert request.header(b"x-a") == "b" and request.header(b"host") == "127.0.0.1:1"
    assert request.keep_alive
    assert not parse_head(b"GET / HTTP/1.1\r\nConnection: close").keep_alive
    assert not parse_head(b"GET / HTTP/1.0").keep_alive
    assert parse_head(b"GET / HTTP/1.0\r\nConnection: Keep-Alive").keep_alive


@pytest.mark.parametrize(
    ("head", "status"),
    [
        (b"garbage", 400),
        (b"GET / HTTP/2", 400),
        (b"GET / HTTP/1.1\r\nno colon", 400),
        (b"GET / HTTP/1.1\r\n name: space before", 400),
        (b"GET / HTTP/1.1\r\nHost: a\r\nHost: b", 400),
        (b"GET / HTTP/1.1" + b"\r\nX: y" * (MAX_HEADERS + 1), 431),
    ],
)
def test_a_malformed_head_is_an_error_with_its_status(head: bytes, status: int) -> None:
    assert status_of(parse_head, head) == status


def test_the_body_length_is_a_bounded_content_length() -> None:
    assert body_length(parse_head(b"GET / HTTP/1.1"), 10) == 0
    assert body_length(parse_head(b"POST / HTTP/1.1\r\nContent-Length: 10"), 10) == 10
    assert status_of(body_length, parse_head(b"POST / HTTP/1.1\r\nContent-Length: 11"), 10) == 413
    assert status_of(body_length, parse_head(b"POST / HTTP/1.1\r\nContent-Length: -1"), 10) == 400
    chunked = parse_head(b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked")
    assert status_of(body_length, chunked, 10) == 411


def test_a_log_line_gets_what_there_is_of_a_request_line() -> None:
    assert request_line(GET) == ("GET", "/metrics")
    assert request_line(b"\xff") == ("\xff", "-")


def test_cookies_are_found_by_name() -> None:
    assert cookie("a=b; ctxd_token=t=1", "ctxd_token") == "t=1"
    assert cookie("a=b", "ctxd_token") is None


def test_an_answer_says_its_length_and_is_never_cached() -> None:
    answer = response(303, b"", "text/plain", keep_alive=False, extra=[("Location", "/")])
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.split(b"\r\n") == [
        b"HTTP/1.1 303 See Other",
        b"Content-Type: text/plain",
        b"Content-Length: 0",
        b"Cache-Control: no-store",
        b"X-Content-Type-Options: nosniff",
        b"Connection: close",
        b"Location: /",
    ]
    assert body == b""
    assert response(200, b"{}").endswith(b"Connection: keep-alive\r\n\r\n{}")
