"""OpenCode's database, read incrementally: the `step-finish` parts written since the last read.

Verified against OpenCode 1.18.33 (tests/data/transcripts/opencode-1.18.33/): every session is in
one SQLite database, `$XDG_DATA_HOME/opencode/opencode.db` (WAL), `OPENCODE_DB` overriding it.
Each model call ends in a `step-finish` part (table `part`, JSON in `data`) with its `tokens`; its
message (table `message`) names the model (`modelID`) and says whether it is a compaction: what
they make is `usage.step_usage` (the context the next request carries is input + cache.read +
cache.write: the mock's prompt_tokens, exactly), shared with the reader of `opencode export`'s
JSON (`export`). A session started by another (a subagent's) names it in `session.parent_id`.

The reader keeps the part table's rowid it read up to: a poll asks only for rows after it (a
walk of the rowid b-tree from there, so its cost is what is new, not the file), in batches, and
opens the database read-only (`mode=ro`) with no busy wait: OpenCode's writes are never delayed,
and a poll that finds the database locked raises OSError and is retried at the next change.
Each SELECT is its own short read transaction, so a checkpoint of the WAL is never held up for
long. When the newest parts are deleted (OpenCode reverting the last turns), SQLite gives their
rowids to the next parts: a read that finds the largest rowid below its position reads on from
there.
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import orjson

from ctxd.agents.opencode.usage import step_usage
from ctxd.agents.store import StoreUpdate
from ctxd.paths import home
from ctxd.untrusted import read_head, stat_regular

__all__ = ["BATCH", "OpenCodeStore", "connect", "database_path", "recognises"]

#: Parts (rowids) scanned per query: a poll checks its deadline between batches.
BATCH = 500

_NEW_PARTS = (
    "SELECT p.id, p.session_id, p.time_created, p.data, m.data"
    " FROM part p JOIN message m ON m.id = p.message_id"
    " WHERE p.rowid > ? AND p.rowid <= ? AND p.data LIKE '%\"step-finish\"%'"
    " ORDER BY p.rowid"
)
_LAST_PART = "SELECT coalesce(max(rowid), 0) FROM part"
_SESSION = "SELECT parent_id, directory FROM session WHERE id = ?"
#: The tables a database of OpenCode's holds (and this reader reads).
_TABLES = frozenset({"session", "message", "part"})
_SQLITE_MAGIC = b"SQLite format 3\x00"


def database_path(env: Mapping[str, str]) -> Path:
    """`OPENCODE_DB` if set (a bare name lies in the data directory), else
    `$XDG_DATA_HOME/opencode/opencode.db` (`~/.local/share` without it)."""
    data = Path(env.get("XDG_DATA_HOME") or home(env) / ".local" / "share") / "opencode"
    named = env.get("OPENCODE_DB")
    if named:
        return Path(named) if os.path.isabs(named) else data / named
    return data / "opencode.db"


def connect(path: str) -> sqlite3.Connection:
    """The database at `path`, read-only. timeout=0: never wait for OpenCode's lock (a locked
    database is an error, retried later); autocommit: no read transaction held open, so a
    checkpoint of the WAL is never held up for long. Raises sqlite3.Error; `RefusedFile` (an
    OSError) when the database, or its WAL or shared-memory file, is there but is not a regular
    file: SQLite opens them by name and would wait forever on a FIFO, or read a device."""
    stat_regular(path)
    for companion in (path + "-wal", path + "-shm"):
        if os.path.lexists(companion):
            stat_regular(companion)
    return sqlite3.connect(
        f"{Path(path).absolute().as_uri()}?mode=ro", uri=True, timeout=0, isolation_level=None
    )


def recognises(path: str) -> bool:
    """The file at `path` is a SQLite database with OpenCode's session, message and part
    tables (a copy anywhere: what `ctxd replay` is handed)."""
    try:
        if read_head(path, len(_SQLITE_MAGIC)) != _SQLITE_MAGIC:
            return False
        db = connect(path)
    except (OSError, sqlite3.Error):
        return False
    try:
        names = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    except sqlite3.Error:
        return False
    finally:
        db.close()
    return names >= _TABLES


class OpenCodeStore:
    """A reader of one OpenCode database (see the module docstring). Not thread-safe."""

    def __init__(self, path: str, position: Mapping[str, Any] | None = None) -> None:
        self.path = path
        self.rowid = int((position or {}).get("rowid", 0))
        self.behind = False
        self._db: sqlite3.Connection | None = None
        self._identity: tuple[int, int] | None = None
        self._sessions: dict[str, tuple[str | None, str | None]] = {}

    def position(self) -> dict[str, Any]:
        return {"rowid": self.rowid}

    def read(
        self, until: float | None = None, clock: Callable[[], float] = time.monotonic
    ) -> list[StoreUpdate]:
        db = self._connect()
        updates: list[StoreUpdate] = []
        try:
            (last,) = db.execute(_LAST_PART).fetchone()
            if last < self.rowid:
                # The newest parts were deleted (OpenCode's revert of the last turns): SQLite
                # hands their rowids out again, to the parts written next.
                self.rowid = last
            while True:
                # A batch is a span of rowids, not of matches: what a query costs is the parts
                # it scans, whichever they are. Each part is looked at once.
                upto = min(last, self.rowid + BATCH)
                rows = db.execute(_NEW_PARTS, (self.rowid, upto)).fetchall()
                for part_id, session_id, created, part, message in rows:
                    update = self._update(part_id, session_id, created, part, message)
                    if update is not None:
                        updates.append(update)
                self.rowid = upto
                self.behind = upto < last
                if not self.behind or (until is not None and clock() >= until):
                    return updates
        except sqlite3.Error as exc:
            self.close()
            raise OSError(f"{self.path}: {exc}") from None

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None

    # ----------------------------------------------------------------- internals

    def _connect(self) -> sqlite3.Connection:
        info = os.stat(self.path)  # FileNotFoundError when it is gone
        identity = (info.st_dev, info.st_ino)
        if self._db is not None and identity == self._identity:
            return self._db
        self.close()
        if self._identity is not None and identity != self._identity:
            self.rowid = 0  # another database at that path: read it from the start
            self._sessions.clear()
        try:
            db = connect(self.path)
        except sqlite3.Error as exc:
            raise OSError(f"{self.path}: {exc}") from None
        self._db, self._identity = db, identity
        return db

    def _session(self, session_id: str) -> tuple[str | None, str | None]:
        known = self._sessions.get(session_id)
        if known is None:
            assert self._db is not None
            row = self._db.execute(_SESSION, (session_id,)).fetchone()
            known = (row[0], row[1]) if row else (None, None)
            self._sessions[session_id] = known
        return known

    def _update(
        self, part_id: str, session_id: str, created: int, part: str, message: str
    ) -> StoreUpdate | None:
        try:
            step, info = orjson.loads(part), orjson.loads(message)
        except orjson.JSONDecodeError:
            return None
        at = created / 1000 if isinstance(created, int) else None
        update = step_usage(step, info, part_id, at)
        if update is None:
            return None
        parent, cwd = self._session(session_id)
        return StoreUpdate(session_id, update, parent_id=parent, cwd=cwd)
