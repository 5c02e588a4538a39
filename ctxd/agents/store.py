"""The interface of a session store: one database that holds many sessions' figures.

Most agents write one transcript file per session, which ctxd follows by appended bytes
(`ctxd.agents.reader`). An agent that keeps every session in one database instead gives a
`SessionStore`: where the database is, the files whose change means it changed (the database and
its write-ahead log), and a reader that returns, per poll, the usage of the rows written since
the last poll, each with the session it belongs to. A reader opens the database read-only and
never makes the agent wait; its read position is plain data (`position`), kept in the daemon's
snapshot, so a restart reads on from there; it is tied to the database it was read from (a
store replaced or restored under the reader is checked, and read again where it differs, its
updates `replayed`). The reader keeps each session's digest as the rows arrive (`digest` on the
reader: a hook never reads a session whole). `ctxd replay` and `ctxd handoff` take a copy of
the database as they take a transcript file (`recognises`), and a session's digest is read from
it whole (`SessionStore.digest`).

A store that cannot be read as the agent's (not a database, a schema ctxd does not know) raises
`StoreProblem`, which the daemon says at WARNING and in `status` and `doctor`; any other OSError
(locked, gone) is a moment's, retried at the next change.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from ctxd.core.digest import Digest
from ctxd.core.events import UsageUpdate

__all__ = ["OpenStoreReader", "SessionStore", "StoreProblem", "StoreReader", "StoreUpdate"]


class StoreProblem(OSError):
    """The store cannot be read as the agent's until someone changes it (not a database, a
    table or column missing): figures stay frozen until then."""


@dataclass(frozen=True, slots=True)
class StoreUpdate:
    """One session's usage as of one row of the store."""

    session_id: str
    update: UsageUpdate
    #: The session that started this one (a subagent's parent), if any.
    parent_id: str | None = None
    cwd: str | None = None
    #: Read again after the store was found replaced: the daemon folds it only when it is
    #: newer than the session's last update it knows (its time, then its `turn_id`).
    replayed: bool = False
    #: When the session was last active by the store's own record (wall-clock seconds), as of
    #: the reader's first meeting it: a session found in the history is as old as that.
    active_at: float | None = None


class StoreReader(Protocol):
    def read(
        self,
        until: float | None = None,
        clock: Callable[[], float] = time.monotonic,
        since: float | None = None,
    ) -> list[StoreUpdate]:
        """The updates of the rows written since the last read, oldest first, read batch by
        batch until the end or until `clock()` passes `until`. With `since` (a wall-clock time),
        a read from the store's start (no position) passes over the sessions last active before
        it, as the daemon passes over transcripts idle that long; their later rows are read as
        they come. Raises OSError when the store cannot be read (missing, locked, not the
        agent's)."""
        ...

    @property
    def behind(self) -> bool:
        """Whether the last read stopped at its deadline with rows left."""
        ...

    def position(self) -> dict[str, Any]:
        """Where reading stands, as plain values (what `open` takes back)."""
        ...

    def digest(self, session_id: str) -> Digest | None:
        """Session `session_id`'s digest as of the rows read (None: no rows of it kept)."""
        ...

    def forget(self, session_id: str) -> None:
        """Drop what is kept of session `session_id`."""
        ...


class OpenStoreReader(Protocol):
    """A reader of the store at `path`, starting after `position` (None: from the start)."""

    def __call__(self, path: str, position: Mapping[str, Any] | None = None, /) -> StoreReader: ...


def _never(path: str) -> bool:
    return False


@dataclass(frozen=True, slots=True)
class SessionStore:
    """An agent that keeps all its sessions in one database."""

    #: The database, in this environment.
    path: Callable[[Mapping[str, str]], Path]
    open: OpenStoreReader
    #: Suffixes of the files whose change means the store changed ("" the database itself).
    changed_by: tuple[str, ...] = ("", "-wal")
    #: The file at a path is such a database (any path: a copy handed to `ctxd replay`).
    recognises: Callable[[str], bool] = _never
    #: (database, session id) -> that session's digest, read whole; None: no digest is kept.
    #: Raises OSError when the database cannot be read.
    digest: Callable[[str, str], Digest] | None = None
    #: The database at a path -> why it cannot be read as the agent's (None: it can, or there
    #: is none): what `ctxd doctor` says when no daemon answers.
    problem: Callable[[str], str | None] | None = None
