"""The HTTP listener where the kernel cannot name a peer's owner: a per-user secret (a 0600
file) must come with every request, as a header or as the cookie `/?token=` sets. In process,
on asyncio and trio, with stand-in handlers."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import anyio.to_thread
import pytest
from loopback import free_port

from ctxd.daemon.http import HttpServer
from ctxd.daemon.listeners import open_http_listener
from ctxd.daemon.peer import load_or_create_token
from ctxd.protocol import Request

pytestmark = pytest.mark.anyio


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def hook(request: Request) -> bytes:
    return b'{"agent":"%s"}' % request.header["agent"].encode()


def status(request: Request) -> bytes:
    return b'{"sessions":[],"daemon":{"refused":0}}'


def exchange(port: int, head: str, body: bytes = b"") -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(head.replace("\n", "\r\n").encode() + b"\r\n" + body)
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    return data


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[tuple[int, str]]:
    token = load_or_create_token(tmp_path / "state" / "http-token")
    port = free_port()
    http = HttpServer(hook, status, port=port, token=token)
    stopping = anyio.Event()
    async with anyio.create_task_group() as tg:
        tg.start_soon(http.serve, open_http_listener(port), stopping)
        yield port, token
        stopping.set()


def test_the_token_file_is_private_and_kept(tmp_path: Path) -> None:
    path = tmp_path / "state" / "http-token"
    token = load_or_create_token(path)
    assert len(token) >= 32 and path.stat().st_mode & 0o777 == 0o600
    assert load_or_create_token(path) == token
    path.chmod(0o644)  # readable by others: no longer a secret, a new one replaces it
    assert load_or_create_token(path) != token
    assert path.stat().st_mode & 0o777 == 0o600


async def test_requests_need_the_token(server: tuple[int, str]) -> None:
    port, token = server
    host = f"Host: 127.0.0.1:{port}"

    def get(path: str, *headers: str) -> bytes:
        return exchange(
            port, "\n".join([f"GET {path} HTTP/1.1", host, *headers, "Connection: close", "", ""])
        )

    assert (await anyio.to_thread.run_sync(get, "/metrics")).startswith(b"HTTP/1.1 403 ")
    wrong = await anyio.to_thread.run_sync(get, "/metrics", "X-Ctxd-Token: nope")
    assert wrong.startswith(b"HTTP/1.1 403 ")
    right = await anyio.to_thread.run_sync(get, "/metrics", f"X-Ctxd-Token: {token}")
    assert right.startswith(b"HTTP/1.1 200 ") and b"ctxd_sessions 0" in right
    # `ctxd dashboard` opens /?token=...: the token moves into a cookie for this host only
    opened = await anyio.to_thread.run_sync(get, f"/?token={token}")
    assert opened.startswith(b"HTTP/1.1 303 ")
    assert f"Set-Cookie: ctxd_token={token}; HttpOnly; SameSite=Strict".encode() in opened
    page = await anyio.to_thread.run_sync(get, "/", f"Cookie: a=b; ctxd_token={token}")
    assert page.startswith(b"HTTP/1.1 200 ") and b"<title>ctxd" in page
    body = b'{"session_id":"s","hook_event_name":"Stop"}'
    posted = await anyio.to_thread.run_sync(
        exchange,
        port,
        "\n".join(
            [
                "POST /ctxd/hook/claude HTTP/1.1",
                host,
                "Content-Type: application/json",
                f"X-Ctxd-Token: {token}",
                f"Content-Length: {len(body)}",
                "Connection: close",
                "",
                "",
            ]
        ),
        body,
    )
    assert posted.startswith(b"HTTP/1.1 200 ") and posted.endswith(b'{"agent":"claude"}')
