"""`ctxd line` and `ctxd-line` against a real daemon, and in a real tmux's status bar set up by
the snippet users copy (contrib/tmux/ctxd.tmux)."""

from __future__ import annotations

import contextlib
import fcntl
import functools
import os
import pty
import secrets
import select
import shutil
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from conftest import World

SNIPPET = Path(__file__).resolve().parents[2] / "contrib" / "tmux" / "ctxd.tmux"
BIN = Path(sys.executable).parent


def two_projects(world: World) -> tuple[Path, Path]:
    """Two live Claude sessions: a big one in proj-a, a small one in proj-b."""
    a, b = world.work / "proj-a", world.work / "proj-b"
    for d in (a, b / "sub"):
        d.mkdir(parents=True)
    for cwd, tokens in ((a, 650_000), (b, 100_000)):
        sid = f"{cwd.name}-0000-4000-8000-000000000000"
        t = world.claude(sid, slug=f"-{cwd.name}")
        t.cwd = cwd  # the directory the session's hooks and lines name
        t.assistant(tokens)
        world.hook_out("claude", t.payload("PostToolUse"))
        world.wait_row(t, functools.partial(_has_tokens, tokens))
    return a, b


def _has_tokens(tokens: int, row: dict[str, object]) -> bool:
    return row["tokens"] == tokens


def line_env(world: World) -> dict[str, str]:
    return {**world.env, "PATH": f"{BIN}:{world.env['PATH']}"}


def test_cli_line_names_the_directory_session_else_the_worst(ctxd: World) -> None:
    a, b = two_projects(ctxd)
    own = ctxd.cli("line", "--cwd", str(b / "sub"))
    assert own.returncode == 0, own.stderr
    assert own.stdout.startswith("proj-b claude ") and "100k/" in own.stdout
    assert own.stdout.count("\n") == 1
    elsewhere = ctxd.cli("line", "--cwd", "/")
    assert elsewhere.stdout.startswith("*proj-a claude ") and "650k/" in elsewhere.stdout
    coloured = subprocess.run(
        [BIN / "ctxd-line", "--tmux", "--cwd", str(a)],
        env=line_env(ctxd),
        capture_output=True,
        text=True,
        timeout=10,
        check=True,
    ).stdout
    assert coloured.startswith("#[fg=") and "proj-a claude" in coloured
    assert coloured.endswith("#[default]\n")


def test_line_without_daemon_prints_nothing_and_exits_at_once(world: World) -> None:
    started = time.monotonic()
    done = subprocess.run(
        [BIN / "ctxd-line", "--tmux"],
        env=line_env(world),
        capture_output=True,
        timeout=10,
        check=False,
    )
    assert (done.returncode, done.stdout, done.stderr) == (0, b"", b"")
    assert time.monotonic() - started < 2.0
    assert world.daemon_pids() == set()  # a bar never starts the daemon


def _read_until(fd: int, wanted: bytes, timeout: float) -> bytes:
    seen = b""
    deadline = time.monotonic() + timeout
    while wanted not in seen and time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.2)
        if ready:
            try:
                seen += os.read(fd, 1 << 16)
            except OSError:
                break
    return seen


def readme_fast_line() -> str:
    """The README's `status-right` that runs the copy `ctxd install` made, without site."""
    readme = (SNIPPET.parents[2] / "README.md").read_text()
    (line,) = [ln for ln in readme.splitlines() if ln.startswith("set") and "ctxd_line.py" in ln]
    return line


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
@pytest.mark.parametrize("setup", ["snippet", "readme-installed-copy"])
def test_tmux_status_bar_shows_the_pane_session(ctxd: World, setup: str) -> None:
    _, b = two_projects(ctxd)
    if setup == "readme-installed-copy":
        from ctxd.agents.hookcmd import install_client

        install_client(ctxd.env)  # what `ctxd install` does, into the world's home
        conf = ctxd.root / "fast.tmux"
        conf.write_text(SNIPPET.read_text() + readme_fast_line() + "\n")
    else:
        conf = SNIPPET
    env = {**line_env(ctxd), "TMUX_TMPDIR": str(ctxd.root), "TERM": "xterm-256color"}
    tmux = ["tmux", "-u", "-L", f"ctxd-test-{secrets.token_hex(4)}", "-f", "/dev/null"]
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 10, 200, 0, 0))
    client = None
    try:
        subprocess.run(
            [*tmux, "new-session", "-d", "-s", "s", "-c", str(b / "sub"), "-x", "200"],
            env=env,
            check=True,
            timeout=10,
        )
        subprocess.run([*tmux, "source-file", str(conf)], env=env, check=True, timeout=10)
        # The bar is drawn for a client: attach one on a terminal of our own.
        client = subprocess.Popen(
            [*tmux, "attach", "-t", "s"],
            stdin=slave,
            stdout=slave,
            stderr=slave,
            env=env,
            start_new_session=True,
        )
        screen = _read_until(master, b"proj-b claude", 15.0)
        assert b"proj-b claude" in screen, screen[-2000:]
        assert b"100k/" in screen.partition(b"proj-b claude")[2]
        assert b"*proj-a" not in screen
    finally:
        subprocess.run([*tmux, "kill-server"], env=env, check=False, timeout=10)
        if client is not None:
            try:
                client.wait(5)
            except subprocess.TimeoutExpired:
                client.kill()
                client.wait()
        for fd in (master, slave):
            with contextlib.suppress(OSError):
                os.close(fd)


def test_readme_shows_the_snippet_the_test_runs() -> None:
    readme = (SNIPPET.parents[2] / "README.md").read_text()
    assert SNIPPET.read_text().strip() in readme
