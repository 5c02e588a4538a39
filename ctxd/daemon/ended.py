"""The transcripts of sessions that ended and were dropped, so that they stay ended.

A session is dropped `ended_minutes` after it ended; its transcript is still on disk, and recent,
so the next discovery pass (or a sweep of a folder that cannot be watched) would find it again,
read it from byte 0 and list it as live for `idle_minutes`. `EndedFiles` remembers each one's
identity (device, inode) and the bytes read when it was dropped; a transcript found again is
followed only once it has grown or been replaced: then its agent wrote to it, and it is live.
The snapshot keeps the list (`export`/`restore`), and entries no discovery pass can find any
more (gone, or older than the discovery window) are forgotten (`prune`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

__all__ = ["EndedFiles"]


class EndedFiles:
    """Path -> (identity, bytes read) of the transcripts of dropped ended sessions."""

    def __init__(self) -> None:
        self._files: dict[str, tuple[tuple[int, int], int]] = {}

    def __contains__(self, path: object) -> bool:
        return path in self._files

    def __len__(self) -> int:
        return len(self._files)

    def remember(self, path: str, identity: tuple[int, int], size: int) -> None:
        self._files[path] = (identity, size)

    def forget(self, path: str) -> None:
        self._files.pop(path, None)

    def still_ended(self, path: str) -> bool:
        """Whether `path` is an ended transcript that has neither grown nor been replaced since
        (one that has is forgotten here: it is a live session again)."""
        known = self._files.get(path)
        if known is None:
            return False
        try:
            info = os.stat(path)
        except OSError:
            return True  # gone: nothing to follow
        if (info.st_dev, info.st_ino) == known[0] and info.st_size <= known[1]:
            return True
        del self._files[path]
        return False

    def prune(self, since: float) -> None:
        """Forget what no discovery pass can find any more: transcripts gone, or last changed
        before `since` (epoch seconds); the list stays the size of the recent history."""
        for path in list(self._files):
            try:
                if os.stat(path).st_mtime >= since:
                    continue
            except OSError:
                pass
            del self._files[path]

    def export(self) -> dict[str, dict[str, Any]]:
        """Plain values for the snapshot (`restore` takes them back)."""
        return {
            path: {"identity": list(identity), "size": size}
            for path, (identity, size) in self._files.items()
        }

    def restore(self, saved: Mapping[str, Any]) -> None:
        """Take back what `export` gave; malformed entries are skipped."""
        for path, entry in saved.items():
            try:
                dev, ino = entry["identity"]
                self._files[str(path)] = ((int(dev), int(ino)), int(entry["size"]))
            except (KeyError, TypeError, ValueError):
                continue
