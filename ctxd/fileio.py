"""Writing a file whole or not at all: the one atomic write every part of ctxd uses.

The new content goes to a fresh temporary file beside the target, created `O_EXCL|O_NOFOLLOW`
under a random name (a name planted in advance, or a link, makes it fail rather than write
through), written to the last byte (a short write on a full disk is an error, not a truncated
file), flushed to disk, then renamed over the target. On any failure the temporary file is
removed and the target is left as it was.

Files that are appended to rather than replaced follow the same rule for their creation:
`create_fresh` makes a new empty one the same way and puts it in place, and `open_append` reopens
only a regular file of this user's with a single link; anything else at its path is moved out of
the way (removed, never followed) and a new file created. Both expect a directory the caller has
checked is private (`ctxd.paths.ensure_private_dir`): only there is everything in it ours.
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path

__all__ = ["create_fresh", "open_append", "write_atomic"]

_CREATE = os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


def _temporary(path: Path) -> Path:
    return path.with_name(f".{path.name}.{os.urandom(8).hex()}.tmp")


def write_atomic(path: Path, data: bytes, mode: int = 0o600) -> None:
    """Replace `path` with `data` atomically (see the module docstring); OSError on failure."""
    tmp = _temporary(path)
    fd = os.open(tmp, os.O_WRONLY | _CREATE, mode)
    try:
        try:
            os.fchmod(fd, mode)  # the umask may have taken bits the caller asked for
            view = memoryview(data)
            while view:
                written = os.write(fd, view)
                if written <= 0:
                    raise OSError(f"no room to write {path}")
                view = view[written:]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    with contextlib.suppress(OSError):  # the rename itself durable; not every fs allows this
        dir_fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


def create_fresh(path: Path, mode: int = 0o600, first: bytes = b"") -> int:
    """A new file holding `first` (on disk before it is in place), put in place of `path`
    (whatever was there is replaced, never written through), open for appending; its
    descriptor. OSError on failure, nothing left behind."""
    tmp = _temporary(path)
    fd = os.open(tmp, os.O_WRONLY | os.O_APPEND | _CREATE, mode)
    try:
        os.fchmod(fd, mode)
        if first:
            view = memoryview(first)
            while view:
                written = os.write(fd, view)
                if written <= 0:
                    raise OSError(f"no room to write {path}")
                view = view[written:]
            os.fdatasync(fd)
        os.replace(tmp, path)
    except BaseException:
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return fd


def open_append(path: Path, mode: int = 0o600) -> tuple[int, str | None]:
    """`path` open for appending, as a file of this user's own: an existing regular file with a
    single link is reopened; a missing one is created `O_EXCL|O_NOFOLLOW`; anything else there
    (a symlink, a hard link to another file, a FIFO) is removed without being followed and a new
    file created in its place. Returns the descriptor and, when something was replaced, what it
    was (for the caller to report). OSError when no file can be had (e.g. a directory there)."""
    flags = os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    replaced = None
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        fd = -1
    except OSError:  # ELOOP for a symlink, ENXIO for a FIFO without a reader, ...
        fd = -1
        replaced = _describe(path)
    if fd >= 0:
        info = os.fstat(fd)
        if stat.S_ISREG(info.st_mode) and info.st_uid == os.getuid() and info.st_nlink == 1:
            return fd, None
        os.close(fd)
        replaced = _describe(path)
    if replaced is not None:
        os.unlink(path)  # removes the entry itself, never what a link points to
    return os.open(path, flags | _CREATE, mode), replaced


def _describe(path: Path) -> str:
    info = os.lstat(path)
    if stat.S_ISLNK(info.st_mode):
        return f"a symbolic link to {os.readlink(path)}"
    if stat.S_ISREG(info.st_mode) and info.st_nlink > 1:
        return f"a file with {info.st_nlink} links"
    if stat.S_ISREG(info.st_mode):
        return f"a file owned by uid {info.st_uid}"
    return f"not a regular file (mode {stat.filemode(info.st_mode)})"
