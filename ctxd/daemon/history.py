"""Each session's context over time, for the dashboard's chart (`/api/status`)."""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Iterable

import anyio

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
