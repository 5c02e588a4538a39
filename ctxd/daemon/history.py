"""Each session's context over time, for the dashboard's chart (`/api/v1/status`), kept across
restarts in the private state dir (`history.json`, beside the snapshot).

The file is ctxd's own but read as if it were not: at most HISTORY_FILE_MAX bytes (a bigger one
is logged and the history starts empty), each point checked for its types and order and a
series skipped alone when damaged; nothing in it can stop the daemon. (The points are checked
by hand, not read by `ctxd.daemon.typed`: a full file holds hundreds of thousands of them, and
reading each by its declared types cost four to five times as much: docs/benchmarks.md §30.)

It is written whole or not at all (`fileio.write_atomic`), in a worker thread, every
HISTORY_SAVE seconds while something changed and when the daemon stops: the series whose last
point is latest first, until HISTORY_FILE_MAX would be passed (the rest are left out, logged).
Its bytes are the members the dashboard's answer keeps (`History.encoded`), so a save encodes
only the series that changed since.
"""

from __future__ import annotations

import logging
import math
import time
from collections import deque
from collections.abc import Generator, Iterable
from pathlib import Path

import anyio
import anyio.lowlevel
import anyio.to_thread
import orjson

from ctxd.daemon.sessions import Sessions
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
    "read_history",
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
#: Seconds of reading the file back after which the event loop is given back.
SLICE = 0.002
_FORMAT = 1

Point = tuple[float, int, int]


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
        """The history file's bytes (at most `limit`) and how many series did not fit: a
        first line naming the format, then one line per series (`{"key":[[t,tokens,n],...]}`),
        the series whose last point is latest first. Made of the members `encoded` keeps, so a
        save encodes only the series that changed."""
        members = self._members()
        parts = [b'{"format":' + orjson.dumps(_FORMAT) + b"}"]
        size = len(parts[0])
        order = sorted(members, key=lambda key: -members[key][0][1][0])
        for n, key in enumerate(order):
            part = b"{" + members[key][1] + b"}"
            if size + len(part) + 1 > limit:
                return b"\n".join(parts) + b"\n", len(order) - n
            parts.append(part)
            size += len(part) + 1
        return b"\n".join(parts) + b"\n", 0

    def restore(self, data: bytes) -> tuple[int, int]:
        """`restoring`, at once."""
        steps = self.restoring(data)
        while True:
            try:
                next(steps)
            except StopIteration as done:
                result: tuple[int, int] = done.value
                return result

    def restoring(self, data: bytes) -> Generator[None, None, tuple[int, int]]:
        """Take in the series of a history file's bytes, yielding every SLICE seconds (where
        the event loop may take over: a full file takes a good part of a second); (series
        taken, series skipped as damaged: a line that is not one series, a point that is not
        [time, tokens, compactions] of those types, times not rising, a negative count). A
        first line that does not name this format is a ValueError; a series already recorded
        since start is kept as it is."""
        lines = data.split(b"\n")
        head = orjson.loads(lines[0])
        if not isinstance(head, dict) or head.get("format") != _FORMAT:
            raise ValueError("not a history file of this version")
        taken = skipped = 0
        due = time.perf_counter() + SLICE
        for line in lines[1:]:
            if time.perf_counter() > due:
                yield
                due = time.perf_counter() + SLICE
            if not line:
                continue
            try:
                raw = orjson.loads(line)
            except orjson.JSONDecodeError:
                raw = None
            series = None
            if isinstance(raw, dict) and len(raw) == 1:
                ((key, points),) = raw.items()
                series = _points(points, self.points)
            if series is None:
                skipped += 1
            elif key not in self.series:
                self.series[key] = series
                taken += 1
        return taken, skipped

    def export(self) -> dict[str, list[tuple[float, int, int]]]:
        return {key: list(series) for key, series in self.series.items()}

    def encoded(self) -> bytes:
        """`export()` as JSON, a series encoded again only when it changed: the dashboard asks
        twice a second, and most of 10,000 sessions' series stay as they were."""
        return b"{" + b",".join(member for _, member in self._members().values()) + b"}"

    def _members(self) -> dict[str, tuple[tuple[int, Point], bytes]]:
        """Each series' JSON member (`"key":[[...],...]`) with the version it was made at."""
        kept = {}
        for key, series in self.series.items():
            version = (len(series), series[-1])
            known = self._encoded.get(key)
            if known is None or known[0] != version:
                known = (version, orjson.dumps(key) + b":" + orjson.dumps(list(series)))
            kept[key] = known
        self._encoded = kept
        return kept


def _points(raw: object, keep: int) -> deque[Point] | None:
    """The last `keep` points of a saved series, or None when it is not one."""
    if not isinstance(raw, list) or not raw:
        return None
    out: deque[Point] = deque(maxlen=keep)
    last = -math.inf
    for point in raw[-keep:]:
        if type(point) is not list or len(point) != 3:
            return None
        at, tokens, compactions = point
        if type(at) not in (float, int) or type(tokens) is not int or type(compactions) is not int:
            return None
        if not last < at < math.inf or tokens < 0 or compactions < 0:  # NaN fails too
            return None
        last = at
        out.append((float(at), tokens, compactions))
    return out


def read_history(path: Path) -> bytes | None:
    """The history file's bytes, None when there is none or it cannot be read (logged: the
    history then starts empty). Blocking: a worker thread's."""
    try:
        return read_untrusted(path, HISTORY_FILE_MAX)
    except FileNotFoundError:
        return None
    except OSError as exc:
        logger.warning("history not restored, starting empty: %s", exc)
        return None


async def load_history(history: History, path: Path) -> None:
    """Take in the history file at `path` when there is one, read in a worker thread and
    taken in on the event loop in slices; whatever is wrong with it is logged and leaves the
    history empty (the daemon serves on)."""
    data = await anyio.to_thread.run_sync(read_history, path)
    if data is None:
        return
    steps = history.restoring(data)
    try:
        while True:
            try:
                next(steps)
            except StopIteration as done:
                taken, skipped = done.value
                break
            await anyio.lowlevel.checkpoint()
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


class _Saver:
    """Writes the history file in a worker thread; says when series start (or stop) being
    left out of it, not at every save."""

    def __init__(self, history: History, path: Path) -> None:
        self.history = history
        self.path = path
        self.left_out = 0

    async def save(self) -> None:
        data, left_out = self.history.saved()
        if left_out and not self.left_out:
            logger.warning(
                "history: %d sessions' series left out of %s (its bound)", left_out, self.path
            )
        self.left_out = left_out
        await anyio.to_thread.run_sync(save_history, data, self.path)


async def record_history(
    history: History, sessions: Sessions, stopping: anyio.Event, path: Path | None = None
) -> None:
    """Record every session's context in `history` every HISTORY_TICK until `stopping`; with
    a `path`, the history is read from it first and written to it every HISTORY_SAVE seconds
    while it changed, and once more at the end."""
    saver = None if path is None else _Saver(history, path)
    if path is not None:
        await load_history(history, path)
    saved_at, saved_changes = anyio.current_time(), history.changes
    while not stopping.is_set():
        _record(history, sessions)
        due = anyio.current_time() - saved_at >= HISTORY_SAVE
        if saver is not None and due and history.changes != saved_changes:
            saved_at, saved_changes = anyio.current_time(), history.changes
            await saver.save()
        with anyio.move_on_after(HISTORY_TICK):
            await stopping.wait()
    if saver is not None:
        _record(history, sessions)  # the figures of the last moment too
        if history.changes != saved_changes:
            # Shielded: the shutdown's grace may be spent already, and this is one bounded
            # write of a file written whole or not at all.
            with anyio.CancelScope(shield=True):
                await saver.save()


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
