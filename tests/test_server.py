"""The socket server in process, on both of anyio's backends: framing, errors as answers,
one bad client not hurting the next. (The daemon runs it on asyncio; nothing in it may depend
on that.)"""

from __future__ import annotations

import socket
from pathlib import Path

import anyio
import orjson
import pytest

from ctxd import protocol
from ctxd.daemon import open_listener
from ctxd.errors import InvalidInput
from ctxd.protocol import Request
from ctxd.server import Server

pytestmark = pytest.mark.anyio


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


async def _ask(path: Path, frame: bytes) -> bytes:
    """One client exchange over a real Unix socket; the raw answer body (b"" if closed)."""
    stream = await anyio.connect_unix(path)
    async with stream:
        await stream.send(frame)
        data = b""
        try:
            while True:
                data += await stream.receive()
        except anyio.EndOfStream:
            pass
    return data[protocol.HEADER_SIZE :]


async def test_requests_are_answered_and_errors_are_answers(tmp_path: Path) -> None:
    async def echo(request: Request) -> bytes:
        if request.payload == b"bad":
            raise InvalidInput("that payload is not usable")
        return protocol.encode_ok(request.payload[::-1])

    path = tmp_path / "s.sock"
    listener: socket.socket = open_listener(path)
    server = Server({"hook": echo, "status": echo, "stop": echo, "ping": echo})
    stopping = anyio.Event()
    async with anyio.create_task_group() as tg:
        tg.start_soon(server.serve, listener, stopping)
        ok = await _ask(path, protocol.encode_request("hook", b"abc", agent="claude"))
        assert protocol.decode_response(ok) == b"cba"
        refused = await _ask(path, protocol.encode_request("hook", b"bad", agent="claude"))
        assert orjson.loads(refused.partition(b"\n")[0])["error"] == "that payload is not usable"
        garbage = await _ask(path, b"\x00\x00\x00\x05hello")
        assert orjson.loads(garbage.partition(b"\n")[0])["ok"] is False
        oversize = await _ask(path, b"\xff\xff\xff\xff")
        assert b"over the limit" in oversize
        again = await _ask(path, protocol.encode_request("ping", b"xyz"))
        assert protocol.decode_response(again) == b"zyx"  # the server still serves
        stopping.set()
    assert (server.requests, server.refused) == (3, 2)
