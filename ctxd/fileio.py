"""Writing a file whole or not at all: the one atomic write every part of ctxd uses.

The new content goes to a fresh temporary file beside the target, created `O_EXCL|O_NOFOLLOW`
under a random name (a name planted in advance, or a link, makes it fail rather than write
through), written to the last byte (a short write on a full disk is an error, not a truncated
file), flushed to disk, then renamed over the target. On any failure the temporary file is
removed and the target is left as it was.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from pathlib import Path

__all__ = ["write_atomic"]


def write_atomic(path: Path, data: bytes, mode: int = 0o600) -> None:
    """Replace `path` with `data` atomically (see the module docstring); OSError on failure."""
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(8)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
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
