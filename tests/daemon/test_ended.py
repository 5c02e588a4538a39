"""The ended transcripts remembered: which ones a discovery pass may follow again."""

from __future__ import annotations

import os
from pathlib import Path

from ctxd.daemon.ended import EndedFiles


def remembered(path: Path) -> EndedFiles:
    ended = EndedFiles()
    info = path.stat()
    ended.remember(str(path), (info.st_dev, info.st_ino), info.st_size)
    return ended


def test_an_ended_transcript_is_followed_again_only_once_it_grows_or_is_replaced(
    tmp_path: Path,
) -> None:
    path = tmp_path / "t.jsonl"
    path.write_bytes(b"{}\n" * 10)
    ended = remembered(path)
    os.utime(path)  # touched, not written: still ended
    assert ended.still_ended(str(path))
    with path.open("ab") as f:
        f.write(b"{}\n")
    assert not ended.still_ended(str(path)) and str(path) not in ended

    ended = remembered(path)
    replacement = tmp_path / "new.jsonl"
    replacement.write_bytes(b"{}\n")  # shorter, but another file
    replacement.replace(path)
    assert not ended.still_ended(str(path))
    assert not ended.still_ended(str(tmp_path / "never-ended.jsonl"))


def test_what_no_discovery_can_find_is_forgotten_and_the_rest_survives_a_restart(
    tmp_path: Path,
) -> None:
    old, recent, gone = (tmp_path / f"{name}.jsonl" for name in ("old", "recent", "gone"))
    for path in (old, recent, gone):
        path.write_bytes(b"{}\n")
    ended = EndedFiles()
    for path in (old, recent, gone):
        info = path.stat()
        ended.remember(str(path), (info.st_dev, info.st_ino), info.st_size)
    os.utime(old, (1_000_000, 1_000_000))
    gone.unlink()
    ended.prune(since=recent.stat().st_mtime - 60)
    again = EndedFiles()
    again.restore({**ended.export(), "bad": {"identity": "x"}})
    assert len(again) == 1 and again.still_ended(str(recent))
