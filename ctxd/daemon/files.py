"""One transcript file, read incrementally: only the bytes appended since the last read.

`TranscriptFile` remembers a read offset and the file's identity; `read_appended` reads only
what was appended since, and starts over when the file got shorter or was replaced (new inode).
"""

from __future__ import annotations

import os

from ctxd.agents import spec
from ctxd.agents.reader import TranscriptReader
from ctxd.core.events import UsageUpdate

__all__ = ["CHUNK", "TranscriptFile"]

CHUNK = 1024 * 1024


class TranscriptFile:
    """One transcript, read incrementally. Not thread-safe; one owner at a time."""

    def __init__(self, path: str, agent: str) -> None:
        self.path = path
        self.agent = agent
        self.reader: TranscriptReader = spec(agent).open_reader(path)
        self.offset = 0
        self.identity: tuple[int, int] | None = None

    def read_appended(self, limit: int | None = None) -> list[UsageUpdate]:
        """Usage updates from the bytes appended since the last call (at most `limit` bytes).

        Raises FileNotFoundError when the file is gone, OSError when it cannot be read.
        """
        # One stat decides; the file is opened only when there is something to read, which
        # also spares the watcher the open/close events every hook would otherwise cause.
        info = os.stat(self.path)
        identity = (info.st_dev, info.st_ino)
        if identity == self.identity and info.st_size == self.offset:
            return []
        fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK)
        try:
            info = os.fstat(fd)
            identity = (info.st_dev, info.st_ino)
            if identity != self.identity or info.st_size < self.offset:
                # Replaced or truncated (rotation, rewrite): what we knew is void.
                self.reader.reset()
                self.offset = 0
                self.identity = identity
            updates: list[UsageUpdate] = []
            end = info.st_size if limit is None else min(info.st_size, self.offset + limit)
            while self.offset < end:
                chunk = os.pread(fd, min(CHUNK, end - self.offset), self.offset)
                if not chunk:
                    break
                self.offset += len(chunk)
                updates.extend(self.reader.feed(chunk))
            return updates
        finally:
            os.close(fd)
