"""OpenCode's database, read incrementally: each session's figures and digest from the parts
written since the last read.

Verified against OpenCode 1.18.33 (tests/data/transcripts/opencode-1.18.33/): every session is in
one SQLite database, `$XDG_DATA_HOME/opencode/opencode.db` (WAL), `OPENCODE_DB` overriding it.
Each model call is one assistant message whose parts run from a `step-start` to a `step-finish`
(table `part`, JSON in `data`) with its `tokens`; its message (table `message`) names the model
(`modelID`) and says whether it is a compaction: what they make is `usage.step_usage` (the
context the next request carries is input + cache.read + cache.write: the mock's prompt_tokens,
exactly), shared with the reader of `opencode export`'s JSON (`export`). A session started by
another (a subagent's) names it in `session.parent_id`.

The reader keeps the part table's rowid it read up to: a poll asks only for rows after it (a
walk of the rowid b-tree from there, so its cost is what is new, not the file), checking its
deadline between rows, and opens the database read-only (`mode=ro`) with no busy wait:
OpenCode's writes are never delayed, and a poll that finds the database locked raises OSError
and is retried at the next change. When the newest parts are deleted (OpenCode reverting the
last turns), SQLite gives their rowids to the next parts: a read that finds the largest rowid
below its position reads on from there.

Each session's digest (`OpenCodeFacts`) is folded as its rows arrive, so that a hook never
reads a session whole: a user message's parts as they are read (OpenCode writes them whole), an
assistant message's once its step's `step-finish` is (OpenCode rewrites a text or tool part while
it streams; by its step's end each is final), read again then by message (an index). At most
MAX_DIGESTS sessions' digests are kept, the least recently written dropped first.

A position is tied to the database it was read from: the file's identity (device, inode) and two of
its parts' ids, the first one and the one at the position (`Position`). A database found with the
same parts under another inode (a backup restored) is read on from the position; one whose parts
differ (another copied over it, or replaced while ctxd was down), or a position saved without them
or without the digests of this code (an older snapshot), is read again from its first row, the
digests rebuilt by that pass. A read during which the file changed outside SQLite (copied over in
place: the same inode, so nothing above tells) may have seen pages of both databases: its rows are
dropped, and the next read starts from the first row. Each update of a first pass after such a check
is marked `replayed`: the daemon folds only those newer than what it knows of the session (its last
row's time and id), so that nothing is counted twice (the sessions may also know rows past a
snapshot's position, from the journal) and no session is skipped.

A database of another shape (a table or column renamed by a later OpenCode) is refused with
`StoreProblem` before anything is read, naming what is missing.
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ctxd.agents import state as reader_state
from ctxd.agents.opencode_family.digest import OpenCodeFacts, decoded_part, fold_part
from ctxd.agents.opencode_family.family import Family
from ctxd.agents.opencode_family.usage import step_usage
from ctxd.agents.store import StoreProblem, StoreUpdate
from ctxd.core.digest import Digest
from ctxd.paths import home
from ctxd.untrusted import read_head, stat_regular

__all__ = [
    "MAX_DIGESTS",
    "OpenCodeStore",
    "connect",
    "database_path",
    "problem",
    "recognises",
]

#: Sessions whose digest is kept (each is bounded: `ctxd.core.digest.Limits`).
MAX_DIGESTS = 256

# An assistant message's parts are folded at its step's end, read again then: SQLite hands over
# no other part of one (most of the bytes: tool outputs), by a guess at the message's role that
# the decoded message corrects (`_take` fetches a part the guess left out).
_NEW_PARTS = (
    "SELECT p.rowid, p.id, p.session_id, p.message_id, p.time_created,"
    ' CASE WHEN instr(m.data, \'"role":"assistant"\') > 0'
    " AND instr(p.data, '\"step-finish\"') = 0 THEN NULL ELSE p.data END, m.data"
    " FROM part p JOIN message m ON m.id = p.message_id WHERE p.rowid > ? ORDER BY p.rowid"
)
#: The same rows up to ?2 (the last when a pass from the first row began) of the sessions that
#: can be live only: active (the session, or its last message) since ?3 (ms). By the index of
#: parts by session: the other sessions' rows are not walked.
_LIVE_PARTS = _NEW_PARTS.replace(
    " WHERE p.rowid > ? ",
    " WHERE p.rowid > ?1 AND p.rowid <= ?2 AND p.session_id IN (SELECT s.id FROM session s"
    " WHERE s.time_updated >= ?3"
    " OR (SELECT max(l.time_created) FROM message l WHERE l.session_id = s.id) >= ?3) ",
)
_PART_DATA = "SELECT data FROM part WHERE rowid = ?"
_STEP_PARTS = "SELECT data FROM part WHERE message_id = ? AND rowid < ? ORDER BY rowid"
_LAST_PART = "SELECT coalesce(max(rowid), 0) FROM part"
_FIRST_PART = "SELECT id FROM part ORDER BY rowid LIMIT 1"
_PART_AT = "SELECT id FROM part WHERE rowid = ?"
_SESSION = "SELECT parent_id, directory, time_updated FROM session WHERE id = ?"
#: The tables and columns of OpenCode's this reader reads.
_SCHEMA = {
    "session": ("id", "parent_id", "directory", "time_updated"),
    "message": ("id", "session_id", "time_created", "data"),
    "part": ("id", "message_id", "session_id", "time_created", "data"),
}
_SQLITE_MAGIC = b"SQLite format 3\x00"
#: sqlite3 errors that say "later", not "never": OpenCode holds its lock for a moment.
_TRANSIENT = ("locked", "busy")


def database_path(family: Family, env: Mapping[str, str]) -> Path:
    """The family member's `*_DB` variable if set (a bare name lies in the data directory), else
    `$XDG_DATA_HOME/<folder>/<database>` (`~/.local/share` without it): OpenCode's
    `opencode/opencode.db`, `OPENCODE_DB`; Kilo's `kilo/kilo.db`, `KILO_DB`."""
    data = Path(env.get("XDG_DATA_HOME") or home(env) / ".local" / "share") / family.folder
    named = env.get(family.database_env)
    if named:
        return Path(named) if os.path.isabs(named) else data / named
    return data / family.database


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


def recognises(path: str, own_tables: tuple[str, ...] = ()) -> bool:
    """The file at `path` is a SQLite database with OpenCode's session, message and part
    tables, and `own_tables` too (a fork's: a copy anywhere is what `ctxd replay` is handed)."""
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
    return names >= {*_SCHEMA, *own_tables}


def problem(path: str) -> str | None:
    """Why the database at `path` cannot be read as OpenCode's (None: it can, or there is
    none): what `ctxd doctor` says without a daemon."""
    if not os.path.lexists(path):
        return None
    try:
        db = connect(path)
    except (OSError, sqlite3.Error) as exc:
        return str(exc)
    try:
        _check_schema(db)
    except (sqlite3.Error, StoreProblem) as exc:
        return str(exc)
    finally:
        db.close()
    return None


def _check_schema(db: sqlite3.Connection) -> None:
    """StoreProblem naming the tables and columns this reader needs that `db` lacks."""
    missing = []
    for table, columns in _SCHEMA.items():
        have = {row[1] for row in db.execute(f"PRAGMA table_info({table})")}
        if not have:
            missing.append(f"table {table}")
        else:
            missing += [f"{table}.{c}" for c in columns if c not in have]
    if missing:
        raise StoreProblem(f"not a database of a known OpenCode: no {', '.join(missing)}")


@dataclass(frozen=True, slots=True)
class Position:
    """Where reading stands, and what it was read from (see the module docstring)."""

    rowid: int = 0
    #: The id of the part at `rowid` (None at 0, or a position saved without it).
    part: str | None = None
    #: The id of the database's first part.
    first: str | None = None
    #: (st_dev, st_ino) of the database file.
    identity: tuple[int, int] | None = None

    @classmethod
    def of(cls, saved: Mapping[str, Any] | None) -> Position:
        saved = saved or {}
        rowid, identity = saved.get("rowid"), saved.get("identity")
        part, first = saved.get("part"), saved.get("first")
        return cls(
            rowid if type(rowid) is int and rowid > 0 else 0,
            part if isinstance(part, str) else None,
            first if isinstance(first, str) else None,
            (identity[0], identity[1])
            if isinstance(identity, list | tuple)
            and len(identity) == 2
            and all(type(n) is int for n in identity)
            else None,
        )

    @property
    def verifiable(self) -> bool:
        """Whether the database can be checked against it (a position of 0 needs no check)."""
        return self.rowid == 0 or (self.part is not None and self.first is not None)


class OpenCodeStore:
    """A reader of one OpenCode database (see the module docstring). Not thread-safe."""

    def __init__(self, path: str, position: Mapping[str, Any] | None = None) -> None:
        self.path = path
        saved = Position.of(position)
        self.rowid = saved.rowid
        self.behind = False
        #: The position the database must be checked against before reading on from it.
        self._saved: Position | None = saved if saved.rowid else None
        self._part: str | None = saved.part  # the id of the part at `rowid`
        self._first: str | None = saved.first
        self._db: sqlite3.Connection | None = None
        self._identity: tuple[int, int] | None = None
        self._log: int | None = None  # the inode of the write-ahead log it was connected with
        #: Rows up to this rowid are read again (a replaced database): their updates replayed.
        self._replay_until = 0
        self._sessions: dict[str, tuple[str | None, str | None, float | None]] = {}
        self._message: tuple[str, dict[str, Any] | None] | None = None
        #: Session id -> its digest, the least recently written first.
        self._facts: dict[str, OpenCodeFacts] = {}
        self._dumped: dict[str, dict[str, Any]] = {}  # session id -> its digest's dump
        #: The digests hold every row up to the position (not while a pass rebuilds them): only
        #: then are they worth a snapshot.
        self._digests_whole = True
        #: The last read overlapped a write outside SQLite: the next is read from the first row.
        self._torn = False
        #: The files' signature when the database was found unreadable, and why.
        self._broken: tuple[tuple[int, ...], str] | None = None
        #: A pass from the first row given `since` reads, up to this rowid (the last when it
        #: began), only the rows of sessions active since `_live_since_ms`: a history's other
        #: sessions are ended ones, and one that moves again is read from its new rows on.
        self._live_edge = 0
        self._live_since_ms = 0
        #: Rows fetched from the part table, in all (what a read costs).
        self.rows_read = 0
        if saved.rowid and not self._load_digests(position or {}):
            # Without the digests of the rows before the position (an older snapshot, another
            # version's), they would hold the newest rows only: rebuild them with one pass.
            self._saved = Position(saved.rowid)
            self._digests_whole = False

    def position(self) -> dict[str, Any]:
        saved = self._saved
        if saved is None or not saved.rowid:
            saved = Position(self.rowid, self._part, self._first, self._identity)
        # Where it stood, until the database is checked against it.
        position: dict[str, Any] = {
            "rowid": saved.rowid,
            "part": saved.part,
            "first": saved.first,
            "identity": saved.identity,
        }
        code = reader_state.fingerprint()
        if code and self._digests_whole:
            position["digests"] = {"code": code, "sessions": self._dump_digests()}
        return position

    def digest(self, session_id: str) -> Digest | None:
        """The digest of session `session_id` as of the rows read (None: none of its rows)."""
        facts = self._facts.get(session_id)
        return None if facts is None else facts.digest

    def forget(self, session_id: str) -> None:
        """Drop what is kept of session `session_id` (the daemon forgot it)."""
        self._facts.pop(session_id, None)
        self._dumped.pop(session_id, None)
        self._sessions.pop(session_id, None)

    def read(
        self,
        until: float | None = None,
        clock: Callable[[], float] = time.monotonic,
        since: float | None = None,
    ) -> list[StoreUpdate]:
        # A database found unreadable is not opened again until its files change: every hook
        # of the agent polls it.
        signature = _signature(self.path)
        if self._broken is not None and self._broken[0] == signature:
            raise StoreProblem(self._broken[1])
        try:
            updates = self._read(signature, until, clock, since)
        except StoreProblem as exc:
            self._broken = (signature, str(exc))
            raise
        self._broken = None
        if _written_outside_sqlite(signature, _signature(self.path)):
            # Pages of two databases may have been read as one (a file copied over this one in
            # place): what was read is dropped, and the next read starts from the first row.
            self._torn = True
            self.close()
            return []
        return updates

    def _read(
        self,
        signature: tuple[int, ...],
        until: float | None,
        clock: Callable[[], float],
        since: float | None,
    ) -> list[StoreUpdate]:
        db = self._connect(signature)
        try:
            (last,) = db.execute(_LAST_PART).fetchone()
            self._verify(db, last)
            if self.rowid == 0:  # a pass from the first row: a first start, a database replaced
                self._live_edge = last if since is not None else 0
                self._live_since_ms = int((since or 0) * 1000)
            updates = self._read_rows(db, until, clock)
            self.behind = self.rowid < last
            if self.rowid >= self._replay_until:
                self._replay_until = 0
            if not self.behind:
                self._digests_whole = True
            if self._first is None and self.rowid:
                (self._first,) = db.execute(_FIRST_PART).fetchone() or (None,)
            return updates
        except sqlite3.Error as exc:
            self.close()
            if any(word in str(exc) for word in _TRANSIENT):
                raise OSError(f"{self.path}: {exc}") from None
            raise StoreProblem(f"{self.path}: {exc}") from None

    def _verify(self, db: sqlite3.Connection, last: int) -> None:
        """Make sure the rows up to the position are the ones read (see the module docstring)."""
        if self._torn:
            self._torn = False
            self._replay(last)
            return
        if self._saved is not None:
            self._check(db, self._saved, last)
            self._saved = None
        if last < self.rowid:
            (first,) = db.execute(_FIRST_PART).fetchone() or (None,)
            if first != self._first:  # not a revert: another database written over this one
                self._replay(last)
                return
            # The newest parts were deleted (OpenCode's revert of the last turns): SQLite
            # hands their rowids out again, to the parts written next.
            self._move_to(db, last)
        elif self.rowid and self._part is not None:
            (found,) = db.execute(_PART_AT, (self.rowid,)).fetchone() or (None,)
            if found != self._part:
                # The last turns were reverted and written again past the position, or
                # another database was written over this one: what was read may have
                # changed, so it is read again.
                self._replay(last)

    def _read_rows(
        self, db: sqlite3.Connection, until: float | None, clock: Callable[[], float]
    ) -> list[StoreUpdate]:
        updates: list[StoreUpdate] = []
        if self.rowid < self._live_edge:
            cursor = db.execute(_LIVE_PARTS, (self.rowid, self._live_edge, self._live_since_ms))
        else:
            cursor = db.execute(_NEW_PARTS, (self.rowid,))
        try:
            for rowid, part_id, session_id, message_id, created, part, message in cursor:
                self.rows_read += 1
                update = self._take(
                    db, rowid, session_id, message_id, part_id, created, part, message
                )
                if update is not None:
                    if rowid <= self._replay_until:
                        update = replace(update, replayed=True)
                    updates.append(update)
                self.rowid, self._part = rowid, part_id
                if until is not None and clock() >= until:
                    return updates
            if self.rowid < self._live_edge:  # the rows passed over last: on from after them
                self._move_to(db, self._live_edge)
        finally:
            cursor.close()
        return updates

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None

    # ----------------------------------------------------------------- identity

    def _connect(self, signature: tuple[int, ...]) -> sqlite3.Connection:
        identity = (signature[0], signature[1])
        log = signature[4] if len(signature) > 4 else None
        if self._db is not None and identity == self._identity and log == self._log:
            return self._db
        # A log gone or another in its place (files deleted beside the database): a connection
        # kept would go on trusting the pages it read through the old one.
        self.close()
        if self._identity is not None and identity != self._identity and self._saved is None:
            # Another file at that path: checked against where reading stood before reading on.
            self._saved = Position(self.rowid, self._part, self._first, self._identity)
        try:
            db = connect(self.path)
        except sqlite3.Error as exc:
            raise StoreProblem(f"{self.path}: {exc}") from None
        try:
            _check_schema(db)
        except (sqlite3.Error, StoreProblem) as exc:
            db.close()
            raise StoreProblem(f"{self.path}: {exc}") from None
        self._db, self._identity, self._log = db, identity, log
        return db

    def _check(self, db: sqlite3.Connection, saved: Position, last: int) -> None:
        """Read on from `saved` if this database holds the parts it was read from (the same
        file, or a copy of it restored), else read it again from its first row."""
        if not saved.verifiable:
            self._replay(last)
            return
        if saved.rowid == 0:
            return
        (first,) = db.execute(_FIRST_PART).fetchone() or (None,)
        (at,) = db.execute(_PART_AT, (saved.rowid,)).fetchone() or (None,)
        # Parts gone past the position are as much a change as others in their place: this
        # file may hold some of another's (a restored backup's older rows, another copy of
        # the same start), which only a read from the first row tells apart.
        if first == saved.first and at == saved.part:
            self.rowid, self._part, self._first = saved.rowid, saved.part, saved.first
            # The sessions may know rows past the position (an answer journalled after the
            # snapshot that saved it, before a crash): what follows is folded as news only.
            self._replay_until = last
            return
        self._replay(last)

    def _replay(self, last: int) -> None:
        self.rowid, self._part, self._first = 0, None, None
        self._replay_until = last
        self._digests_whole = False
        self._facts.clear()
        self._dumped.clear()
        self._sessions.clear()
        self._message = None

    def _move_to(self, db: sqlite3.Connection, rowid: int) -> None:
        self.rowid = rowid
        (self._part,) = db.execute(_PART_AT, (rowid,)).fetchone() or (None,)

    # ----------------------------------------------------------------- rows

    def _session(
        self, db: sqlite3.Connection, session_id: str
    ) -> tuple[str | None, str | None, float | None]:
        """The session's parent, folder and `time_updated` (seconds), as first read."""
        known = self._sessions.get(session_id)
        if known is None:
            row = db.execute(_SESSION, (session_id,)).fetchone()
            known = (row[0], row[1], _seconds(row[2])) if row else (None, None, None)
            self._sessions[session_id] = known
        return known

    def _info(self, message_id: str, message: object) -> dict[str, Any] | None:
        # A message's parts come one after the other: its JSON is decoded once for them all.
        if self._message is None or self._message[0] != message_id:
            value = decoded_part(message)
            self._message = (message_id, value)
        return self._message[1]

    def _take(
        self,
        db: sqlite3.Connection,
        rowid: int,
        session_id: object,
        message_id: object,
        part_id: object,
        created: object,
        part: object,
        message: object,
    ) -> StoreUpdate | None:
        if not isinstance(session_id, str) or not isinstance(message_id, str):
            return None
        info = self._info(message_id, message)
        if info is None:
            return None
        role = info.get("role")
        if role != "assistant":
            if part is None:
                (part,) = db.execute(_PART_DATA, (rowid,)).fetchone() or (None,)
            decoded = decoded_part(part)
            if decoded is not None:
                fold_part(self._facts_of(session_id), role, decoded)
            return None
        if not isinstance(part, str) or '"step-finish"' not in part:
            return None  # folded at its step's end, in its final form
        step = decoded_part(part)
        if step is None or step.get("type") != "step-finish":
            return None
        facts = self._facts_of(session_id)
        # A compaction's summary is no answer to the user (`OpenCodeFacts`).
        as_role = "summary" if info.get("summary") is True else "assistant"
        for (data,) in _step_tail(db.execute(_STEP_PARTS, (message_id, rowid)).fetchall()):
            decoded = decoded_part(data)
            if decoded is not None:
                fold_part(facts, as_role, decoded)
        return self._update(db, part_id, session_id, created, step, info)

    def _facts_of(self, session_id: str) -> OpenCodeFacts:
        facts = self._facts.pop(session_id, None)
        if facts is None:
            facts = OpenCodeFacts()
            if len(self._facts) >= MAX_DIGESTS:
                dropped = next(iter(self._facts))
                self.forget(dropped)
        self._facts[session_id] = facts  # the most recently written last
        self._dumped.pop(session_id, None)
        return facts

    def _update(
        self,
        db: sqlite3.Connection,
        part_id: object,
        session_id: str,
        created: object,
        step: dict[str, Any],
        info: dict[str, Any],
    ) -> StoreUpdate | None:
        update = step_usage(
            step, info, part_id if isinstance(part_id, str) else None, _seconds(created)
        )
        if update is None:
            return None
        parent, cwd, active_at = self._session(db, session_id)
        return StoreUpdate(session_id, update, parent_id=parent, cwd=cwd, active_at=active_at)

    # ----------------------------------------------------------------- digests in the snapshot

    def _dump_digests(self) -> dict[str, Any]:
        for session_id, facts in self._facts.items():
            if session_id not in self._dumped:
                try:
                    self._dumped[session_id] = reader_state.dump(facts)
                except reader_state.StateError:
                    continue
        return {sid: self._dumped[sid] for sid in self._facts if sid in self._dumped}

    def _load_digests(self, saved: Mapping[str, Any]) -> bool:
        kept = saved.get("digests")
        if not isinstance(kept, dict) or kept.get("code") != reader_state.fingerprint():
            return False
        sessions = kept.get("sessions")
        if not isinstance(sessions, dict):
            return False
        for session_id, state in list(sessions.items())[-MAX_DIGESTS:]:
            facts = OpenCodeFacts()
            try:
                reader_state.load_into(facts, state)
            except reader_state.StateError:
                return False
            self._facts[str(session_id)] = facts
        return True


def _signature(path: str) -> tuple[int, ...]:
    """What changes when the database or its write-ahead log is written or replaced (the
    database's FileNotFoundError when it is gone)."""
    info = os.stat(path)
    try:
        wal = os.stat(path + "-wal")
        more: tuple[int, ...] = (wal.st_ino, wal.st_size, wal.st_mtime_ns)
    except OSError:
        more = ()
    return (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, *more)


def _written_outside_sqlite(before: tuple[int, ...], after: tuple[int, ...]) -> bool:
    """The database file changed during a read, and not under one write-ahead log there all
    along. SQLite writes a WAL database's file only by checkpoints, through a log that stays
    while a reader is connected: anything else is a write outside SQLite (another database
    copied over this one in place), which a read can see half done."""
    if before[:4] == after[:4]:
        return False
    same_log = len(before) == len(after) > 4 and before[4] == after[4]
    return not same_log


def _step_tail(rows: list[tuple[Any]]) -> list[tuple[Any]]:
    """The parts of one step: those after the message's last `step-start` (a message may hold
    more than one step; each is folded at its own end)."""
    for i in range(len(rows) - 1, -1, -1):
        data = rows[i][0]
        if isinstance(data, str) and '"step-start"' in data:
            return rows[i + 1 :]
    return rows


def _seconds(ms: object) -> float | None:
    """A time OpenCode wrote (integer milliseconds) in seconds; None for anything else."""
    return ms / 1000 if type(ms) is int else None
