"""Each session's context over time, for the dashboard's chart (`/api/v1/status`), kept across
restarts in the private state dir (`history.json`, beside the snapshot).

The file is ctxd's own but read as if it were not: at most HISTORY_FILE_MAX bytes (a bigger one
is logged and the history starts empty), each series read back by its declared types
(`ctxd.daemon.typed`) and skipped alone when damaged; nothing in it can stop the daemon. It is
written whole or not at all (`fileio.write_atomic`), in a worker thread, every HISTORY_SAVE
seconds while something changed and when the daemon stops; the most recently moved series
first, until HISTORY_FILE_MAX would be passed (the rest are left out, and logged).
"""

from __future__ import annotations

import itertools
import logging
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import anyio
import anyio.to_thread
import orjson

from ctxd.daemon.sessions import Sessions
from ctxd.daemon.typed import from_plain
from ctxd.fileio import write_atomic
from ctxd.untrusted import read_untrusted

__all__ = [
    "HISTORY_FILE",
    "HISTORY_FILE_MAX",
    "HISTORY_POINTS",
    "HISTORY_SAVE",
    "HISTORY_TICK",
    "History",
    "load_history",
    "record_history",
    "save_history",
]

logger = logging.getLogger(__name__)

#: Points of each session's context kept for the dashboard's chart, and how often it is sampled.
HISTORY_POINTS = 600
HISTORY_TICK = 1.0
#: The file the history is kept in across restarts (in the private state dir), its bound in
#: bytes (about 500 sessions of HISTORY_POINTS points each), and how often it is written.
HISTORY_FILE = "history.json"
HISTORY_FILE_MAX = 8 * 1024 * 1024
HISTORY_SAVE = 10.0
_FORMAT = 1

Point = tuple[float, int, int]


@dataclass(frozen=True, slots=True)
class SavedSeries:
    """One session's series as the history file holds it: its key and (time, tokens,
    compactions) points, oldest first."""

    key: str
    points: tuple[tuple[float, int, int], ...]


class History:
    """Each session's context over time: a point when its tokens or compactions change, at most
    HISTORY_POINTS per session, dropped with the session."""

    def __init__(self, points: int = HISTORY_POINTS) -> None:
        self.points = points
        self.series: dict[str, deque[Point]] = {}
        #: Bumped on every change: what tells the saver there is something to write.
        self.changes = 0
        # Each series' JSON member, with the (length, last point) it was encoded at: points are
        # only appended, each at a later time, so that pair tells a changed series.
        self._encoded: dict[str, tuple[tuple[int, tuple[float, int, int]], bytes]] = {}

    def record(self, samples: Iterable[tuple[str, float, int | None, int]]) -> None:
        """`samples`: (key, time, tokens, compactions) of every session tracked now."""
        live: set[str] = set()
        for key, at, tokens, compactions in samples:
            live.add(key)
            if tokens is None:
                continue
            series = self.series.get(key)
            if series is None:
                series = self.series[key] = deque(maxlen=self.points)
            if not series or series[-1][1:] != (tokens, compactions):
                series.append((at, tokens, compactions))
                self.changes += 1
        for key in self.series.keys() - live:
            del self.series[key]
            self.changes += 1

    def saved(self, limit: int = HISTORY_FILE_MAX) -> tuple[bytes, int]:
        """The history file's bytes (at most `limit`) and how many series did not fit: the
        series whose last point is latest go first."""
        head = b'{"format":' + orjson.dumps(_FORMAT) + b',"series":['
        parts: list[bytes] = []
        size = len(head) + 2
        order = sorted(self.series.items(), key=lambda item: -item[1][-1][0])
        for n, (key, series) in enumerate(order):
            part = orjson.dumps({"key": key, "points": list(series)})
            if size + len(part) + 1 > limit:
                return head + b",".join(parts) + b"]}", len(order) - n
            parts.append(part)
            size += len(part) + 1
        return head + b",".join(parts) + b"]}", 0

    def restore(self, data: bytes) -> tuple[int, int]:
        """Take in the series of a history file's bytes; (series taken, series skipped as
        damaged). A document that is not a history file is a ValueError; a series already
        recorded since start is kept as it is."""
        doc = orjson.loads(data)
        if not isinstance(doc, dict) or doc.get("format") != _FORMAT:
            raise ValueError("not a history file of this version")
        raw = doc.get("series")
        if not isinstance(raw, list):
            raise ValueError("no series")
        taken = skipped = 0
        for item in raw:
            try:
                saved = from_plain(SavedSeries, item)
            except (TypeError, ValueError):
                skipped += 1
                continue
            points = saved.points[-self.points :]
            ordered = all(a[0] < b[0] for a, b in itertools.pairwise(points))
            if not points or not ordered or any(p[1] < 0 or p[2] < 0 for p in points):
                skipped += 1
                continue
            if saved.key not in self.series:
                self.series[saved.key] = deque(points, maxlen=self.points)
                taken += 1
        return taken, skipped

    def export(self) -> dict[str, list[tuple[float, int, int]]]:
        return {key: list(series) for key, series in self.series.items()}

    def encoded(self) -> bytes:
        """`export()` as JSON, a series encoded again only when it changed: the dashboard asks
        twice a second, and most of 10,000 sessions' series stay as they were."""
        kept = {}
        for key, series in self.series.items():
            version = (len(series), series[-1])
            known = self._encoded.get(key)
            if known is None or known[0] != version:
                known = (version, orjson.dumps(key) + b":" + orjson.dumps(list(series)))
            kept[key] = known
        self._encoded = kept
        return b"{" + b",".join(member for _, member in kept.values()) + b"}"


def load_history(history: History, path: Path) -> None:
    """Take in the history file at `path` when there is one; whatever is wrong with it is
    logged and leaves the history empty (the daemon serves on). Blocking: a worker thread's."""
    try:
        data = read_untrusted(path, HISTORY_FILE_MAX)
    except FileNotFoundError:
        return
    except OSError as exc:
        logger.warning("history not restored, starting empty: %s", exc)
        return
    try:
        taken, skipped = history.restore(data)
    except ValueError as exc:  # orjson's JSONDecodeError is one
        logger.warning("history not restored from %s, starting empty: %s", path, exc)
        return
    logger.info("restored the history of %d sessions", taken)
    if skipped:
        logger.warning("history: %d damaged series in %s skipped", skipped, path)


def save_history(data: bytes, path: Path) -> None:
    """Write a history file's bytes (`History.saved`); an error is logged. Blocking."""
    try:
        write_atomic(path, data)
    except OSError as exc:
        logger.warning("cannot save the history to %s: %s", path, exc)


async def _save(history: History, path: Path) -> None:
    data, left_out = history.saved()
    if left_out:
        logger.warning("history: %d sessions' series left out of %s (its bound)", left_out, path)
    await anyio.to_thread.run_sync(save_history, data, path)


async def record_history(
    history: History, sessions: Sessions, stopping: anyio.Event, path: Path | None = None
) -> None:
    """Record every session's context in `history` every HISTORY_TICK until `stopping`; with
    a `path`, the history is read from it first and written to it every HISTORY_SAVE seconds
    while it changed, and once more at the end."""
    if path is not None:
        await anyio.to_thread.run_sync(load_history, history, path)
    saved_at, saved_changes = anyio.current_time(), history.changes
    while not stopping.is_set():
        _record(history, sessions)
        due = anyio.current_time() - saved_at >= HISTORY_SAVE
        if path is not None and due and history.changes != saved_changes:
            saved_at, saved_changes = anyio.current_time(), history.changes
            await _save(history, path)
        with anyio.move_on_after(HISTORY_TICK):
            await stopping.wait()
    if path is not None:
        _record(history, sessions)  # the figures of the last moment too
        if history.changes != saved_changes:
            # Not cancellable once started (a worker thread): the file is written whole.
            await _save(history, path)


def _record(history: History, sessions: Sessions) -> None:
    try:
        history.record(
            (
                state.transcript_path or state.key,
                state.usage_at or state.updated_at,
                state.tokens,
                state.compactions,
            )
            for state in sessions
        )
    except Exception:  # the chart is not worth the daemon
        logger.exception("recording the history failed")
