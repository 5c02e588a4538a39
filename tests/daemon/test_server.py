"""The socket server in process, on both of anyio's backends: framing, errors as answers,
one bad client not hurting the next. (The daemon runs it on asyncio; nothing in it may depend
on that.)"""

from __future__ import annotations

import socket
from pathlib import Path

import anyio
import ctxd_wire
import orjson
import pytest

from ctxd import protocol
from ctxd.daemon import server as server_module
from ctxd.daemon.listeners import open_listener
from ctxd.daemon.server import Server
from ctxd.errors import InvalidInput
from ctxd.protocol import Answer, Request

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
    return data[ctxd_wire.HEADER_SIZE :]


async def test_requests_are_answered_and_errors_are_answers(tmp_path: Path) -> None:
    async def echo(request: Request) -> bytes:
        if request.payload == b"bad":
            raise InvalidInput("that payload is not usable")
        return request.payload[::-1]

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


def _sync_server() -> Server:
    """Handlers that answer at once (served in the accept loop) and one that must wait (`status`,
    served by a task), as the daemon's are."""

    def reverse(request: Request) -> Answer:
        return request.payload[::-1]

    def big(request: Request) -> Answer:
        return b"x" * int(request.payload)

    async def later(request: Request) -> bytes:
        await anyio.sleep(0.05)
        return b"later:" + request.payload

    return Server({"hook": reverse, "ping": big, "status": later, "stop": reverse})


async def test_answers_at_once_after_a_wait_and_larger_than_the_socket_buffer(
    tmp_path: Path,
) -> None:
    path = tmp_path / "s.sock"
    server = _sync_server()
    stopping = anyio.Event()
    async with anyio.create_task_group() as tg:
        tg.start_soon(server.serve, open_listener(path), stopping)
        now = await _ask(path, protocol.encode_request("hook", b"abc"))
        assert protocol.decode_response(now) == b"cba"
        waited = await _ask(path, protocol.encode_request("status", b"abc"))
        assert protocol.decode_response(waited) == b"later:abc"
        # 4 MiB: far more than a Unix socket takes in one send; the rest goes out from a task.
        large = await _ask(path, protocol.encode_request("ping", b"4194304"))
        assert protocol.decode_response(large) == b"x" * 4194304
        stopping.set()
    assert server.in_flight == 0


async def test_a_request_that_arrives_in_pieces_is_answered(tmp_path: Path) -> None:
    path = tmp_path / "s.sock"
    server = _sync_server()
    stopping = anyio.Event()
    frame = protocol.encode_request("hook", b"dribbled")
    async with anyio.create_task_group() as tg:
        tg.start_soon(server.serve, open_listener(path), stopping)
        stream = await anyio.connect_unix(path)
        async with stream:
            for piece in (frame[:2], frame[2:9], frame[9:]):
                await anyio.sleep(0.02)
                await stream.send(piece)
            answer = await stream.receive()
        assert protocol.decode_response(answer[ctxd_wire.HEADER_SIZE :]) == b"delbbird"
        stopping.set()


async def test_a_client_that_never_finishes_gets_the_deadline_and_others_are_served(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(server_module, "REQUEST_DEADLINE", 0.3)
    path = tmp_path / "s.sock"
    server = _sync_server()
    stopping = anyio.Event()
    async with anyio.create_task_group() as tg:
        tg.start_soon(server.serve, open_listener(path), stopping)
        stuck = await anyio.connect_unix(path)
        async with stuck:
            await stuck.send(protocol.encode_request("hook", b"abc")[:7])
            served = await _ask(path, protocol.encode_request("hook", b"meanwhile"))
            assert protocol.decode_response(served) == b"elihwnaem"
            with anyio.fail_after(3):
                answer = await stuck.receive()
        header = orjson.loads(answer[ctxd_wire.HEADER_SIZE :].partition(b"\n")[0])
        assert header == {"v": 1, "ok": False, "error": "request not complete within 0.3 s"}
        stopping.set()
    assert server.in_flight == 0


async def test_when_every_place_is_taken_the_longest_waiting_connection_makes_room(
    tmp_path: Path,
) -> None:
    """Connections that send nothing held every slot and hooks were told "busy".
    At the limit, the connection that has waited longest for its request is dropped."""
    path = tmp_path / "s.sock"
    server = _sync_server()
    server.max_connections = 4
    stopping = anyio.Event()
    async with anyio.create_task_group() as tg:
        tg.start_soon(server.serve, open_listener(path), stopping)
        idle = [await anyio.connect_unix(path) for _ in range(6)]
        await anyio.sleep(0.1)
        served = await _ask(path, protocol.encode_request("hook", b"hook"))
        assert protocol.decode_response(served) == b"kooh"
        assert server.evicted >= 2 and server.in_flight <= 4
        with anyio.fail_after(3):  # the first ones were dropped, with a word
            answer = await idle[0].receive()
        assert b"dropped for a newer connection" in answer
        for stream in idle:
            await stream.aclose()
        stopping.set()


async def test_large_requests_beyond_their_budget_are_told_busy_and_hooks_still_pass(
    tmp_path: Path,
) -> None:
    """64 connections each 1 byte short of 8 MiB were all buffered (RSS +500 MB).
    A frame's size is reserved before it is read; large ones share a budget of their own."""
    path = tmp_path / "s.sock"
    server = _sync_server()
    stopping = anyio.Event()
    big = ctxd_wire.MAX_REQUEST
    async with anyio.create_task_group() as tg:
        tg.start_soon(server.serve, open_listener(path), stopping)
        holders = []
        for _ in range(server_module.LARGE_BUDGET // big):  # fill the large budget
            stream = await anyio.connect_unix(path)
            await stream.send(big.to_bytes(4, "big") + b"x" * 1000)
            holders.append(stream)
        await anyio.sleep(0.1)
        assert server.buffered == len(holders) * big
        refused = await _ask(path, big.to_bytes(4, "big") + b"x" * 1000)
        assert orjson.loads(refused.partition(b"\n")[0])["error"].startswith("busy:")
        served = await _ask(path, protocol.encode_request("hook", b"small"))
        assert protocol.decode_response(served) == b"llams"
        for stream in holders:
            await stream.aclose()
        await anyio.sleep(0.1)
        assert server.buffered == 0
        stopping.set()
