"""Each session's context over time, for the dashboard's chart (`/api/v1/status`), kept across
restarts in the private state dir (`history.json`, beside the snapshot).

Bounded in memory as a whole, not only per session: the daemon tracks up to 20,000 sessions,
and a flood of them must not make the charts its largest holding. Each series keeps at most
HISTORY_POINTS points, packed in columns (`Series`: about 15 bytes a point, plus the JSON the
dashboard's answer keeps of it), and all series together at most HISTORY_BUDGET points. Past
that, the series that moved longest ago are thinned first (to HISTORY_THINNED points spread
over their span), then dropped, down to 80% of the budget; the series that moved last, the
sessions a user is watching, stay whole. Figures: docs/benchmarks.md §30.

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
from array import array
from collections.abc import Generator, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import anyio.to_thread
import orjson

from ctxd.daemon.sessions import Sessions
from ctxd.fileio import write_atomic
from ctxd.untrusted import read_untrusted

__all__ = [
    "HISTORY_BUDGET",
    "HISTORY_FILE",
    "HISTORY_FILE_MAX",
    "HISTORY_POINTS",
    "HISTORY_SAVE",
    "HISTORY_THINNED",
    "HISTORY_TICK",
    "History",
    "Series",
    "load_history",
    "read_history",
    "record_history",
    "save_history",
]

logger = logging.getLogger(__name__)

#: Points of each session's context kept for the dashboard's chart, and how often it is sampled.
HISTORY_POINTS = 600
HISTORY_TICK = 1.0
#: Points kept in all series together (500 full charts, about what the file below holds: more
#: would not outlive a restart), and the points a series that moved long ago is thinned to
#: when they would be more.
HISTORY_BUDGET = 300_000
HISTORY_THINNED = 60
#: The file the history is kept in across restarts (in the private state dir), its bound in
#: bytes (about 500 sessions of HISTORY_POINTS points each), and how often it is written.
HISTORY_FILE = "history.json"
HISTORY_FILE_MAX = 8 * 1024 * 1024
HISTORY_SAVE = 10.0
#: Seconds of reading the file back after which the event loop is given back.
SLICE = 0.002
_FORMAT = 1

Point = tuple[float, int, int]

#: The largest figure a point keeps (a signed 64-bit integer, as the JSON encoder takes); a
#: larger one is kept as this, a negative one as 0.
_FIGURE_MAX = 2**63 - 1


class Series:
    """One session's points, packed: a column of times (`array('d')`), one of tokens
    (`array('I')`, 32 bits) and one of compactions (`array('H')`, 16 bits), about 15 bytes a
    point where a tuple of Python objects took about 100; a figure too large for its column
    widens that column to 64 bits. Iterates as the (time, tokens, compactions) tuples it was
    given; holds at most `keep` of them, the oldest going first. The columns are read by
    `History`, written only here."""

    __slots__ = ("born", "compactions", "keep", "stamp", "times", "tokens")

    def __init__(self, keep: int, born: int = 0) -> None:
        self.keep = keep
        #: The history's change count when it began: of two series, which is the newer.
        self.born = born
        #: The history's change count at this series' last change: what tells its kept JSON
        #: is stale (unique across series, so one dropped and made again is never mistaken).
        self.stamp = 0
        self.times = array("d")
        self.tokens: array[int] = array("I")
        self.compactions: array[int] = array("H")

    @classmethod
    def of(cls, keep: int, points: list[list[float | int]]) -> Series:
        """A series of the last `keep` of these points (checked: rising times, counts not
        negative), in columns made at once."""
        series = cls(keep)
        times, tokens, compactions = zip(*points[-keep:], strict=True)
        series.times = array("d", times)
        series.tokens = _column("I", tokens)
        series.compactions = _column("H", compactions)
        return series

    def __len__(self) -> int:
        return len(self.times)

    def __iter__(self) -> Iterator[Point]:
        return zip(self.times, self.tokens, self.compactions, strict=True)

    def append(self, at: float, tokens: int, compactions: int) -> None:
        """A point, its figures within 0 and _FIGURE_MAX (`_clamp`)."""
        if len(self.times) >= self.keep:
            del self.times[0], self.tokens[0], self.compactions[0]
        self.times.append(at)
        try:
            self.tokens.append(tokens)
        except OverflowError:
            self.tokens = array("q", self.tokens)
            self.tokens.append(tokens)
        try:
            self.compactions.append(compactions)
        except OverflowError:
            self.compactions = array("q", self.compactions)
            self.compactions.append(compactions)

    def thin(self, to: int) -> int:
        """Keep about `to` points spread evenly over the series' span, its first and last
        among them; the points let go."""
        n = len(self.times)
        if n <= to:
            return 0
        step = -(-(n - 1) // max(to - 1, 1))  # the first and last kept: at most `to` points
        self.times = _every(self.times, step)
        self.tokens = _every(self.tokens, step)
        self.compactions = _every(self.compactions, step)
        return n - len(self.times)


def _clamp(figure: int) -> int:
    return min(max(figure, 0), _FIGURE_MAX)


def _every(column: array[Any], step: int) -> array[Any]:
    """Every `step`th of `column` from its first, and its last."""
    kept = column[: len(column) - 1 : step]
    kept.append(column[-1])
    return kept


def _column(typecode: str, figures: Sequence[float | int]) -> array[int]:
    """These counts (not negative) in a column of `typecode`, or of 64 bits if one does not
    fit in it."""
    try:
        return array(typecode, figures)  # type: ignore[arg-type]
    except OverflowError:
        return array("q", [_clamp(int(figure)) for figure in figures])


class History:
    """Each session's context over time: a point when its tokens or compactions change, at most
    HISTORY_POINTS per session, dropped with the session; at most `budget` points in all (see
    the module's docstring)."""

    def __init__(self, points: int = HISTORY_POINTS, budget: int = HISTORY_BUDGET) -> None:
        self.points = points
        self.budget = budget
        self.series: dict[str, Series] = {}
        #: Points held by all series: kept within `budget`.
        self.total = 0
        #: Bumped on every change: what tells the saver there is something to write.
        self.changes = 0
        # Each series' JSON member, with the stamp of the series it was encoded from.
        self._encoded: dict[str, tuple[int, bytes]] = {}

    def record(self, samples: Iterable[tuple[str, float, int | None, int]]) -> None:
        """`samples`: (key, time, tokens, compactions) of every session tracked now."""
        live: set[str] = set()
        for key, at, tokens, compactions in samples:
            live.add(key)
            if tokens is None:
                continue
            if not (0 <= tokens <= _FIGURE_MAX and 0 <= compactions <= _FIGURE_MAX):
                tokens, compactions = _clamp(tokens), _clamp(compactions)
            series = self.series.get(key)
            if series is None:
                series = self.series[key] = Series(self.points, born=self.changes)
            elif series.tokens[-1] == tokens and series.compactions[-1] == compactions:
                continue
            if len(series.times) < series.keep:  # else its oldest point goes
                self.total += 1
            series.append(at, tokens, compactions)
            self.changes += 1
            series.stamp = self.changes
        for key in self.series.keys() - live:
            self.total -= len(self.series.pop(key))
            self.changes += 1
        if self.total > self.budget:
            self._shrink()

    def _shrink(self) -> None:
        """Bring the points within 80% of the budget (so that a flood sorts the series once per
        fifth of it, not at every point), cutting the series that moved longest ago first: one
        longer than HISTORY_THINNED points is thinned to that many, a shorter one dropped (a
        session still tracked starts a new series at its next point); a second pass drops the
        thinned ones if need be. The series that moved last are kept whole."""
        target = self.budget * 4 // 5
        # Idle longest first; of those that moved at the same time, the newest first.
        order = sorted(
            self.series, key=lambda key: (self.series[key].times[-1], -self.series[key].born)
        )
        dropped = 0
        while order and self.total > target:
            for key in order:
                if self.total <= target:
                    break
                series = self.series[key]
                let_go = series.thin(HISTORY_THINNED)
                if let_go:
                    self.total -= let_go
                    self.changes += 1
                    series.stamp = self.changes
                else:
                    self.total -= len(self.series.pop(key))
                    self.changes += 1
                    dropped += 1
            order = [key for key in order if key in self.series]
        if dropped:
            logger.info("history: %d idle sessions' series dropped (the points' bound)", dropped)

    def saved(self, limit: int = HISTORY_FILE_MAX) -> tuple[bytes, int]:
        """The history file's bytes (at most `limit`) and how many series did not fit: a
        first line naming the format, then one line per series (`{"key":[[t,tokens,n],...]}`),
        the series whose last point is latest first. Made of the members `encoded` keeps, so a
        save encodes only the series that changed."""
        members = self._members()
        parts = [b'{"format":' + orjson.dumps(_FORMAT) + b"}"]
        size = len(parts[0])
        order = sorted(members, key=lambda key: -self.series[key].times[-1])
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
        since start is kept as it is. The budget holds after it as after a `record`."""
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
                self.total += len(series)
                self.changes += 1
                series.stamp = self.changes
                taken += 1
        if self.total > self.budget:
            self._shrink()
        return taken, skipped

    def export(self) -> dict[str, list[Point]]:
        return {key: list(series) for key, series in self.series.items()}

    def encoded(self) -> bytes:
        """`export()` as JSON, a series encoded again only when it changed: the dashboard asks
        twice a second, and most of 10,000 sessions' series stay as they were."""
        return b"{" + b",".join(member for _, member in self._members().values()) + b"}"

    def _members(self) -> dict[str, tuple[int, bytes]]:
        """Each series' JSON member (`"key":[[...],...]`) with the stamp it was made at."""
        kept = {}
        for key, series in self.series.items():
            known = self._encoded.get(key)
            if known is None or known[0] != series.stamp:
                known = (series.stamp, orjson.dumps(key) + b":" + orjson.dumps(list(series)))
            kept[key] = known
        self._encoded = kept
        return kept


def _points(raw: object, keep: int) -> Series | None:
    """The last `keep` points of a saved series, or None when it is not one."""
    if not isinstance(raw, list) or not raw:
        return None
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
    return Series.of(keep, raw[-keep:])


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
