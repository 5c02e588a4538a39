"""One transcript file, read incrementally: only the bytes appended since the last read.

`TranscriptFile` remembers a read offset, the file's identity (device, inode) and a fingerprint:
the last FINGERPRINT bytes before the offset. `read_appended` reads only what was appended since
and starts over when the file was replaced (new identity), got shorter, or was rewritten in
place. Size and mtime cannot tell a copy-truncate rewrite that grew past the offset before we
looked from an append; the fingerprint can: after an append the bytes before the offset are the
ones read, after a rewrite they are not. Checking it costs one `pread` of FINGERPRINT bytes, and
only when the file changed.

A snapshot keeps, beside the offset, the state of the reader and of its digest as plain values
(`ctxd.agents.state`): a restart that finds the same file (identity, size, fingerprint) puts it
back and reads only what was appended since. Without it (another version of ctxd wrote the
snapshot, or a state too big to keep), the bytes up to the offset are read again to rebuild
the reader, their updates dropped.

Reads come in slices of CHUNK bytes, and a caller gives a deadline: `read_appended` stops after
the slice that crosses it (it always reads one, so repeated calls finish any file). `behind` is
what is known to be left; the caller decides when to come back for it, so no one holds the event
loop for a whole big file.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

import orjson

from ctxd.agents import spec
from ctxd.agents import state as reader_state
from ctxd.agents.digest import Facts
from ctxd.agents.reader import NO_FACTS, TranscriptReader
from ctxd.core.events import UsageUpdate
from ctxd.untrusted import open_regular

__all__ = ["CHUNK", "FINGERPRINT", "TranscriptFile"]

CHUNK = 1024 * 1024
FINGERPRINT = 64


class TranscriptFile:
    """One transcript, read incrementally. Not thread-safe; one owner at a time."""

    def __init__(self, path: str, agent: str) -> None:
        self.path = path
        self.agent = agent
        agent_spec = spec(agent)
        #: The session digest, the reader's listener (one pass over the lines for both); None
        #: where none is kept.
        self.facts: Facts | None = agent_spec.open_facts(path)
        self.reader: TranscriptReader = agent_spec.open_reader(path, self.facts or NO_FACTS)
        self.offset = 0
        self.identity: tuple[int, int] | None = None
        #: The file's size when last looked at (what `behind` is measured against).
        self.size = 0
        self._mtime_ns = -1
        self._tail = b""  # the FINGERPRINT bytes before `offset`
        # Restored from a snapshot: the session already holds what the bytes before `_skip_to`
        # say; they are read again only to rebuild the reader's own state, their updates dropped.
        self._skip_to = 0
        self._skip_tail = b""
        self._feeds = 0  # feeds and resets so far: the reader's state changes with them only
        self._state: tuple[int, dict[str, Any] | None] | None = None  # (at `_feeds`, state)
        self._encoded: tuple[tuple[object, ...], bytes] | None = None  # (at `_version`, JSON)

    @classmethod
    def resume(cls, path: str, agent: str, saved: dict[str, Any] | None) -> TranscriptFile:
        """A file read up to a saved `position()` before a restart. When it is still the same
        file (identity, size, and the fingerprint before the offset all agree), later calls
        read on from the offset with the saved reader state put back, or, without a state this
        code can take, read the bytes up to the offset again first, their updates dropped;
        otherwise it is read from the start like a new file."""
        tracked = cls(path, agent)
        try:
            fd, info = open_regular(path)
        except OSError:
            return tracked  # gone or no longer a regular file: the next read says so
        try:
            if saved is None:
                raise ValueError("no position saved")
            identity = saved.get("identity")
            identity = None if identity is None else tuple(int(n) for n in identity)
            offset = int(saved.get("offset", 0))
            tail = bytes.fromhex(str(saved.get("tail", "")))
        except (TypeError, ValueError):
            # A position damaged on disk, or none (`saved` None): the session holds what it held, so
            # the file is taken as read up to its end now, its reader rebuilt from there; read
            # from the start instead, everything in it would be counted twice.
            identity, offset, tail = (info.st_dev, info.st_ino), info.st_size, b""
        try:
            same = (
                identity is not None
                and (info.st_dev, info.st_ino) == tuple(identity)
                and info.st_size >= offset >= len(tail)
                and (not tail or os.pread(fd, len(tail), offset - len(tail)) == tail)
            )
        except OSError:
            same = False
        finally:
            os.close(fd)
        if not same:
            return tracked
        tracked.identity = (info.st_dev, info.st_ino)
        tracked.size = info.st_size
        if saved is not None and tracked._load_state(saved.get("state")):
            tracked.offset, tracked._tail = offset, tail
            return tracked
        fresh = cls(path, agent)  # a state refused half-way may have changed the reader
        fresh.identity, fresh.size = tracked.identity, tracked.size
        fresh._skip_to, fresh._skip_tail = offset, tail
        return fresh

    @property
    def modified_at(self) -> float | None:
        """The file's mtime (epoch seconds) when last looked at; None before the first look."""
        return None if self._mtime_ns < 0 else self._mtime_ns / 1e9

    @property
    def behind(self) -> int:
        """Bytes known to be unread (as of the last look at the file)."""
        return max(0, self.size - self.offset, self._skip_to - self.offset)

    def position(self, with_state: bool = False) -> dict[str, Any]:
        """Where reading stands, for a snapshot (`resume` takes it back); `with_state`: the
        reader's and digest's state too, when it can be kept."""
        if self.offset < self._skip_to:  # still rebuilding: the session stands at the old spot
            return {
                "offset": self._skip_to,
                "identity": self.identity,
                "tail": self._skip_tail.hex(),
            }
        position: dict[str, Any] = {
            "offset": self.offset,
            "identity": self.identity,
            "tail": self._tail.hex(),
        }
        if with_state:
            kept = self._dump_state()
            if kept is not None:
                position["state"] = kept
        return position

    @property
    def position_moved(self) -> bool:
        """Whether `encoded_position` has to encode (and maybe dump the reader's state) anew."""
        return self._encoded is None or self._encoded[0] != self._position_version()

    def encoded_position(self) -> bytes:
        """`position(with_state=True)` as JSON, encoded again only when it may have changed:
        a snapshot of 10,000 transcripts of which a few moved encodes those few."""
        version = self._position_version()
        if self._encoded is None or self._encoded[0] != version:
            # Copied to its own size: orjson's result holds a ~16 KB buffer however short.
            encoded = bytes(memoryview(orjson.dumps(self.position(with_state=True))))
            self._encoded = (version, encoded)
        return self._encoded[1]

    def _position_version(self) -> tuple[object, ...]:
        return (self.offset, self._skip_to, self.identity, self._tail, self._feeds)

    def _dump_state(self) -> dict[str, Any] | None:
        # Dumped again only after a feed: a snapshot every few seconds costs nothing for the
        # sessions that did not move.
        if self._state is None or self._state[0] != self._feeds:
            code = reader_state.fingerprint()
            try:
                kept: dict[str, Any] | None = {
                    "code": code,
                    "reader": reader_state.dump(self.reader, (self.facts, NO_FACTS)),
                    "facts": None if self.facts is None else reader_state.dump(self.facts),
                }
            except reader_state.StateError:
                kept = None
            self._state = (self._feeds, kept if code else None)
        return self._state[1]

    def _load_state(self, saved: object) -> bool:
        """Put back a state `_dump_state` made; False when there is none, it is not this
        code's, or it does not fit (the reader is then read again from the start)."""
        if not isinstance(saved, dict) or not saved.get("code"):
            return False
        if saved["code"] != reader_state.fingerprint():
            return False
        try:
            reader_state.load_into(self.reader, saved.get("reader"), keep=("facts",))
            if self.facts is not None:
                reader_state.load_into(self.facts, saved.get("facts"))
        except reader_state.StateError:
            return False
        return True

    def read_appended(
        self, until: float | None = None, clock: Callable[[], float] = time.monotonic
    ) -> list[UsageUpdate]:
        """Usage updates from the bytes appended since the last call, read slice by slice until
        the end or until `clock()` passes `until` (None: to the end).

        Raises FileNotFoundError when the file is gone, `RefusedFile` when it is no longer a
        regular file, OSError when it cannot be read.
        """
        # One stat decides; the file is opened only when there is something to read, which
        # also spares the watcher the open/close events every hook would otherwise cause.
        info = os.stat(self.path)
        if (
            (info.st_dev, info.st_ino) == self.identity
            and info.st_size == self.offset
            and info.st_mtime_ns == self._mtime_ns
            and self.offset >= self._skip_to
        ):
            self.size = info.st_size
            return []
        # A path others can write to: only a regular file is opened (`ctxd.untrusted`), and it
        # is read up to the size its descriptor says, in slices, so neither a FIFO nor a device
        # put in its place can hold or fill the daemon.
        fd, info = open_regular(self.path, info)
        try:
            identity = (info.st_dev, info.st_ino)
            if (
                identity != self.identity
                or info.st_size < max(self.offset, self._skip_to)
                or not self._same_before_offset(fd)
            ):
                # Replaced, truncated or rewritten (rotation, copy-truncate): what we knew is void.
                self._start_over(identity)
            self.size = info.st_size
            self._mtime_ns = info.st_mtime_ns
            return self._read(fd, until, clock)
        finally:
            os.close(fd)

    def _read(self, fd: int, until: float | None, clock: Callable[[], float]) -> list[UsageUpdate]:
        updates: list[UsageUpdate] = []
        while self.offset < self.size:
            end = min(self.size, self.offset + CHUNK)
            skipping = self.offset < self._skip_to
            if skipping:
                end = min(end, self._skip_to)
            chunk = os.pread(fd, end - self.offset, self.offset)
            if not chunk:
                break
            self.offset += len(chunk)
            self._tail = (
                chunk[-FINGERPRINT:]
                if len(chunk) >= FINGERPRINT
                else (self._tail + chunk)[-FINGERPRINT:]
            )
            fed = self.reader.feed(chunk)
            self._feeds += 1
            if not skipping:
                updates.extend(fed)
            if until is not None and clock() >= until:
                break
        return updates

    def _same_before_offset(self, fd: int) -> bool:
        if self.offset == 0 or not self._tail:
            return True
        return os.pread(fd, len(self._tail), self.offset - len(self._tail)) == self._tail

    def _start_over(self, identity: tuple[int, int]) -> None:
        self.reader.reset()
        self._feeds += 1
        self.offset = 0
        self.identity = identity
        self._tail = b""
        self._skip_to, self._skip_tail = 0, b""
