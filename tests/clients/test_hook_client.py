"""The thin hook client as agents run it (`python -S -I ctxd_hook.py AGENT`, or the native
client compiled from ctxd_hook.c: every test that runs a client runs both): fail-open without a
daemon, a single background spawn, bounded waits, cheap imports, and a wire format in step with
ctxd.protocol."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import ctxd_hook
import ctxd_wire
import pytest

from ctxd import paths, protocol
from ctxd.agents import AGENTS
from ctxd.agents.hooks import MAX_PAYLOAD_BYTES

if TYPE_CHECKING:
    from conftest import World

#: A hook must never make the agent wait: without a daemon it is done well within this.
NO_DAEMON_BOUND = 1.0
SPAWN_TIMEOUT = 10.0
#: A payload whose pipe stays open is given up on within this (the client waits 5 s for it).
STDIN_BOUND = 6.0


@pytest.fixture(params=["python", "native"])
def world(world: World, request: pytest.FixtureRequest) -> World:
    """The world of conftest, its hooks run by the Python client or by the native one."""
    if request.param == "native":
        world.hook_argv = [str(request.getfixturevalue("native_hook_client"))]
    return world


def warning_payload(world: World) -> dict[str, Any]:
    t = world.claude()
    t.assistant(650_000)  # WARNING on the default basis
    return t.payload("PostToolUse")


def timed_hook(world: World, payload: dict[str, Any] | bytes) -> tuple[float, Any]:
    started = time.monotonic()
    result = world.hook("claude", payload)
    return time.monotonic() - started, result


# ---------------------------------------------------------------------- no daemon


def test_no_daemon_no_spawn_is_silent_fast_and_starts_nothing(world: World) -> None:
    elapsed, result = timed_hook(world, warning_payload(world))
    assert (result.returncode, result.stdout, result.stderr) == (0, b"", b"")
    assert elapsed < NO_DAEMON_BOUND
    time.sleep(0.5)
    assert world.daemon_pids() == set()
    assert not world.runtime_dir.exists()


def test_stale_socket_without_daemon_fails_open(world: World) -> None:
    world.start()
    world.kill()  # leaves the socket file behind, nobody listening
    elapsed, result = timed_hook(world, warning_payload(world))
    assert (result.returncode, result.stdout, result.stderr) == (0, b"", b"")
    assert elapsed < NO_DAEMON_BOUND


def test_hung_daemon_costs_at_most_the_client_timeout(world: World) -> None:
    # Something listens but never answers (a wedged daemon): the hook gives up on its bound.
    world.runtime_dir.mkdir(mode=0o700)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as hung:
        hung.bind(str(world.socket))
        hung.listen(8)
        world.env["CTXD_HOOK_TIMEOUT"] = "0.5"
        elapsed, result = timed_hook(world, warning_payload(world))
    assert (result.returncode, result.stdout, result.stderr) == (0, b"", b"")
    assert elapsed < 0.5 + NO_DAEMON_BOUND


def test_hung_daemon_default_timeout_is_bounded(world: World) -> None:
    world.runtime_dir.mkdir(mode=0o700)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as hung:
        hung.bind(str(world.socket))
        hung.listen(8)
        elapsed, result = timed_hook(world, warning_payload(world))
    assert (result.returncode, result.stdout) == (0, b"")
    assert elapsed < 3.0


def test_a_payload_whose_pipe_never_closes_costs_at_most_the_stdin_bound(world: World) -> None:
    """An agent that writes its payload and keeps the pipe open: the client waited for the end
    of stdin until the agent's own hook timeout (a minute), on every call."""
    with subprocess.Popen(
        [*world.hook_argv, "claude"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**world.env, "CTXD_NO_SPAWN": "1"},
        cwd=world.work,
    ) as hook:
        assert hook.stdin is not None
        hook.stdin.write(json.dumps(warning_payload(world)).encode())
        hook.stdin.flush()  # and never closed
        started = time.monotonic()
        try:
            code = hook.wait(STDIN_BOUND)
        finally:
            hook.kill()
        assert code == 0 and time.monotonic() - started < STDIN_BOUND
        assert hook.stderr is not None and hook.stderr.read() == b""


def test_no_daemon_spawns_one_in_the_background(world: World) -> None:
    del world.env["CTXD_NO_SPAWN"]
    payload = warning_payload(world)
    elapsed, result = timed_hook(world, payload)
    assert (result.returncode, result.stderr) == (0, b"")
    # The hook that started the daemon waited for it (SPAWN_WAIT at most) and got its answer:
    # its event is not lost.
    out = json.loads(result.stdout)
    assert out["hookSpecificOutput"]["additionalContext"].startswith("CONTEXT WARNING:")
    assert elapsed < NO_DAEMON_BOUND + 2.0

    info = world.wait_for(world.ping, SPAWN_TIMEOUT, "the spawned daemon")
    assert world.daemon_pids() == {info["pid"]}
    # Detached: its own session, not a child of the hook that started it.
    assert os.getsid(info["pid"]) == info["pid"]
    # The next hook finds it and is answered (nothing to say: the warning was just given).
    assert world.hook_out("claude", payload) is None
    # Spawned with stdio on /dev/null, it logs to its state dir.
    assert (world.state_home / "ctxd" / "ctxd.log").exists()


def test_concurrent_hooks_spawn_one_daemon(world: World) -> None:
    del world.env["CTXD_NO_SPAWN"]
    payload = json.dumps(warning_payload(world)).encode()
    hooks = [
        subprocess.Popen(
            [*world.hook_argv, "claude"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=world.env,
        )
        for _ in range(8)
    ]
    for proc in hooks:
        assert proc.stdin is not None
        proc.stdin.write(payload)
        proc.stdin.close()
    # Every ctxd serve process that ever shows up in this world, while they race.
    seen: set[int] = set()
    deadline = time.monotonic() + 3.0
    while time.monotonic() < deadline:
        seen |= world.daemon_pids()
        time.sleep(0.01)
    results = [(proc.wait(10), proc.stdout.read(), proc.stderr.read()) for proc in hooks]  # type: ignore[union-attr]
    for proc in hooks:
        proc.stdout.close()  # type: ignore[union-attr]
        proc.stderr.close()  # type: ignore[union-attr]
    # The hook that started the daemon is answered with the warning; the others found no daemon
    # (or one that had already warned) and print nothing.
    assert all(code == 0 and err == b"" for code, _, err in results), results
    printed = [out for _, out, _ in results if out]
    assert len(printed) == 1 and b"CONTEXT WARNING" in printed[0], results
    info = world.wait_for(world.ping, SPAWN_TIMEOUT, "the spawned daemon")
    seen |= world.daemon_pids()
    assert seen == {info["pid"]}


# ---------------------------------------------------------------------- bad input


def test_bad_input_is_silent(ctxd: World) -> None:
    for payload in (b"", b"not json", b"[1, 2]", b'{"hook_event_name": "PostToolUse"}'):
        result = ctxd.hook("claude", payload)
        assert (result.returncode, result.stdout, result.stderr) == (0, b"", b""), payload
    assert ctxd.ping() is not None


def test_unknown_agent_prints_nothing_and_a_missing_one_prints_usage(ctxd: World) -> None:
    # The client takes any plain word (a new agent needs no new client); the daemon refuses it.
    result = ctxd.hook("cursor", b'{"session_id":"s","hook_event_name":"Stop"}')
    assert (result.returncode, result.stdout, result.stderr) == (0, b"", b"")
    result = ctxd.hook("", b"{}")
    assert result.returncode == 0 and result.stdout == b""
    assert b"usage" in result.stderr
    assert ctxd.ping() is not None


def test_the_usage_names_every_agent_of_the_registry() -> None:
    # The client cannot ask the registry, so its texts name the agents by hand.
    listed = ctxd_hook.USAGE.rpartition("AGENT: ")[2].rstrip(")\n").split(", ")
    assert listed == list(AGENTS)
    assert f"AGENT: {' | '.join(AGENTS)};" in (ctxd_hook.__doc__ or "")


def test_oversize_payload_is_dropped(ctxd: World) -> None:
    payload = (
        b'{"session_id":"x","hook_event_name":"PostToolUse","pad":"'
        + b"a" * (ctxd_wire.MAX_PAYLOAD + 10)
        + b'"}'
    )
    result = ctxd.hook("claude", payload)
    assert (result.returncode, result.stdout) == (0, b"")
    assert ctxd.ping() is not None


def test_event_argument_names_the_event_when_the_payload_does_not(ctxd: World) -> None:
    payload = warning_payload(ctxd)
    del payload["hook_event_name"]
    result = ctxd.hook("claude", json.dumps(payload).encode(), "PostToolUse")
    assert result.returncode == 0
    out = json.loads(result.stdout)
    assert out["hookSpecificOutput"]["hookEventName"] == "PostToolUse"


def test_statusline_prints_one_line_and_teaches_the_window(ctxd: World) -> None:
    t = ctxd.claude()
    t.assistant(925_000)
    lines = (ctxd.repo / "tests/data/payloads/statusline/claude-2.1.332.jsonl").read_text()
    payload = json.loads(lines.splitlines()[2])  # a render after a reply: figures present
    payload.update(session_id=t.session_id, transcript_path=str(t.path), cwd=str(ctxd.work))
    result = ctxd.hook("claude", json.dumps(payload).encode(), "statusline")
    assert result.returncode == 0
    text = result.stdout.decode()
    assert text.count("\n") <= 1 and text.strip()
    row = ctxd.row(t)
    assert row is not None
    assert row["window"] == 1_000_000 and row["window_source"] == "statusline"


# ---------------------------------------------------------------------- cheap and in step


def imported_modules(stderr: bytes) -> set[str]:
    names = set()
    for line in stderr.decode().splitlines():
        if line.startswith("import time:") and "|" in line:
            names.add(line.rsplit("|", 1)[1].strip())
    return names


@pytest.mark.parametrize("daemon", [True, False], ids=["answered", "no-daemon-spawn"])
def test_hook_client_imports_neither_anyio_nor_orjson(world: World, daemon: bool) -> None:
    if world.hook_argv[0] != sys.executable:
        pytest.skip("the native client imports nothing")
    if daemon:
        world.start()
    else:
        del world.env["CTXD_NO_SPAWN"]  # the spawn path imports a little more; still no ctxd
    payload = json.dumps(warning_payload(world)).encode()
    result = subprocess.run(
        [sys.executable, "-X", "importtime", "-S", "-I", str(world.hook_client), "claude"],
        input=payload,
        env=world.env,
        capture_output=True,
        timeout=10,
        check=False,
    )
    assert result.returncode == 0
    if daemon:
        assert result.stdout.startswith(b'{"hookSpecificOutput"')
    modules = imported_modules(result.stderr)
    assert "_socket" in modules or "_socket" in sys.builtin_module_names
    roots = {name.split(".")[0] for name in modules}
    assert not roots & {"anyio", "orjson", "ctxd", "json", "socket", "subprocess", "typing"}


def test_the_wire_limits_fit_together() -> None:
    assert ctxd_wire.MAX_PAYLOAD == MAX_PAYLOAD_BYTES
    # The largest payload the client sends fits in the largest request the daemon reads.
    biggest = ctxd_wire.hook_request("claude", "UserPromptSubmit", b"x" * ctxd_wire.MAX_PAYLOAD)
    assert len(biggest) - ctxd_wire.HEADER_SIZE <= ctxd_wire.MAX_REQUEST
    # The client recognises success by the daemon's exact ok header.
    ok = protocol.encode_ok(b"out")
    assert ctxd_wire.ok_result(ok[ctxd_wire.HEADER_SIZE :]) == b"out"
    assert ctxd_wire.ok_result(protocol.encode_error("no")[ctxd_wire.HEADER_SIZE :]) is None


def test_hook_request_decodes_as_the_daemon_reads_it() -> None:
    payload = b'{"session_id":"s","hook_event_name":"Stop"}'
    frame = ctxd_wire.hook_request("codex", "Stop", payload)
    size = ctxd_wire.frame_size(frame[: ctxd_wire.HEADER_SIZE], ctxd_wire.MAX_REQUEST)
    assert size == len(frame) - ctxd_wire.HEADER_SIZE
    request = protocol.decode_request(frame[ctxd_wire.HEADER_SIZE :])
    assert (request.op, request.header["agent"], request.header["event"]) == (
        "hook",
        "codex",
        "Stop",
    )
    assert request.payload == payload
    no_event = protocol.decode_request(ctxd_wire.hook_request("gemini", None, b"{}")[4:])
    assert no_event.header["event"] is None


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"XDG_RUNTIME_DIR": "/run/user/1000", "HOME": "/h"}, "/run/user/1000/ctxd/ctxd.sock"),
        ({"HOME": "/h"}, "/h/.local/state/ctxd/run/ctxd.sock"),
        ({"HOME": "/h", "XDG_STATE_HOME": "/s"}, "/s/ctxd/run/ctxd.sock"),
        ({"CTXD_SOCKET": "/tmp/x/c.sock", "XDG_RUNTIME_DIR": "/run/user/1"}, "/tmp/x/c.sock"),
    ],
)
def test_client_and_daemon_agree_on_the_socket(env: dict[str, str], expected: str) -> None:
    assert ctxd_wire.socket_path(env) == expected
    assert paths.socket_path(env) == Path(expected)
    assert paths.runtime_dir(env) == Path(expected).parent


@pytest.mark.parametrize("shadow", ["ctxd", "anyio"])
def test_spawned_daemon_does_not_import_from_the_agents_cwd(world: World, shadow: str) -> None:
    # Hooks run in the project the agent works on, which may be anyone's repository. The daemon
    # a hook starts must run the installed ctxd, never modules lying in that directory.
    del world.env["CTXD_NO_SPAWN"]
    marker = world.root / "ran-project-code"
    planted = f"open({str(marker)!r}, 'w').close()\n"
    if shadow == "ctxd":
        (world.work / "ctxd").mkdir()
        (world.work / "ctxd" / "__init__.py").write_text(planted)
        (world.work / "ctxd" / "__main__.py").write_text(planted)
    else:
        (world.work / "anyio.py").write_text(planted)

    result = world.hook("claude", warning_payload(world))  # cwd: the project (world.work)

    assert result.returncode == 0 and b"CONTEXT WARNING" in result.stdout, result
    world.wait_for(lambda: marker.exists() or world.ping(), SPAWN_TIMEOUT, "a daemon")
    assert not marker.exists(), "the spawned daemon ran code from the agent's cwd"
    assert world.ping() is not None
