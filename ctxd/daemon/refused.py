"""The files the daemon refused to read, kept to be named in `status` and `doctor`.

A file read on an agent's behalf that is not a regular file, is too big, or cannot be read
(`ctxd.untrusted`) gives nothing, and the daemon carries on without it; but a user whose
settings seem ignored must be able to see why. Each refusal is kept with the stamp of the file
it was made for (what `stat` said of it): the same file is not tried again, nor logged again,
until its stamp changes, so a FIFO met on every hook costs one `stat` and one WARNING line in
all. At most MAX_KEPT are kept, the oldest dropped first: paths come from hook payloads, and a
flood of new ones must not grow the daemon.
"""

from __future__ import annotations

import errno
import logging
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass

from ctxd.untrusted import RefusedFile, why

__all__ = ["MAX_KEPT", "Refusal", "RefusedFiles", "reason_of"]

logger = logging.getLogger(__name__)

MAX_KEPT = 256


@dataclass(frozen=True, slots=True)
class Refusal:
    """One file ctxd did not read, and why."""

    path: str
    #: What was wrong, in words ("not a regular file (a FIFO)", "larger than 4 MiB", ...).
    reason: str
    #: What the file was read as ("Claude Code settings", "transcript").
    what: str
    #: When it was first refused in this version (epoch seconds).
    since: float
    #: The session whose hook named it, for a file named by one (a transcript): its key as a
    #: session with no transcript has it (`core.session.session_key(agent, id, None)`).
    session: str | None = None

    def as_json(self) -> dict[str, object]:
        return {
            "path": self.path,
            "reason": self.reason,
            "what": self.what,
            "since": self.since,
            "session": self.session,
        }


def reason_of(exc: OSError) -> str:
    """An error met reading a file, in the words a refusal keeps."""
    return exc.reason if isinstance(exc, RefusedFile) else f"cannot read it: {why(exc)}"


def is_absence(exc: OSError) -> bool:
    """Whether `exc` only says there is no file there (which is no refusal)."""
    return isinstance(exc, FileNotFoundError) or exc.errno == errno.ENOTDIR


class RefusedFiles:
    """The refusals in force, by path (see the module docstring)."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self.clock = clock
        self._kept: dict[str, tuple[Hashable, Refusal]] = {}
        self._by_session: dict[str, list[Refusal]] | None = None  # built when asked

    def note(
        self, path: str, stamp: Hashable, reason: str, what: str, session: str | None = None
    ) -> None:
        """`path`, as it is at `stamp`, was not read for `reason`: logged at WARNING the first
        time for this stamp, and kept (`session`: see `Refusal.session`)."""
        known = self._kept.get(path)
        if known is not None and known[0] == stamp and known[1].reason == reason:
            return
        logger.warning("not reading %s (%s): %s", path, what, reason)
        self._kept.pop(path, None)
        self._kept[path] = (stamp, Refusal(path, reason, what, self.clock(), session))
        while len(self._kept) > MAX_KEPT:
            del self._kept[next(iter(self._kept))]
        self._by_session = None

    def refused_at(self, path: str, stamp: Hashable) -> bool:
        """Whether `path` was refused as it is at `stamp` (then it is not tried again)."""
        known = self._kept.get(path)
        return known is not None and known[0] == stamp

    def clear(self, path: str) -> None:
        """`path` was read, or is gone: no longer refused."""
        if self._kept.pop(path, None) is not None:
            logger.info("%s is read again", path)
            self._by_session = None

    def get(self, path: str) -> Refusal | None:
        known = self._kept.get(path)
        return None if known is None else known[1]

    def named_by(self, session: str) -> list[Refusal]:
        """The refusals of files the hooks of session `session` (see `Refusal.session`) named."""
        if self._by_session is None:
            self._by_session = {}
            for _, refusal in self._kept.values():
                if refusal.session is not None:
                    self._by_session.setdefault(refusal.session, []).append(refusal)
        return list(self._by_session.get(session, ()))

    def __len__(self) -> int:
        return len(self._kept)

    def as_json(self) -> list[dict[str, object]]:
        """Every refusal in force, oldest first, as plain values (the status document's)."""
        return [refusal.as_json() for _, refusal in self._kept.values()]
