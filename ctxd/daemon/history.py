"""Each session's context over time, for the dashboard's chart (`/api/v1/status`)."""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Iterable

import anyio
import orjson

from ctxd.daemon.sessions import Sessions

__all__ = ["HISTORY_POINTS", "HISTORY_TICK", "History", "record_history"]

logger = logging.getLogger(__name__)

#: Points of each session's context kept for the dashboard's chart, and how often it is sampled.
HISTORY_POINTS = 600
HISTORY_TICK = 1.0


class History:
    """Each session's context over time: a point when its tokens or compactions change, at most
    HISTORY_POINTS per session, dropped with the session."""

    def __init__(self, points: int = HISTORY_POINTS) -> None:
        self.points = points
        self.series: dict[str, deque[tuple[float, int, int]]] = {}
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
        for key in self.series.keys() - live:
            del self.series[key]

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


async def record_history(history: History, sessions: Sessions, stopping: anyio.Event) -> None:
    """Record every session's context in `history` every HISTORY_TICK until `stopping`."""
    while not stopping.is_set():
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
        with anyio.move_on_after(HISTORY_TICK):
            await stopping.wait()
