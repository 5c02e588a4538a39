"""Which lines a session crossed between two of its status rows (pure): the one place that
decides "once per crossing" for every output that reacts to changes (the notifier).

A line is crossed when the later row is past it and the earlier was not; a session seen for
the first time counts as having been before every line. A compaction or a new session brings
the figures back, so the same line may be crossed again later: once per crossing, not once
per session.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import PurePath
from typing import Any

__all__ = ["COMPACTION_NEAR_CALLS", "IDLE_SOON_SECONDS", "Crossing", "crossings"]

#: The compaction is near when the forecast puts it this many tool calls away or fewer.
COMPACTION_NEAR_CALLS = 3
#: An idle compaction is due soon when it is this many seconds away or fewer.
IDLE_SOON_SECONDS = 600.0

Row = Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Crossing:
    """One line one session crossed: what a notification says."""

    kind: str  # "critical", "compaction_near", "idle_compaction_soon", "handoff_asked"
    agent: str
    session_id: str
    project: str  # the basename of the session's working directory ("" when unknown)
    summary: str
    body: str


def _critical(row: Row, now: float) -> bool:
    return row.get("severity") == "critical"


def _compaction_near(row: Row, now: float) -> bool:
    forecast = row.get("forecast") or {}
    calls = forecast.get("calls_to_compaction") if isinstance(forecast, Mapping) else None
    return isinstance(calls, int | float) and calls <= COMPACTION_NEAR_CALLS


def _idle_soon(row: Row, now: float) -> bool:
    at = row.get("idle_compaction_at")
    return isinstance(at, int | float) and now <= at <= now + IDLE_SOON_SECONDS


def _handoff_asked(row: Row, now: float) -> bool:
    return row.get("handoff_asked") is True


LINES = (
    ("critical", _critical),
    ("compaction_near", _compaction_near),
    ("idle_compaction_soon", _idle_soon),
    ("handoff_asked", _handoff_asked),
)


def _left(row: Row) -> str:
    """What is left, on the basis the thresholds count (and saying which)."""
    pct = row.get("basis_used_pct")
    if not isinstance(pct, int | float):
        return ""
    of = "the window" if row.get("basis") == "window" else "the room before compaction"
    return f"{max(0.0, 100 - pct):.0f}% of {of} left"


def _text(kind: str, row: Row, now: float) -> tuple[str, str]:
    left = _left(row)
    if kind == "critical":
        return "context critical", left or "context critical"
    if kind == "compaction_near":
        calls = round(float((row.get("forecast") or {}).get("calls_to_compaction") or 0))
        plural = "" if calls == 1 else "s"
        return "compaction near", f"compaction in about {calls} tool call{plural}" + (
            f"; {left}" if left else ""
        )
    if kind == "idle_compaction_soon":
        minutes = max(0, round((float(row["idle_compaction_at"]) - now) / 60))
        return "idle compaction soon", f"compacts in {minutes} min if left idle"
    return "handoff asked", "the agent was asked to write a handoff"


def _project(row: Row) -> str:
    cwd = row.get("cwd")
    return PurePath(cwd).name if isinstance(cwd, str) and cwd else ""


def crossings(before: Row | None, then: float, after: Row, now: float) -> list[Crossing]:
    """The lines `after` (at `now`) is past and `before` (the same session's previous row, at
    `then`; None when there was none) was not; none for an ended session or an error row."""
    if after.get("ended_at") is not None or "error" in after:
        return []
    found = []
    for kind, past in LINES:
        if past(after, now) and not (before is not None and past(before, then)):
            summary, body = _text(kind, after, now)
            project, agent = _project(after), str(after.get("agent"))
            found.append(
                Crossing(
                    kind=kind,
                    agent=agent,
                    session_id=str(after.get("session_id")),
                    project=project,
                    summary=f"{project or 'a session'} ({agent}): {summary}",
                    body=body,
                )
            )
    return found
