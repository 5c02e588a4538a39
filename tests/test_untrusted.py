"""The one reader of files ctxd does not own (`ctxd.untrusted`), by truth table: what it gives
or refuses for each kind of thing found at a path. Real files, FIFOs, devices and links; each
case must answer at once (a FIFO's open or read would otherwise wait forever)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest
from at_once import within_a_second

from ctxd.untrusted import RefusedFile, read_head, read_untrusted, size_text

LIMIT = 1024


def _regular(tmp: Path) -> Path:
    path = tmp / "settings.json"
    path.write_bytes(b'{"a": 1}')
    return path


def _exactly_the_limit(tmp: Path) -> Path:
    path = tmp / "full.json"
    path.write_bytes(b" " * LIMIT)
    return path


def _too_big(tmp: Path) -> Path:
    path = tmp / "big.json"
    path.write_bytes(b" " * (LIMIT + 1))
    return path


def _link_to_regular(tmp: Path) -> Path:
    path = tmp / "dotfile.json"
    path.symlink_to(_regular(tmp))  # dotfile managers link settings files: that is fine
    return path


def _fifo(tmp: Path) -> Path:
    path = tmp / "fifo.json"
    os.mkfifo(path)
    return path


def _link_to_fifo(tmp: Path) -> Path:
    path = tmp / "to-fifo.json"
    path.symlink_to(_fifo(tmp))
    return path


def _dev_zero(tmp: Path) -> Path:
    path = tmp / "zero.json"
    path.symlink_to("/dev/zero")  # what `git clone` keeps: size 0 by stat, endless to read
    return path


def _directory(tmp: Path) -> Path:
    path = tmp / "dir.json"
    path.mkdir()
    return path


def _missing(tmp: Path) -> Path:
    return tmp / "absent.json"


def _dangling(tmp: Path) -> Path:
    path = tmp / "dangling.json"
    path.symlink_to(tmp / "nowhere")
    return path


def _unreadable(tmp: Path) -> Path:
    path = _regular(tmp)
    path.chmod(0)
    return path


def _proc_zero_sized(tmp: Path) -> Path:
    # A regular file whose `stat` says 0 bytes but which reads more: the bound is counted.
    path = tmp / "proc.json"
    path.symlink_to("/proc/self/maps")
    return path


CASES: list[tuple[str, Callable[[Path], Path], type[BaseException] | bytes, str]] = [
    ("regular", _regular, b'{"a": 1}', ""),
    ("exactly the limit", _exactly_the_limit, b" " * LIMIT, ""),
    ("link to a regular file", _link_to_regular, b'{"a": 1}', ""),
    ("too big", _too_big, RefusedFile, "larger than 1 KiB"),
    ("FIFO", _fifo, RefusedFile, "not a regular file (a FIFO)"),
    ("link to a FIFO", _link_to_fifo, RefusedFile, "not a regular file (a FIFO)"),
    ("link to /dev/zero", _dev_zero, RefusedFile, "not a regular file (a character device)"),
    ("directory", _directory, RefusedFile, "not a regular file (a directory)"),
    ("missing", _missing, FileNotFoundError, ""),
    ("dangling link", _dangling, FileNotFoundError, ""),
]


@pytest.mark.parametrize(
    ("make", "expected", "words"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_read_untrusted(
    tmp_path: Path,
    make: Callable[[Path], Path],
    expected: type[BaseException] | bytes,
    words: str,
) -> None:
    path = make(tmp_path)
    if isinstance(expected, bytes):
        assert read_untrusted(path, LIMIT) == expected
        return
    with pytest.raises(expected) as caught:
        within_a_second(lambda: read_untrusted(path, LIMIT))
    assert isinstance(caught.value, OSError)  # callers' `except OSError` still holds
    if words:
        assert isinstance(caught.value, RefusedFile)
        assert caught.value.reason == words
        assert str(caught.value) == f"{path}: {words}"


def test_permission_denied_is_an_oserror_not_a_refusal(tmp_path: Path) -> None:
    path = _unreadable(tmp_path)
    if os.geteuid() != 0:
        with pytest.raises(PermissionError):
            read_untrusted(path, LIMIT)
        return
    # Root reads any file: the read is tried by a child that dropped to another uid.
    tmp_path.chmod(0o755)
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child's outcome is its exit code
        code = 3
        try:
            os.setgroups([])
            os.setgid(65534)
            os.setuid(65534)
            read_untrusted(path, LIMIT)
            code = 1
        except RefusedFile:
            code = 2
        except PermissionError:
            code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, "expected a PermissionError, not a refusal"


def test_a_file_stat_calls_empty_is_bounded_while_read(tmp_path: Path) -> None:
    path = _proc_zero_sized(tmp_path)
    assert os.stat(path).st_size == 0
    with pytest.raises(RefusedFile, match="larger than 16 bytes"):
        read_untrusted(path, 16)


def test_read_head_takes_the_start_of_a_long_file_and_refuses_the_rest(tmp_path: Path) -> None:
    assert read_head(_too_big(tmp_path), 4) == b"    "
    for make in (_fifo, _dev_zero, _directory):
        with pytest.raises(RefusedFile):
            within_a_second(lambda make=make: read_head(make(tmp_path), 4))  # type: ignore[misc]
    with pytest.raises(FileNotFoundError):
        read_head(_missing(tmp_path), 4)


def test_a_fifo_that_has_a_writer_is_still_refused(tmp_path: Path) -> None:
    """Refused for what it is, not for being empty: a writer holding it open changes nothing."""
    path = _fifo(tmp_path)
    fd = os.open(path, os.O_RDWR | os.O_NONBLOCK)  # a reader-writer: opens at once
    try:
        os.write(fd, b'{"a": 1}')
        with pytest.raises(RefusedFile, match="a FIFO"):
            within_a_second(lambda: read_untrusted(path, LIMIT))
    finally:
        os.close(fd)


def test_size_text() -> None:
    assert size_text(4 * 1024 * 1024) == "4 MiB"
    assert size_text(1024) == "1 KiB"
    assert size_text(1000) == "1,000 bytes"
