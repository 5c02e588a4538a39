"""The hook command ctxd writes into agents' settings, and how ctxd recognises its own."""

from __future__ import annotations

import os
import shlex
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from ctxd.agents.hookcmd import (
    base_interpreter,
    build_command,
    client_dir,
    client_path,
    ctxd_command,
    hook_command,
    install_client,
    interpreter,
    is_ctxd_command,
    real_interpreter,
    refresh_client,
)


def test_hook_command_imports_the_copied_client_with_the_base_interpreter(
    tmp_path: Path,
) -> None:
    env = {"HOME": str(tmp_path)}
    words = shlex.split(hook_command("gemini", env=env))
    assert words[1:4] == ["-S", "-I", "-c"]
    # The base Python under the venv: it outlives a moved or rebuilt venv.
    assert words[0] == base_interpreter() and Path(words[0]).is_absolute()
    assert not words[0].startswith(sys.prefix + "/") or sys.prefix == sys.base_prefix
    copied = tmp_path / ".local/share/ctxd/client"
    assert f'sys.path[:0]=["{copied}"];import ctxd_hook as h;h.main()' in words[4]
    assert words[5:] == ["gemini"]
    assert shlex.split(hook_command("claude", "statusline", env))[5:] == ["claude", "statusline"]
    xdg = {"HOME": str(tmp_path), "XDG_DATA_HOME": str(tmp_path / "data")}
    assert client_dir(xdg) == tmp_path / "data" / "ctxd" / "client"


def test_install_client_copies_the_client_and_names_ctxd(tmp_path: Path) -> None:
    env = {"HOME": str(tmp_path)}
    assert refresh_client(env) is False  # never installed: a ctxd run creates nothing
    assert not (tmp_path / ".local").exists()
    directory = install_client(env)
    assert directory == client_dir(env) and stat.S_IMODE(directory.stat().st_mode) == 0o700
    assert (directory / "ctxd_hook.py").read_bytes() == client_path().read_bytes()
    assert (directory / "ctxd-command").read_text().split() == ctxd_command()
    # An older copy (another version of ctxd installed it) is replaced by the next ctxd run.
    (directory / "ctxd_wire.py").write_text("VERSION = 0\n")
    (directory / "ctxd-command").write_text("/gone/venv/bin/python\n-I\n-m\nctxd\n")
    assert refresh_client(env) is True
    assert b"VERSION = 1" in (directory / "ctxd_wire.py").read_bytes()
    assert (directory / "ctxd-command").read_text().split() == ctxd_command()


def test_hook_command_runs_and_stays_silent_without_a_daemon(tmp_path: Path) -> None:
    """What the agent will execute: exit 0, no output, even with no daemon and no site."""
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(tmp_path),
        "CTXD_SOCKET": str(tmp_path / "none.sock"),
        "CTXD_NO_SPAWN": "1",
    }
    install_client(env)
    payload = b'{"session_id": "s", "hook_event_name": "PostToolUse", "transcript_path": "/x"}'
    done = subprocess.run(
        hook_command("claude", env=env),
        shell=True,
        input=payload,
        capture_output=True,
        env=env,
        timeout=30,
    )
    assert (done.returncode, done.stdout, done.stderr) == (0, b"", b"")


def test_paths_with_spaces_are_quoted() -> None:
    command = build_command("/opt/my python/bin/python3", "/home/a b/ctxd_hook.py", "codex")
    assert shlex.split(command) == [
        "/opt/my python/bin/python3",
        "-S",
        "-I",
        "-c",
        'import sys;sys.path[:0]=["/home/a b"];import ctxd_hook as h;h.main()',
        "codex",
    ]
    assert is_ctxd_command(command)


@pytest.mark.parametrize(
    "command",
    [
        "ctxd-hook claude",
        "/home/u/.local/bin/ctxd-hook gemini AfterTool",
        "/usr/bin/python3 -S -I /usr/lib/python3/site-packages/ctxd_hook.py codex",
        "'/opt/my python/bin/python3' -S -I '/x y/ctxd_hook.py' claude statusline",
        "python3 'unterminated/ctxd_hook.py claude",
    ],
)
def test_ctxd_commands_are_recognised(command: str) -> None:
    assert is_ctxd_command(command)


@pytest.mark.parametrize(
    "command",
    [
        "python3 '$HARNESS/hook.py' PostToolUse",
        'node "$HOME/.claude/hooks/gsd-context-monitor.js"',
        "grep ctxd-hooks notes.txt",
        "python3 my_ctxd_hook.py",
        "cat ctxd_hook.pyc",
        None,
        42,
    ],
)
def test_foreign_commands_are_not_ours(command: object) -> None:
    assert not is_ctxd_command(command)


def test_pyenv_shim_is_replaced_by_the_real_binary(tmp_path: Path) -> None:
    prefix = tmp_path / "versions" / "3.11.7"
    (prefix / "bin").mkdir(parents=True)
    (prefix / "bin" / "python3.11").touch()
    shim = str(tmp_path / "shims" / "python3")
    assert real_interpreter(shim, str(prefix), (3, 11)) == str(prefix / "bin" / "python3.11")


def test_a_venv_python_is_kept_as_is(tmp_path: Path) -> None:
    venv_python = str(tmp_path / "venv" / "bin" / "python")
    assert real_interpreter(venv_python, "/usr", (3, 11)) == venv_python
    assert interpreter() == os.path.abspath(sys.executable)
