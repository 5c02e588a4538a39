"""The interface of a session store: one database that holds many sessions' figures.

Most agents write one transcript file per session, which ctxd follows by appended bytes
(`ctxd.agents.reader`). An agent that keeps every session in one database instead gives a
`SessionStore`: where the database is, the files whose change means it changed (the database and
its write-ahead log), and a reader that returns, per poll, the usage of the rows written since
the last poll, each with the session it belongs to. A reader opens the database read-only and
never makes the agent wait; its read position is plain data (`position`), kept in the daemon's
snapshot, so a restart reads on from there. `ctxd replay` and `ctxd handoff` take a copy of the
database as they take a transcript file (`recognises`), and a session's digest is read from it
whole (`digest`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from ctxd.core.digest import Digest
from ctxd.core.events import UsageUpdate

__all__ = ["OpenStoreReader", "SessionStore", "StoreReader", "StoreUpdate"]


@dataclass(frozen=True, slots=True)
class StoreUpdate:
    """One session's usage as of one row of the store."""

    session_id: str
    update: UsageUpdate
    #: The session that started this one (a subagent's parent), if any.
    parent_id: str | None = None
    cwd: str | None = None


class StoreReader(Protocol):
    def read(
        self, until: float | None = None, clock: Callable[[], float] = time.monotonic
    ) -> list[StoreUpdate]:
        """The updates of the rows written since the last read, oldest first, read batch by
        batch until the end or until `clock()` passes `until`. Raises OSError when the store
        cannot be read (missing, locked, not the agent's)."""
        ...

    @property
    def behind(self) -> bool:
        """Whether the last read stopped at its deadline with rows left."""
        ...

    def position(self) -> dict[str, Any]:
        """Where reading stands, as plain values (what `open` takes back)."""
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
