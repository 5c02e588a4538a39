"""A transcript rewritten in place is read again from its start, even when
the new content is longer than what the daemon had read."""

from __future__ import annotations

import os

from daemon_proc import Home, wait_for


def test_copy_truncate_rewrite_that_grows_the_file_is_read_afresh(home: Home) -> None:
    """After a copy-truncate rewrite (same inode) whose new content is longer
    than the old offset by the time the daemon looks, the daemon went on reading at the old
    offset, in the middle of a line, and showed the old figure (400,002 tokens instead of
    90,000) until the next line. The rewrite must be detected, not just the shrink."""
    home.start()
    session = home.claude()
    for figure in (100_000, 200_000, 300_000, 400_002):
        session.assistant(figure)
    home.hook_out(session.payload("PostToolUse"))
    row = home.row(session)
    assert row is not None and row["tokens"] == 400_002
    old_size = session.path.stat().st_size
    inode = session.path.stat().st_ino

    # New content: one padded line, then the final 90,000 line straddling the old offset, so
    # that what lies past the old offset is the tail of a line.
    last = session.assistant_line(90_000)
    first = session.assistant_line(50_000, pad="")
    target = old_size - len(last) // 2
    assert target > len(first)
    first = first.replace(b'"pad":""', b'"pad":"' + b"x" * (target - len(first)) + b'"')
    assert len(first) == target and len(first) + len(last) > old_size
    fd = os.open(session.path, os.O_WRONLY | os.O_TRUNC)  # truncate and write at once
    try:
        os.write(fd, first + last)
    finally:
        os.close(fd)
    assert session.path.stat().st_ino == inode

    def shown_tokens() -> int | None:
        row = home.row(session)
        return None if row is None else int(row["tokens"])

    try:
        wait_for(lambda: shown_tokens() == 90_000, 3, "the rewritten transcript's figure")
    except AssertionError:
        raise AssertionError(
            f"status shows {shown_tokens()} tokens after the rewrite, not 90000"
        ) from None
    shown = [r for r in home.status_json()["sessions"] if r["transcript_path"] == str(session.path)]
    assert [r["tokens"] for r in shown] == [90_000]
