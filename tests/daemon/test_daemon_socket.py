"""The socket boundary of a real daemon: other users are refused by their peer uid, and a bad
client (garbage, an oversize frame, a stalled frame) loses its own connection only."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from conftest import World

NOBODY = 65534


def connect(world: World) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(10)
    sock.connect(str(world.socket))
    return sock


def read_to_eof(sock: socket.socket) -> bytes:
    """Everything the daemon sent before closing. A close with our request still unread shows
    as a reset after the data on Linux: that is a close too."""
    chunks = []
    try:
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    except ConnectionResetError:
        pass
    return b"".join(chunks)


def error_of(answer: bytes) -> str:
    """The error message of one framed error answer (and nothing after it)."""
    from ctxd import protocol
    from ctxd.errors import ProtocolError

    size = int.from_bytes(answer[:4], "big")
    assert len(answer) == 4 + size, answer
    with pytest.raises(ProtocolError) as info:
        protocol.decode_response(answer[4:])
    return str(info.value)


def assert_still_serving(world: World, pid: int) -> None:
    info = world.ping()
    assert info is not None and info["pid"] == pid
    t = world.claude()
    t.assistant(650_000)
    out = world.hook_out("claude", t.payload("PostToolUse"))
    assert out is not None and out["hookSpecificOutput"]["hookEventName"] == "PostToolUse"


# ---------------------------------------------------------------------- peer uid


@pytest.fixture
def reachable(world: World) -> Iterator[World]:
    """A daemon whose socket another uid could open (dirs 0711, socket 0666), so that only the
    daemon's peer-uid check stands between that uid and the daemon."""
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root and setpriv to connect as a second real uid")
    # A short path outside pytest's private tmp tree, whose ancestors "nobody" can traverse.
    base = Path(tempfile.mkdtemp(prefix="ctxd-uid-", dir="/tmp"))
    try:
        world.env["CTXD_SOCKET"] = str(base / "ctxd.sock")
        world.start()
        # Opened up only after start: the daemon rightly refuses to start in a shared dir.
        base.chmod(0o711)
        world.socket.chmod(0o666)
        yield world
    finally:
        world.stop()
        shutil.rmtree(base, ignore_errors=True)


def as_nobody(
    *argv: str, stdin: bytes = b"", env: dict[str, str]
) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", *argv],
        input=stdin,
        env=env,
        capture_output=True,
        timeout=10,
        check=False,
        cwd="/",
    )


RAW_CLIENT = """
import os, socket, sys
body = b'{"v":1,"op":"status"}\\n'
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.settimeout(5)
s.connect(os.environ["CTXD_SOCKET"])
try:
    s.sendall(len(body).to_bytes(4, "big") + body)
except BrokenPipeError:
    pass  # refused before reading: the answer is already on its way
data = b""
try:
    while chunk := s.recv(65536):
        data += chunk
except ConnectionResetError:
    pass  # the daemon closed with our request unread, after its answer
sys.stdout.buffer.write(data)
"""


def test_second_uid_is_refused_by_peer_credentials(reachable: World) -> None:
    info = reachable.ping()
    assert info is not None
    env = {"CTXD_SOCKET": str(reachable.socket), "PATH": "/usr/bin:/bin", "CTXD_NO_SPAWN": "1"}

    raw = as_nobody(sys.executable, "-S", "-I", "-c", RAW_CLIENT, env=env)

    assert raw.returncode == 0, raw.stderr  # it connected: file permissions did not stop it
    assert f"uid {NOBODY}" in error_of(raw.stdout)
    assert b"sessions" not in raw.stdout
    assert_still_serving(reachable, info["pid"])
    assert reachable.status()["daemon"]["refused"] >= 1


def test_second_uid_hook_gets_nothing(reachable: World) -> None:
    t = reachable.claude()
    t.assistant(650_000)
    env = {"CTXD_SOCKET": str(reachable.socket), "PATH": "/usr/bin:/bin", "CTXD_NO_SPAWN": "1"}
    answered = reachable.status()["hooks_answered"]
    payload = json.dumps(t.payload("PostToolUse")).encode()

    result = as_nobody(
        sys.executable, "-S", "-I", str(reachable.hook_client), "claude", stdin=payload, env=env
    )

    assert (result.returncode, result.stdout, result.stderr) == (0, b"", b"")
    assert reachable.status()["hooks_answered"] == answered  # never reached a handler
    # The owner gets the first warning: the refused request used nothing up.
    out = reachable.hook_out("claude", t.payload("PostToolUse"))
    assert out is not None


# ---------------------------------------------------------------------- bad clients


def test_random_bytes_close_only_that_connection(ctxd: World) -> None:
    info = ctxd.ping()
    assert info is not None
    sock = connect(ctxd)
    # A small length prefix, then bytes that are no request.
    sock.sendall((16).to_bytes(4, "big") + bytes(range(200, 216)))
    answer = read_to_eof(sock)  # the daemon answers with an error and closes
    sock.close()
    assert "not JSON" in error_of(answer)
    assert_still_serving(ctxd, info["pid"])


def test_binary_noise_without_framing(ctxd: World) -> None:
    info = ctxd.ping()
    assert info is not None
    with connect(ctxd) as sock:
        sock.sendall(os.urandom(4096))
        sock.shutdown(socket.SHUT_WR)
        read_to_eof(sock)  # whatever it says, it must close
    assert_still_serving(ctxd, info["pid"])


def test_oversize_length_prefix_is_refused_without_reading_it(ctxd: World) -> None:
    info = ctxd.ping()
    assert info is not None
    sock = connect(ctxd)
    sock.sendall(b"\xff\xff\xff\xff")
    started = time.monotonic()
    answer = read_to_eof(sock)
    sock.close()
    assert time.monotonic() - started < 2  # refused at once, not after waiting for 4 GiB
    assert "over the limit" in error_of(answer)
    assert_still_serving(ctxd, info["pid"])


def test_wrong_protocol_version_is_an_error_answer(ctxd: World) -> None:
    sock = connect(ctxd)
    body = b'{"v":99,"op":"status"}\n'
    sock.sendall(len(body).to_bytes(4, "big") + body)
    answer = read_to_eof(sock)
    sock.close()
    assert "version" in error_of(answer)


def test_stalled_client_does_not_block_others(ctxd: World) -> None:
    info = ctxd.ping()
    assert info is not None
    stalled = [connect(ctxd) for _ in range(3)]
    stalled[0].sendall(b"\x00\x00")  # half a length prefix
    stalled[1].sendall((100).to_bytes(4, "big") + b'{"v":1,')  # half a body
    # stalled[2] sends nothing at all
    try:
        started = time.monotonic()
        assert_still_serving(ctxd, info["pid"])
        assert time.monotonic() - started < 2
        # The stalled connections are closed by the daemon within its request deadline.
        for sock in stalled:
            sock.settimeout(8)
            read_to_eof(sock)
    finally:
        for sock in stalled:
            sock.close()
    assert_still_serving(ctxd, info["pid"])


def test_client_that_vanishes_mid_request(ctxd: World) -> None:
    info = ctxd.ping()
    assert info is not None
    for _ in range(20):
        sock = connect(ctxd)
        sock.sendall((1000).to_bytes(4, "big") + b'{"v":1,"op":"hook"')
        sock.close()
    assert_still_serving(ctxd, info["pid"])


def test_a_nul_in_a_requests_env_blinds_neither_status_nor_metrics(shared: World) -> None:
    # A real client cannot send it (no process environment holds a NUL), a crafted frame can.
    from ctxd.protocol import encode_request

    t = shared.claude()
    t.assistant(100_000)
    payload = json.dumps(t.payload("PostToolUse")).encode()
    env = {"CLAUDE_CONFIG_DIR": "/x\x00y", "CLAUDE_CODE_AUTO_COMPACT_WINDOW": "1" * 100_000}
    with connect(shared) as sock:
        sock.sendall(encode_request("hook", payload, agent="claude", env=env))
        assert json.loads(read_to_eof(sock)[4:].split(b"\n", 1)[0])["ok"] is True
    status = shared.cli("status")
    assert status.returncode == 0 and status.stderr == "", status
    row = shared.row(t)
    assert row is not None and row["tokens"] == 100_000
    metrics = shared.cli("metrics")
    assert metrics.returncode == 0 and "ctxd_context_tokens" in metrics.stdout, metrics
