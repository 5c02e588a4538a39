"""Watching the agents' transcript roots. The only module that imports watchfiles.

`RootsWatcher` runs one recursive watchfiles watcher over the agents' transcript roots and
reports changed transcript paths; `find_transcripts` scans for them. The daemon's periodic sweep
catches what events miss.

The kernel caps the inotify watches a user holds (`fs.inotify.max_user_watches`, shared with
every other watching program), and watchfiles, told to skip folders it cannot watch, skips the
ones past the cap without a word. So the watcher measures what it got (`watches.WatchCoverage`:
the folders under the roots against those the kernel really watches) and names the others, which
the daemon then polls (`daemon/poller.py`). The folders that can hold a live
session are asked for first, so that the cap, when it bites, leaves out history.
"""

from __future__ import annotations

import logging
import math
import os
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator
from pathlib import Path

import anyio
import anyio.to_thread
from anyio.abc import TaskStatus
from watchfiles import Change
from watchfiles._rust_notify import RustNotify  # the documented Rust backend that awatch wraps

from ctxd.daemon import watches
from ctxd.daemon.watches import WatchCoverage, find_folders, measure, watch_order

__all__ = ["RootsWatcher", "find_transcripts", "open_notify", "wait_released", "wanted"]

logger = logging.getLogger(__name__)

# Tuned for tens of milliseconds from append to update (watchfiles' defaults wait 1.6 s). A batch
# is yielded after `step` ms without changes or after `debounce` ms at most; with many busy
# transcripts the quiet gap never comes, so `debounce` bounds the latency (the measurements that
# chose these values are in docs/benchmarks.md). `step` is also how often a watching thread wakes
# while changes come.
WATCH_STEP_MS = 20
WATCH_DEBOUNCE_MS = 30
# watchfiles' loop wakes every `step` ms (and takes the GIL) even when nothing happens, which is
# most of an idle daemon's CPU. After QUIET_AFTER_MS without a change the watcher waits with this
# step instead, and goes back to WATCH_STEP_MS at the first change. Hooks never wait for the
# watcher (they read the transcript themselves), so only `ctxd status` may see the first change
# after a lull late, by one to two idle steps.
IDLE_STEP_MS = 1000
QUIET_AFTER_MS = 30_000
RETRY_AFTER = 1.0  # seconds before a failed watcher is replaced
RETRY_UNWATCHED = 300.0  # seconds before trying again to set up watches that failed
RELEASE_WAIT = 0.5  # seconds a new watcher waits for the one before to give its watches back
#: What a transcript's name ends with: JSON lines, or one JSON object rewritten whole (older
#: Gemini CLI recordings).
_SUFFIXES = (".jsonl", ".json")


def find_transcripts(roots: Iterable[Path], since: float) -> Iterator[str]:
    """Paths of `*.jsonl` and `*.json` files under `roots` modified at or after `since` (epoch
    seconds): the agents' own rules (`transcript_owner`) then say which are transcripts."""
    stack = [str(root) for root in roots]
    while stack:
        try:
            entries = list(os.scandir(stack.pop()))
        except OSError:
            continue
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):
                    stack.append(entry.path)
                elif (
                    entry.name.endswith(_SUFFIXES)
                    and entry.is_file()  # a FIFO or a link to a device is no transcript
                    and entry.stat().st_mtime >= since
                ):
                    yield entry.path
            except OSError:
                continue


def wanted(path: str) -> bool:
    """Whether a file found at `path` is one the watcher would report (a transcript, a
    session store)."""
    return _transcript_filter(Change.added, path)


def _transcript_filter(change: Change, path: str) -> bool:
    # New directories too: files created in one before inotify watches it raise no event of
    # their own (a first session in a new project, Codex's new day folder), so it is scanned.
    # Session stores (one database for many sessions) change through the database or its WAL.
    return path.endswith((*_SUFFIXES, ".db", ".db-wal")) or (
        change == Change.added and os.path.isdir(path)
    )


OnChanges = Callable[[list[tuple[str, bool]]], Awaitable[None]]
OnCoverage = Callable[[WatchCoverage], None]


class RootsWatcher:
    """One recursive inotify watcher (watchfiles' Rust backend) over the agents' roots, reporting
    (path, deleted) batches of transcript changes, for as long as the set of roots is the same.

    It paces itself: WATCH_STEP_MS while changes come, IDLE_STEP_MS after `quiet_after_ms`
    without any, and fast again from the first change. The pace is only the step of each wait;
    the inotify watches stay in place, so no change is lost between waits (a watcher restarted
    to change pace would miss what happened while it was down).

    Once its watches are in place it knows what they cover (`coverage`, given to
    `on_coverage` then and whenever a new folder could not be watched); the folders of
    `live()` are asked for first.
    """

    def __init__(
        self,
        roots: Iterable[Path],
        on_changes: OnChanges,
        quiet_after_ms: int | None = None,
        *,
        live: Callable[[], Iterable[str]] = tuple,
        on_coverage: OnCoverage | None = None,
    ) -> None:
        self.roots = list(roots)
        self.on_changes = on_changes
        self.quiet_after_ms = QUIET_AFTER_MS if quiet_after_ms is None else quiet_after_ms
        self.quiet = False
        self.coverage = WatchCoverage()
        self._live = live
        self._on_coverage = on_coverage
        self._stop = anyio.Event()

    def stop(self) -> None:
        """Make `run` return (within a step)."""
        self._stop.set()

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Watch until `stop` or cancellation. Reports started (`TaskGroup.start`) once the
        watches are in place: a scan made after that misses nothing. Returns on its own after a
        failure, for the owner to scan and start a new one."""
        await wait_released()
        live = list(self._live())
        # Both walks (ours and watchfiles') take milliseconds per thousand folders: off the loop.
        notify, coverage = await anyio.to_thread.run_sync(self._open, live)
        if coverage is not None:
            self._report(coverage)
        if notify is None:  # no roots yet, or no watches to be had
            self.quiet = True
            task_status.started()
            with anyio.move_on_after(RETRY_UNWATCHED if self.roots else math.inf):
                await self._stop.wait()
            return
        with notify:
            task_status.started()
            while not self._stop.is_set():
                step = IDLE_STEP_MS if self.quiet else WATCH_STEP_MS
                timeout = 0 if self.quiet else self.quiet_after_ms
                try:
                    raw = await anyio.to_thread.run_sync(
                        notify.watch,
                        max(WATCH_DEBOUNCE_MS, step),
                        step,
                        timeout,
                        self._stop,
                        abandon_on_cancel=True,
                    )
                except anyio.get_cancelled_exc_class():
                    self._stop.set()  # the abandoned thread returns at its next step
                    raise
                except (OSError, RuntimeError) as exc:  # the watcher itself failed
                    logger.error("watching %s failed (%s); starting over", self._names(), exc)
                    await anyio.sleep(RETRY_AFTER)
                    return
                if raw == "timeout":
                    self.quiet = True
                elif isinstance(raw, set):
                    self.quiet = False
                    batch = _transcript_batch(raw)
                    if batch:
                        await self.on_changes(batch)
                        self._check_new_folders(batch)

    def _open(self, live: list[str]) -> tuple[RustNotify | None, WatchCoverage | None]:
        """The watcher, the folders of `live` asked for first, and what it covers (in a worker
        thread: it touches no state of the event loop's)."""
        if not self.roots:
            return None, None
        folders = find_folders(self.roots)
        try:
            notify = open_notify(watch_order(self.roots, folders, live, time.time()))
        except (OSError, RuntimeError) as exc:  # e.g. no inotify instance left
            logger.error(
                "cannot watch %s (%s); every folder is polled instead, and watching is tried "
                "again every %g s",
                self._names(),
                exc,
                RETRY_UNWATCHED,
            )
            by_age = sorted(folders, key=lambda path: -folders[path].mtime_ns)
            limit = watches.watch_limit()
            return None, WatchCoverage(
                len(folders), 0, tuple(by_age), limit, True, frozenset(folders), str(exc)
            )
        coverage = measure(folders)
        logger.debug("watching %s: %d of %d folders", self._names(), coverage.watched, len(folders))
        return notify, coverage

    def _check_new_folders(self, batch: list[tuple[str, bool]]) -> None:
        """A folder created under a watched one is watched by watchfiles itself, unless the cap
        is reached: then it joins the unwatched (with any folder of its own)."""
        if not self.coverage.measured:
            return
        new = [path for path, deleted in batch if not deleted and path not in self.coverage.known]
        new = [path for path in new if os.path.isdir(path)]
        if not new:
            return
        folders = find_folders(Path(path) for path in new)
        held = watches.watched_inodes() or set()
        missed = [path for path, f in folders.items() if (f.dev, f.ino) not in held]
        c = self.coverage
        self._report(
            WatchCoverage(
                c.folders + len(folders),
                c.watched + len(folders) - len(missed),
                (*missed, *c.unwatched),
                c.limit,
                True,
                c.known | frozenset(folders),
            )
        )

    def _report(self, coverage: WatchCoverage) -> None:
        self.coverage = coverage
        if self._on_coverage is not None:
            self._on_coverage(coverage)

    def _names(self) -> str:
        return ", ".join(str(root) for root in self.roots)


async def wait_released() -> None:
    """Wait (RELEASE_WAIT at most) until the inotify watches of a watcher closed just before
    are given back: watchfiles closes its descriptor in its own thread, a few milliseconds after
    `close`, and until then they count against the cap and would be taken for the new one's."""
    with anyio.move_on_after(RELEASE_WAIT):
        # Polled: the kernel tells no one when a descriptor closes.
        while watches.watched_inodes():  # noqa: ASYNC110
            await anyio.sleep(0.005)


def open_notify(roots: Iterable[Path | str]) -> RustNotify:
    """watchfiles' Rust watcher over `roots`, recursive, skipping unreadable directories.

    It skips silently whatever it cannot watch, the folders past the inotify cap included
    (watchfiles 1.3: `ignore_permission_denied` ignores every error of adding a watch, not only
    EACCES; without it the first folder past the cap fails the whole watcher); `measure` says
    what it got.

    `RustNotify` is watchfiles' private backend (what `awatch` wraps); its signature is pinned by
    the versions in pyproject.toml and checked by a test, so an upgrade that changes it fails
    there rather than at a user's daemon start.
    """
    # (paths, debug, force_polling, poll_delay_ms, recursive, ignore_permission_denied)
    return RustNotify([str(root) for root in roots], False, False, 300, True, True)


def _transcript_batch(raw: set[tuple[int, str]]) -> list[tuple[str, bool]]:
    """watchfiles' raw (change code, path) set as sorted (path, deleted) pairs, transcripts and
    new directories only."""
    changes = ((Change(code), path) for code, path in raw)
    return sorted(
        {
            (path, change == Change.deleted)
            for change, path in changes
            if _transcript_filter(change, path)
        }
    )
