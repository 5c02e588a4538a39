"""The user's own statusline run by ctxd's client (`ctxd-hook claude statusline --wrap CMD`):
the same stdin, stdout, stderr and exit code as the command run alone, the payload handed to
the daemon beside it, fail-open and bounded in time; for the Python client and the native one."""

from __future__ import annotations

import json
import socket
import statistics
import subprocess
import time
from typing import TYPE_CHECKING, Any

import ctxd_hook
import pytest

if TYPE_CHECKING:
    from conftest import World

#: Each command as Claude Code runs it (`bash -c`), then wrapped: the two must not differ.
COMMANDS = [
    "cat",  # the payload exactly as Claude Code sent it
    'printf "%s" "$(cat | wc -c) bytes"; echo " to stderr" >&2; exit 3',
    "yes | head -n 1",  # SIGPIPE is back to its default for the user's command: no error
    "true",  # reads nothing, prints nothing
    "exec 0<&-; echo closed-stdin",
    "kill -TERM $$",  # killed by a signal: 128 + 15, as bash reports a signalled child
]


@pytest.fixture(params=["python", "native"])
def world(world: World, request: pytest.FixtureRequest) -> World:
    """The world of conftest, its client the Python one or the native one."""
    if request.param == "native":
        world.hook_argv = [str(request.getfixturevalue("native_hook_client"))]
    return world


def payload(ctxd: World) -> tuple[dict[str, Any], Any]:
    t = ctxd.claude()
    t.assistant(300_000)
    lines = (ctxd.repo / "tests/data/payloads/statusline/claude-2.1.332.jsonl").read_text()
    data = json.loads(lines.splitlines()[2])
    data.update(session_id=t.session_id, transcript_path=str(t.path), cwd=str(ctxd.work))
    return data, t


def direct(world: World, command: str, data: bytes) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        ["bash", "-c", command], input=data, env=world.env, capture_output=True, check=False
    )


def code(result: subprocess.CompletedProcess[bytes]) -> int:
    return result.returncode if result.returncode >= 0 else 128 - result.returncode


@pytest.mark.parametrize("command", COMMANDS)
def test_the_users_line_is_unchanged_and_the_daemon_learns_the_window(
    ctxd: World, command: str
) -> None:
    data, t = payload(ctxd)
    raw = json.dumps(data).encode()
    alone = direct(ctxd, command, raw)
    wrapped = ctxd.hook("claude", raw, "statusline", ctxd_hook.WRAP_FLAG, command)
    assert (wrapped.stdout, wrapped.stderr) == (alone.stdout, alone.stderr)
    assert wrapped.returncode == code(alone)
    row = ctxd.row(t)
    assert row is not None and row["window_source"] == "statusline", row


def test_without_a_daemon_the_line_is_the_users_and_nothing_is_said(world: World) -> None:
    command = "cat; echo"
    result = world.hook("claude", b'{"x":1}', "statusline", ctxd_hook.WRAP_FLAG, command)
    assert (result.returncode, result.stdout, result.stderr) == (0, b'{"x":1}\n', b"")


def test_a_hung_daemon_holds_the_line_back_at_most_the_wrap_timeout(world: World) -> None:
    world.runtime_dir.mkdir(mode=0o700)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as hung:
        hung.bind(str(world.socket))
        hung.listen(8)
        started = time.monotonic()
        result = world.hook("claude", b"{}", "statusline", ctxd_hook.WRAP_FLAG, "echo mine")
        elapsed = time.monotonic() - started
    assert (result.returncode, result.stdout, result.stderr) == (0, b"mine\n", b"")
    assert elapsed < ctxd_hook.WRAP_TIMEOUT + 1.0


def test_a_command_that_cannot_run_fails_as_in_a_shell(world: World) -> None:
    result = world.hook("claude", b"{}", "statusline", ctxd_hook.WRAP_FLAG, "/no/such/cmd")
    alone = direct(world, "/no/such/cmd", b"{}")
    assert result.returncode == alone.returncode == 127
    assert result.stderr == alone.stderr


def test_no_slower_than_the_users_command_plus_the_bare_hook(ctxd: World) -> None:
    """The user's command runs while the payload goes to the daemon, so the wrapped line costs
    the command's time plus about one bare hook, not the sum of everything."""
    data, _ = payload(ctxd)
    raw = json.dumps(data).encode()
    command = "sleep 0.2; cat >/dev/null; echo mine"

    def timed(run: Any) -> float:
        times = []
        for _ in range(5):
            started = time.perf_counter()
            run()
            times.append(time.perf_counter() - started)
        return statistics.median(times)

    alone = timed(lambda: direct(ctxd, command, raw))
    bare = timed(lambda: ctxd.hook("claude", raw, "statusline"))
    wrapped = timed(lambda: ctxd.hook("claude", raw, "statusline", ctxd_hook.WRAP_FLAG, command))
    # 50 ms of slack for a loaded 2-core machine.
    assert wrapped <= alone + bare + 0.05, (alone, bare, wrapped)


def test_the_users_command_gets_the_environment_unchanged_under_a_c_locale(world: World) -> None:
    """Python coerces a C locale by setting LC_CTYPE at start-up; the user's command must not
    see it (Claude Code under `env -i` gives it no locale at all)."""
    env = {k: v for k, v in world.env.items() if not k.startswith(("LC_", "LANG"))}
    result = subprocess.run(
        [*world.hook_argv, "claude", "statusline", "--wrap", "env"],
        input=b"{}",
        env=env,
        capture_output=True,
        check=False,
    )
    alone = subprocess.run(["bash", "-c", "env"], env=env, capture_output=True, check=False)
    assert "LC_CTYPE" not in result.stdout.decode()
    assert sorted(result.stdout.decode().splitlines()) == sorted(alone.stdout.decode().splitlines())


def test_kimis_payload_reaches_the_daemon_as_kimis(ctxd: World) -> None:
    # Kimi Code's status line (`ctxd install kimi` wraps a command of the user's own): the
    # payload is Kimi's shape, read by Kimi's parser, and the daemon learns its window.
    raw = (
        b'{"model":"kimi-k2.6","cwd":"/w","gitBranch":null,"permissionMode":"manual",'
        b'"planMode":false,"contextUsage":0,"contextTokens":0,"maxContextTokens":200000,'
        b'"sessionId":"session_w1","version":"2.1.0"}'
    )
    result = ctxd.hook("kimi", raw, "statusline", ctxd_hook.WRAP_FLAG, "cat >/dev/null; echo k")
    assert (result.returncode, result.stdout) == (0, b"k\n")
    rows = [s for s in ctxd.status()["sessions"] if s["session_id"] == "session_w1"]
    assert [(r["agent"], r["window"], r["window_source"]) for r in rows] == [
        ("kimi", 200_000, "statusline")
    ]
