"""Polling the folders the watcher could not watch (past the inotify cap), so that no session
goes stale there.

Every POLL_INTERVAL the daemon calls `Poller.poll`, which does nothing while every folder is
watched. Otherwise it costs what is live, not what is kept: one stat per followed transcript in
an unwatched folder, one stat per unwatched folder modified within the idle window (a folder's
time changes when a file is created in it), a listing of a folder that did change; the older
unwatched folders are looked at every FULL_POLL_EVERY polls only, so a new session in an old
project is listed within that.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable

from ctxd.daemon import watcher, watches
from ctxd.daemon.sessions import Sessions
from ctxd.daemon.transcripts import Transcripts
from ctxd.daemon.watches import WatchCoverage

__all__ = ["FULL_POLL_EVERY", "POLL_INTERVAL", "Poller", "live_folders"]

logger = logging.getLogger(__name__)

POLL_INTERVAL = 2.0  # seconds between polls of the unwatched folders
FULL_POLL_EVERY = 15  # polls: every 30 s the unwatched folders untouched lately are looked at too


def live_folders(sessions: Sessions) -> list[str]:
    """The folders of the transcripts of sessions not ended, newest first: the ones to watch
    before any other."""
    live = sorted(
        (s for s in sessions if s.transcript_path and s.ended_at is None),
        key=lambda s: -s.updated_at,
    )
    return [os.path.dirname(s.transcript_path) for s in live if s.transcript_path]


class Poller:
    """The unwatched folders and what polling them found; see the module docstring."""

    def __init__(
        self, transcripts: Transcripts, sessions: Sessions, idle_seconds: Callable[[], float]
    ) -> None:
        self.transcripts = transcripts
        self.sessions = sessions
        self._idle_seconds = idle_seconds
        self.coverage = WatchCoverage()
        #: Unwatched folder -> its modification time when last listed (0: never listed).
        self._folders: dict[str, int] = {}
        self._known: set[str] = set()
        self._polls = 0
        self._said = False  # the cap was logged (once, until every folder is watched again)

    @property
    def active(self) -> bool:
        return bool(self._folders)

    def cover(self, coverage: WatchCoverage) -> None:
        """What the watcher covers now. A folder newly unwatched is listed at the next poll:
        what was created in it since the watcher's own scan is found then."""
        self.coverage = coverage
        self._known |= coverage.known
        old = self._folders
        self._folders = {path: old.get(path, 0) for path in coverage.unwatched}
        if self._folders and not self._said and coverage.error is not None:
            self._said = True
            logger.warning(
                "no watcher could be opened (%s): the %d folders under the agents' roots are "
                "polled every %g s. If it says too many open files: %s",
                coverage.error,
                len(self._folders),
                POLL_INTERVAL,
                watches.instances_command(),
            )
        elif self._folders and not self._said:
            self._said = True
            logger.warning(
                "the inotify watch limit is reached (%s): %d of the %d folders under the agents' "
                "roots are watched; the other %d are polled every %g s. To watch them all: %s",
                "unknown" if coverage.limit is None else coverage.limit.describe(),
                coverage.watched,
                coverage.folders,
                len(self._folders),
                POLL_INTERVAL,
                self.fix(),
            )
        elif not self._folders and self._said and coverage.measured:
            self._said = False
            logger.info("every folder under the agents' roots is watched again")

    def fix(self) -> str:
        """The command that raises the cap enough (or the number of watchers, when none could
        be opened)."""
        if self.coverage.error is not None:
            return f"{watches.instances_command()} (if the error says too many open files)"
        return watches.raise_command(
            self.coverage.limit, self.coverage.watched + len(self._folders)
        )

    def statistics(self) -> dict[str, object]:
        """The coverage as `ctxd status` and doctor show it."""
        unwatched = len(self._folders)
        out = self.coverage.as_json()
        out.update(
            folders=self.coverage.watched + unwatched,
            unwatched=unwatched,
            poll_interval_s=POLL_INTERVAL,
            fix=self.fix() if unwatched else None,
        )
        return out

    def poll(self) -> None:
        """One poll: see the module docstring."""
        if not self._folders:
            return
        self._polls += 1
        everything = self._polls % FULL_POLL_EVERY == 0
        until = self.transcripts.deadline()
        for state in list(self.sessions):
            path = state.transcript_path
            if path and state.ended_at is None and os.path.dirname(path) in self._folders:
                self.transcripts.catch_up(path, until)  # one stat when nothing changed
        since = self.sessions.clock() - self._idle_seconds()
        since_ns = int(since * 1e9)
        for folder, seen in list(self._folders.items()):
            if seen and seen < since_ns and not everything:
                continue
            try:
                mtime = os.stat(folder).st_mtime_ns
            except OSError:
                del self._folders[folder]  # gone; a new one of that name is found by its parent
                continue
            if mtime != seen:
                self._folders[folder] = mtime
                self._list(folder, since)

    def _list(self, folder: str, since: float) -> None:
        """Follow the recent transcripts of `folder` not followed yet; a folder new to the
        poller is unwatched too (nothing watches its parent) and listed at once."""
        found: list[tuple[str, bool]] = []
        try:
            entries = list(os.scandir(folder))
        except OSError:
            return
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):
                    if entry.path not in self._known:
                        self._known.add(entry.path)
                        self._folders[entry.path] = entry.stat(follow_symlinks=False).st_mtime_ns
                        self._list(entry.path, since)
                elif (
                    watcher.wanted(entry.path)
                    and entry.path not in self.transcripts
                    and entry.stat().st_mtime >= since
                ):
                    found.append((entry.path, False))
            except OSError:
                continue
        if found:
            self.transcripts.on_file_changes(found)
