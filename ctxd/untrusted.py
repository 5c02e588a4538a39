"""Reading a file ctxd does not own: one helper for every read made on an agent's behalf.

An agent's settings files, its transcripts, its database and the files a hook payload names sit
in folders other people write to (a cloned repository, a shared `/tmp` folder), so what is found
at such a path may be anything: a FIFO, whose open or read waits for a writer that never comes;
a link to `/dev/zero`, which `stat` calls empty and which never ends; a directory; a file of
gigabytes. `open_regular` opens a path only as a regular file and `read_untrusted` reads one
whole up to a bound:

- `stat` first (following links): anything but a regular file is refused without being opened,
  so no device is ever opened (opening some has effects of its own);
- then `open(O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC)` and `fstat` on the descriptor: what
  counts is what was opened, so a path swapped for a FIFO between the two is refused too.
  `O_NONBLOCK` makes the open of a FIFO return at once, and a read of a file that has no data
  yet (`/proc/kmsg`) fail instead of waiting. Links are followed on purpose (no `O_NOFOLLOW`):
  dotfile managers link settings files, and a link to a regular file is as good as the file;
- reading stops at `limit + 1` bytes, whatever `stat` said the size was (a file still being
  written, or one of `/proc`'s, which say 0).

A regular file on a local disk is read from the page cache or the disk: a bounded read of one
cannot wait indefinitely, which is why the daemon may do it on its event loop (a hung network
or FUSE mount can still stall any read; that is outside what ctxd defends against). Failures
are `RefusedFile` (an `OSError`, so that callers' existing `except OSError` still hold) naming
what was wrong; a missing file stays `FileNotFoundError`, an unreadable one `PermissionError`.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator

__all__ = [
    "MAX_SETTINGS_BYTES",
    "RefusedFile",
    "describe_mode",
    "holdable_path",
    "open_regular",
    "read_chunks",
    "read_descriptor",
    "read_head",
    "read_untrusted",
    "size_text",
    "stat_regular",
    "why",
]

#: Linux's PATH_MAX: no system call takes a longer path, so a longer one is no file's name.
MAX_PATH_BYTES = 4096

#: Longer files are not settings files: the bound for an agent's settings or config file.
MAX_SETTINGS_BYTES = 4 * 1024 * 1024

_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


class RefusedFile(OSError):
    """A file ctxd will not read: not a regular file, longer than its bound, or one that would
    make a read wait. `reason` says which, in words (`str()` is "PATH: REASON")."""

    def __init__(self, path: str | os.PathLike[str], reason: str) -> None:
        super().__init__(f"{os.fspath(path)}: {reason}")
        self.path = os.fspath(path)
        self.reason = reason


def holdable_path(text: str) -> bool:
    """Whether `text` could name a file at all: no NUL byte and shorter than PATH_MAX. A path
    from a payload or an agent's database that is not is treated as absent: walking up a
    megabyte of `a/a/a/...` costs a stat and a path object per level, quadratic, on the loop."""
    return "\x00" not in text and len(text.encode("utf-8", "surrogatepass")) < MAX_PATH_BYTES


def describe_mode(mode: int) -> str:
    """What a file of `mode` is, in words ("a FIFO", "a directory", ...)."""
    for test, words in _KINDS:
        if test(mode):
            return words
    return f"a file of mode {stat.filemode(mode)}"


def _check(path: str | os.PathLike[str], info: os.stat_result) -> None:
    if not stat.S_ISREG(info.st_mode):
        raise RefusedFile(path, f"not a regular file ({describe_mode(info.st_mode)})")


def stat_regular(path: str | os.PathLike[str]) -> os.stat_result:
    """What `stat` says of `path`, a regular file; RefusedFile for anything else. For a file
    another library opens by its name (SQLite): it cannot tell what it opened, so this is the
    check that can be made (a swap between the two is the caller's to accept)."""
    info = os.stat(path)
    _check(path, info)
    return info


def open_regular(
    path: str | os.PathLike[str], known: os.stat_result | None = None
) -> tuple[int, os.stat_result]:
    """`path` opened for reading, as a regular file, and its `fstat`; the caller closes the
    descriptor. RefusedFile for anything else; FileNotFoundError, PermissionError (OSError)
    as `open` raises them. `known`: what the caller's own `os.stat(path)` just said (spares a
    second one)."""
    _check(path, os.stat(path) if known is None else known)  # no device is ever opened
    fd = os.open(path, _FLAGS)
    try:
        info = os.fstat(fd)
        _check(path, info)  # what was opened, should the path have changed since
    except BaseException:
        os.close(fd)
        raise
    return fd, info


def read_descriptor(fd: int, limit: int, path: str | os.PathLike[str]) -> bytes:
    """The bytes of the open regular file `fd` from where it stands, at most `limit`:
    RefusedFile (naming `path`) when there are more. Counted while reading, never taken from
    `stat`."""
    chunks: list[bytes] = []
    got = 0
    try:
        while got <= limit:
            chunk = os.read(fd, min(1 << 20, limit + 1 - got))
            if not chunk:
                break
            chunks.append(chunk)
            got += len(chunk)
    except BlockingIOError:
        raise RefusedFile(path, "reading it would wait (not an ordinary file)") from None
    if got > limit:
        raise RefusedFile(path, f"larger than {size_text(limit)}")
    return b"".join(chunks)


def read_untrusted(path: str | os.PathLike[str], limit: int = MAX_SETTINGS_BYTES) -> bytes:
    """The whole content of the regular file at `path`, at most `limit` bytes (see the module
    docstring). RefusedFile when it is not a regular file or holds more; FileNotFoundError when
    there is none; another OSError when it cannot be opened or read."""
    fd, info = open_regular(path)
    try:
        if info.st_size > limit:  # a cheap early no; the read below counts anyway
            raise RefusedFile(path, f"larger than {size_text(limit)}")
        return read_descriptor(fd, limit, path)
    finally:
        os.close(fd)


def read_head(path: str | os.PathLike[str], size: int) -> bytes:
    """The first `size` bytes (fewer if it is shorter) of the regular file at `path`, to tell
    its format by. Errors as `read_untrusted`'s, but a longer file is no error."""
    fd, _ = open_regular(path)
    try:
        try:
            return os.read(fd, size)
        except BlockingIOError:
            raise RefusedFile(path, "reading it would wait (not an ordinary file)") from None
    finally:
        os.close(fd)


def read_chunks(path: str | os.PathLike[str], size: int) -> Iterator[bytes]:
    """The regular file at `path` in chunks of at most `size` bytes, up to the size it had when
    opened (a file still growing is read to there; its end is not chased). Errors as
    `read_untrusted`'s, raised by the first `next`."""
    fd, info = open_regular(path)
    try:
        left = info.st_size
        while left > 0:
            try:
                chunk = os.read(fd, min(size, left))
            except BlockingIOError:
                raise RefusedFile(path, "reading it would wait (not an ordinary file)") from None
            if not chunk:
                break
            left -= len(chunk)
            yield chunk
    finally:
        os.close(fd)


def why(exc: OSError) -> str:
    """What an error met opening or reading a file says, in a few words (no path)."""
    if isinstance(exc, RefusedFile):
        return exc.reason
    return exc.strerror or str(exc)


def size_text(size: int) -> str:
    """`size` bytes in the words an error uses: "4 MiB", "512 KiB", "100 bytes"."""
    for unit, name in ((1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")):
        if size >= unit and size % unit == 0:
            return f"{size // unit} {name}"
    return f"{size:,} bytes"
