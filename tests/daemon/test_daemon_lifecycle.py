"""The daemon as a process: one per user, private files, recovery after a crash, state that
survives a restart, clean shutdown on SIGTERM."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from conftest import World

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to own files as another uid")


def mode(path: os.PathLike[str] | str) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def serve_refused(world: World) -> subprocess.CompletedProcess[str]:
    """Run a second `ctxd serve` that is expected to give up quickly."""
    return world.cli("serve", timeout=10)


def one_line(text: str) -> str:
    lines = text.strip().splitlines()
    assert len(lines) == 1, text
    return lines[0]


def test_second_daemon_is_refused(ctxd: World) -> None:
    first = ctxd.ping()
    assert first is not None
    before = os.lstat(ctxd.socket)

    second = serve_refused(ctxd)

    assert second.returncode != 0
    line = one_line(second.stderr)
    assert "already running" in line and str(first["pid"]) in line
    after = os.lstat(ctxd.socket)
    assert (after.st_ino, after.st_dev) == (before.st_ino, before.st_dev)  # not replaced
    again = ctxd.ping()
    assert again is not None and again["pid"] == first["pid"]


def test_stale_socket_of_a_killed_daemon_is_recovered(ctxd: World) -> None:
    t = ctxd.claude()
    t.assistant(650_000)
    assert ctxd.hook_out("claude", t.payload("PostToolUse")) is not None
    ctxd.kill()
    assert stat.S_ISSOCK(os.lstat(ctxd.socket).st_mode)  # left behind by the crash
    assert ctxd.ping() is None

    ctxd.start()

    info = ctxd.ping()
    assert info is not None and ctxd.proc is not None and info["pid"] == ctxd.proc.pid
    t.assistant(100_000)
    assert ctxd.hook("claude", t.payload("PostToolUse")).returncode == 0
    row = ctxd.row(t)
    assert row is not None and row["tokens"] == 100_000


def test_sigterm_stops_cleanly_and_removes_the_socket(ctxd: World) -> None:
    assert ctxd.stop() == 0
    assert not os.path.lexists(ctxd.socket)


def test_file_modes(ctxd: World) -> None:
    t = ctxd.claude()
    t.assistant(100_000)
    ctxd.hook_out("claude", t.payload("PostToolUse"))
    assert mode(ctxd.runtime_dir) == 0o700
    assert mode(ctxd.socket) == 0o600
    assert ctxd.stop() == 0
    assert ctxd.state_file.exists(), "state is saved on shutdown"
    assert mode(ctxd.state_file) == 0o600
    assert mode(ctxd.state_file.parent) == 0o700


def test_socket_is_0600_even_with_a_permissive_umask(world: World) -> None:
    old = os.umask(0)
    try:
        world.start()
    finally:
        os.umask(old)
    assert mode(world.socket) == 0o600
    assert mode(world.runtime_dir) == 0o700


def test_runtime_dir_open_to_others_is_refused(world: World) -> None:
    world.runtime_dir.mkdir(mode=0o755)
    world.runtime_dir.chmod(0o755)
    result = world.cli("serve")
    assert result.returncode != 0
    line = one_line(result.stderr)
    assert str(world.runtime_dir) in line and "755" in line
    assert not os.path.lexists(world.socket)
    assert mode(world.runtime_dir) == 0o755  # refused, not silently "fixed"


@needs_root
def test_runtime_dir_owned_by_another_uid_is_refused(world: World) -> None:
    world.runtime_dir.mkdir(mode=0o700)
    os.chown(world.runtime_dir, 65534, 65534)
    result = world.cli("serve")
    assert result.returncode != 0
    line = one_line(result.stderr)
    assert str(world.runtime_dir) in line and "65534" in line
    assert not os.path.lexists(world.socket)


def test_restart_continues_the_debounce(ctxd: World) -> None:
    t = ctxd.claude()

    def call() -> object:
        t.assistant(650_000)
        return ctxd.hook_out("claude", t.payload("PostToolUse"))

    assert call() is not None  # first warning
    assert call() is None  # call 1 of the debounce
    assert ctxd.stop() == 0
    ctxd.start()
    # No repeated "first" warning after the restart: calls 2, 3, 4 stay quiet, 5 repeats.
    assert [call() is not None for _ in range(4)] == [False, False, False, True]


def test_restart_does_not_ask_for_a_handoff_again(ctxd: World) -> None:
    t = ctxd.claude()
    t.assistant(700_000)
    assert ctxd.hook_out("claude", t.payload("Stop")) is not None
    assert ctxd.stop() == 0
    ctxd.start()
    assert ctxd.hook_out("claude", t.payload("Stop")) is None
    row = ctxd.row(t)
    assert row is not None and row["handoff_asked"] is True and row["tokens"] == 700_000


def test_restart_keeps_following_the_transcript(ctxd: World) -> None:
    t = ctxd.claude()
    t.assistant(100_000)
    ctxd.hook_out("claude", t.payload("PostToolUse"))
    assert ctxd.stop() == 0
    t.assistant(200_000)  # appended while no daemon ran
    ctxd.start()
    ctxd.hook_out("claude", t.payload("PostToolUse"))
    row = ctxd.wait_row(t, lambda r: r["tokens"] == 200_000)
    assert row["turns"] == 2


def test_unreadable_snapshot_does_not_prevent_start(world: World) -> None:
    world.state_file.parent.mkdir(mode=0o700, parents=True)
    world.state_file.write_bytes(b"{not json")
    world.start()
    assert world.status()["sessions"] == []


def test_fallback_runtime_dir_without_xdg_runtime_dir(world: World) -> None:
    # macOS, cron, ssh without a logind session: no XDG_RUNTIME_DIR.
    del world.env["XDG_RUNTIME_DIR"]
    world.start()
    run = world.state_home / "ctxd" / "run"
    assert stat.S_ISSOCK(os.lstat(run / "ctxd.sock").st_mode)
    assert mode(run) == 0o700 and mode(run / "ctxd.sock") == 0o600
    t = world.claude()
    t.assistant(650_000)
    assert world.hook_out("claude", t.payload("PostToolUse")) is not None
    assert world.cli("status", "--json").returncode == 0


def test_spawned_daemon_keeps_its_log_and_state_private(world: World) -> None:
    # Without XDG_RUNTIME_DIR the socket dir lives inside the state dir, and a hook creates
    # both before the daemon runs. The log names the user's projects and sessions.
    del world.env["XDG_RUNTIME_DIR"]
    del world.env["CTXD_NO_SPAWN"]
    t = world.claude()
    t.assistant(100_000)
    assert world.hook("claude", t.payload("PostToolUse")).returncode == 0
    world.wait_for(world.ping, 10, "the spawned daemon")
    world.hook_out("claude", t.payload("PostToolUse"))
    state_dir = world.state_home / "ctxd"
    log = state_dir / "ctxd.log"
    assert log.exists()
    assert mode(log) & 0o077 == 0, f"log mode {mode(log):o}"
    assert mode(state_dir) == 0o700, f"state dir mode {mode(state_dir):o}"


def test_sigint_stops_cleanly(ctxd: World) -> None:
    assert ctxd.proc is not None
    ctxd.proc.send_signal(signal.SIGINT)
    assert ctxd.proc.wait(5) == 0
    assert not os.path.lexists(ctxd.socket)
    assert ctxd.state_file.exists()
