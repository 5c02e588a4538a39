"""Where ctxd keeps its socket, state and config, per user and platform.

The socket's place is decided in `ctxd_wire` (the hook client must find it without importing
ctxd) and reused here, so that the two can never disagree. The agents' transcript roots are
each agent's own knowledge (`ctxd.agents.transcript_roots`).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from pathlib import Path

import ctxd_wire

from ctxd.errors import UnsafeRuntimeDir

__all__ = [
    "config_path",
    "ensure_private_dir",
    "home",
    "runtime_dir",
    "socket_path",
    "state_dir",
]


def home(env: Mapping[str, str]) -> Path:
    return Path(env.get("HOME") or Path.home())


def runtime_dir(env: Mapping[str, str] = os.environ) -> Path:
    """The private directory that holds the socket and the daemon's lock."""
    return Path(ctxd_wire.runtime_dir(env))


def socket_path(env: Mapping[str, str] = os.environ) -> Path:
    return Path(ctxd_wire.socket_path(env))


def state_dir(env: Mapping[str, str] = os.environ) -> Path:
    """Snapshot and log: `$XDG_STATE_HOME/ctxd`, default `~/.local/state/ctxd`."""
    base = env.get("XDG_STATE_HOME") or str(home(env) / ".local" / "state")
    return Path(base) / "ctxd"


def config_path(env: Mapping[str, str] = os.environ) -> Path:
    """`CTXD_CONFIG`, else `$XDG_CONFIG_HOME/ctxd/config.toml` (default `~/.config`)."""
    override = env.get("CTXD_CONFIG")
    if override:
        return Path(override)
    base = env.get("XDG_CONFIG_HOME") or str(home(env) / ".config")
    return Path(base) / "ctxd" / "config.toml"


def ensure_private_dir(path: Path) -> None:
    """Create `path` 0700 if missing; refuse one that another user owns or others can enter.

    A socket in a directory that someone else can write to could be swapped for theirs; the
    directory is the boundary, so it is checked rather than fixed up silently.
    """
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    info = path.lstat()
    if not stat.S_ISDIR(info.st_mode):
        raise UnsafeRuntimeDir(f"{path} is not a directory")
    if info.st_uid != os.getuid():
        raise UnsafeRuntimeDir(f"{path} is owned by uid {info.st_uid}, not by you ({os.getuid()})")
    if info.st_mode & 0o077:
        raise UnsafeRuntimeDir(
            f"{path} is open to other users (mode {stat.S_IMODE(info.st_mode):o}); "
            f"run: chmod 700 {path}"
        )
