"""The accept loop both servers share, in process on asyncio and trio: accept() failing for
lack of descriptors or memory is logged, makes room and is retried, never fatal (as trio's
`serve_listeners`); a listener that is gone ends the loop."""

from __future__ import annotations

import errno
import logging
import os
import socket
from pathlib import Path

import anyio
import anyio.lowlevel
import anyio.to_thread
import pytest
from anyio.abc import TaskGroup

from ctxd.daemon.accept import Acceptor
from ctxd.daemon.http import HttpServer
from ctxd.protocol import Request

pytestmark = pytest.mark.anyio


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


class FlakyListener(socket.socket):
    """A loopback listener whose first accept() calls fail with `failures`, in order."""

    def __init__(self, *failures: int) -> None:
        super().__init__(socket.AF_INET, socket.SOCK_STREAM)
        self.failures = list(failures)
        self.bind(("127.0.0.1", 0))
        self.listen(8)
        self.port: int = self.getsockname()[1]

    def accept(self) -> tuple[socket.socket, object]:
        if self.failures:
            code = self.failures.pop(0)
            raise OSError(code, os.strerror(code))
        return super().accept()


class Recorder:
    """A server that closes what it is given and counts the room it was asked to make."""

    def __init__(self) -> None:
        self.in_flight = 0
        self.made_room = 0
        self.served = anyio.Event()

    batch = 32

    def accepted(self, sock: socket.socket, connections: TaskGroup) -> None:
        sock.close()
        self.served.set()

    async def settle(self, connections: TaskGroup) -> None:
        await anyio.lowlevel.checkpoint()

    def make_room(self) -> bool:
        self.made_room += 1
        return False


def connect(port: int) -> None:
    socket.create_connection(("127.0.0.1", port), timeout=5).close()


async def test_overload_is_logged_and_retried(caplog: pytest.LogCaptureFixture) -> None:
    server = Recorder()
    acceptor = Acceptor(server, "test")
    failures = (errno.EMFILE, errno.EMFILE, errno.ENOBUFS, errno.ECONNABORTED)
    listener = FlakyListener(*failures)
    stopping = anyio.Event()
    with caplog.at_level(logging.ERROR, logger="ctxd.daemon.accept"):
        with anyio.fail_after(5):
            async with anyio.create_task_group() as tg:
                tg.start_soon(acceptor.serve, listener, stopping)
                await anyio.to_thread.run_sync(connect, listener.port)
                await server.served.wait()
                stopping.set()
    assert acceptor.errors == len(failures)
    assert server.made_room == 3  # EMFILE twice, ENOBUFS: a descriptor freed for the next try
    logged = [r.getMessage() for r in caplog.records]
    assert len(logged) == 3  # one line per errno, not one per failure
    assert all(line.startswith("test: accept() failed") for line in logged)
    assert listener.fileno() == -1  # closed on return


async def test_a_listener_that_is_gone_ends_the_loop() -> None:
    acceptor = Acceptor(Recorder(), "test")
    with anyio.fail_after(5):
        with pytest.raises(ExceptionGroup) as raised:
            await acceptor.serve(FlakyListener(errno.EBADF), anyio.Event())
    assert raised.group_contains(OSError)
    assert acceptor.errors == 0


async def test_the_http_server_serves_on_after_running_out_of_descriptors(tmp_path: Path) -> None:
    def status(request: Request) -> bytes:
        return b'{"sessions":[],"daemon":{}}'

    listener = FlakyListener(errno.EMFILE, errno.ENFILE)
    http = HttpServer(status, status, port=listener.port, token="secret")
    request = (
        f"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1:{listener.port}\r\n"
        "X-Ctxd-Token: secret\r\nConnection: close\r\n\r\n"
    ).encode()

    def get() -> bytes:
        with socket.create_connection(("127.0.0.1", listener.port), timeout=5) as sock:
            sock.sendall(request)
            data = b""
            while chunk := sock.recv(65536):
                data += chunk
        return data

    stopping = anyio.Event()
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(http.serve, listener, stopping)
            answer = await anyio.to_thread.run_sync(get)
            stopping.set()
    assert answer.startswith(b"HTTP/1.1 200 ")
    assert http.accept_errors == 2
