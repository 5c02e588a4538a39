"""Where one user's daemon keeps its files, and the lock that lets only one daemon run.

The lock is taken before the socket is bound: binding replaces a stale socket file left by a
crashed daemon, and only the lock makes sure it is never a live daemon's.
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from ctxd import paths
from ctxd.errors import CtxdError

__all__ = ["AlreadyRunning", "DaemonPaths", "exclusive_lock"]


class AlreadyRunning(CtxdError):
    exit_code = 1


@dataclass(frozen=True, slots=True)
class DaemonPaths:
    runtime_dir: Path
    socket: Path
    lock: Path
    state: Path
    config: Path
    journal: Path

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> DaemonPaths:
        run = paths.runtime_dir(env)
        state = paths.state_dir(env)
        return cls(
            run,
            paths.socket_path(env),
            run / "ctxd.lock",
            state / "state.json",
            paths.config_path(env),
            state / "state.journal",
        )


@contextmanager
def exclusive_lock(path: Path) -> Iterator[None]:
    """Hold `path` locked for the daemon's lifetime; AlreadyRunning if another daemon holds it,
    CtxdError (one line) when the path holds something other than a lock file of ours."""
    fd = _open_lock(path)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
            raise AlreadyRunning(f"another ctxd is already running (pid {holder})") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield
    finally:
        os.close(fd)


def _open_lock(path: Path) -> int:
    """The lock file: reopened when it is a regular file of ours, created `O_EXCL|O_NOFOLLOW`
    when missing. A link there is refused, not followed: it is not ours to remove."""
    flags = os.O_RDWR | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    for _ in range(3):  # another daemon may create it between our two opens
        try:
            try:
                fd = os.open(path, flags)
            except FileNotFoundError:
                fd = os.open(path, flags | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            continue
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise CtxdError(
                    f"{path} is a symbolic link, not ctxd's lock file; remove it"
                ) from None
            raise CtxdError(f"cannot open the lock file {path}: {exc.strerror or exc}") from None
        info = os.fstat(fd)
        if stat.S_ISREG(info.st_mode) and info.st_uid == os.getuid():
            return fd
        os.close(fd)
        raise CtxdError(f"{path} is not ctxd's lock file (not a regular file of yours); remove it")
    raise CtxdError(f"cannot create the lock file {path}: it keeps appearing and vanishing")
