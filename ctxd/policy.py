"""When to warn and when to ask for a handoff: pure state transitions, `now` passed in.

The debounce is get-shit-done's rule exactly, because it is what users know (see
`on_tool_call`), with one fix users asked for: `on_compaction` starts the session afresh, so the
first warning after a compaction is given at once and the handoff may be asked for again.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from enum import IntEnum
from typing import Literal

from ctxd.errors import InvalidInput

Basis = Literal["compaction", "window"]

#: How many tool calls of token history the forecast looks at.
RECENT_CALLS = 8


class Severity(IntEnum):
    """Ordered levels: OK < WARNING < CRITICAL. str() gives the lower-case label."""

    OK = 0
    WARNING = 1
    CRITICAL = 2

    @property
    def label(self) -> str:
        """The lower-case name: "ok", "warning" or "critical"."""
        return self.name.lower()

    def __str__(self) -> str:
        return self.label


@dataclass(frozen=True, slots=True)
class Thresholds:
    """Warn at `warning` % remaining, escalate at `critical` % remaining (on `basis`); repeat a
    warning of the same or a lower level only every `debounce` tool calls."""

    warning: float = 35.0
    critical: float = 25.0
    basis: Basis = "compaction"
    debounce: int = 5

    def __post_init__(self) -> None:
        if not 0 <= self.critical <= self.warning <= 100:
            raise InvalidInput(
                f"thresholds must satisfy 0 <= critical <= warning <= 100, "
                f"got critical={self.critical}, warning={self.warning}"
            )
        if self.basis not in ("compaction", "window"):
            raise InvalidInput(f"basis must be 'compaction' or 'window', got {self.basis!r}")
        if self.debounce < 1:
            raise InvalidInput(f"debounce must be at least 1, got {self.debounce}")


@dataclass(frozen=True, slots=True)
class HandoffSettings:
    """Ask for a handoff note on Stop once `at` % is used; `action` is how the agent adapter
    delivers it (a message, or a Stop block that makes the agent write it)."""

    enabled: bool = True
    at: float = 70.0
    action: Literal["message", "block"] = "message"

    def __post_init__(self) -> None:
        if not 0 < self.at <= 100:
            raise InvalidInput(f"handoff threshold must be in (0, 100], got {self.at}")
        if self.action not in ("message", "block"):
            raise InvalidInput(f"handoff action must be 'message' or 'block', got {self.action!r}")


@dataclass(frozen=True, slots=True)
class Usage:
    """One moment's figures, computed by the caller. InvalidInput for tokens < 0 or a window or
    compaction point <= 0."""

    tokens: int
    window: int
    compaction_at: int
    #: The statusline's used_percentage (of the whole window), authoritative when given.
    reported_used_pct: float | None = None

    def __post_init__(self) -> None:
        if self.tokens < 0:
            raise InvalidInput(f"tokens must not be negative, got {self.tokens}")
        if self.window <= 0:
            raise InvalidInput(f"window must be positive, got {self.window}")
        if self.compaction_at <= 0:
            raise InvalidInput(f"compaction point must be positive, got {self.compaction_at}")


def _clamp(pct: float) -> float:
    return min(100.0, max(0.0, pct))


def used_pct(usage: Usage, basis: Basis) -> float:
    """Percentage used, in [0, 100].

    "window": the statusline's reported_used_pct when given, else 100 * tokens / window.
    "compaction": 100 * tokens / compaction_at, the share of the room before auto-compaction
    (what Claude Code's UI calls "context left until auto-compact"); the same threshold then
    means the same thing on every agent, whereas on Gemini CLI, which compresses at half the
    window, a "remaining % of the window" threshold would never fire.
    """
    if basis == "window":
        if usage.reported_used_pct is not None:
            return _clamp(usage.reported_used_pct)
        return _clamp(100.0 * usage.tokens / usage.window)
    return _clamp(100.0 * usage.tokens / usage.compaction_at)


def remaining_pct(usage: Usage, basis: Basis) -> float:
    """100 - used_pct(usage, basis)."""
    return 100.0 - used_pct(usage, basis)


def severity_for(remaining: float, t: Thresholds) -> Severity:
    """CRITICAL if remaining <= t.critical, WARNING if remaining <= t.warning, else OK."""
    if remaining <= t.critical:
        return Severity.CRITICAL
    if remaining <= t.warning:
        return Severity.WARNING
    return Severity.OK


@dataclass(frozen=True, slots=True)
class PolicyState:
    """One session's warning memory; the initial value means "nothing said yet"."""

    #: Level of the last warning given since the last reset (OK = none yet).
    warned: Severity = Severity.OK
    #: Below-threshold tool calls since that warning.
    calls_since_warning: int = 0
    #: A handoff was asked for since the last reset.
    handoff_asked: bool = False
    #: Tokens at the last few tool calls (at most RECENT_CALLS), oldest first, for the forecast.
    recent: tuple[int, ...] = ()
    #: `now` of the last warning given.
    warned_at: float | None = None


@dataclass(frozen=True, slots=True)
class Warning:
    """A warning to pass to the agent. (Shadows the builtin category inside this module only;
    the name is the session layer's contract.)"""

    severity: Severity
    text: str


@dataclass(frozen=True, slots=True)
class Forecast:
    """What the recent growth rate predicts; None where it cannot say."""

    #: Mean growth per tool call over the recent calls (None: too few calls, or not growing).
    tokens_per_call: float | None
    #: Tool calls until the next severity level is reached (None at CRITICAL or without a rate).
    calls_to_next_threshold: int | None
    #: Tool calls until compaction is due (0 when it already is; None without a rate).
    calls_to_compaction: int | None
    #: The level `calls_to_next_threshold` counts towards.
    next_severity: Severity | None = None


def _growing_tail(series: tuple[int, ...]) -> tuple[int, ...]:
    # A drop (a rewind, a compaction the caller has not reported yet) makes older points
    # meaningless for the rate; only the run since the last drop counts.
    start = len(series) - 1
    while start > 0 and series[start - 1] <= series[start]:
        start -= 1
    return series[start:]


def forecast(recent: tuple[int, ...], usage: Usage, t: Thresholds) -> Forecast:
    """Forecast from `recent` token counts (oldest first) and the current `usage`.

    `usage.tokens` is taken as the newest point; it is appended unless `recent` already ends
    with it (as `on_tool_call` passes it). The rate is the mean growth per call since the last
    drop in tokens; with fewer than two such points or no growth nothing is forecast. Calls are
    rounded up: "2" means the second call from now crosses the line.
    """
    series = recent if recent and recent[-1] == usage.tokens else (*recent, usage.tokens)
    tail = _growing_tail(series)
    if len(tail) < 2 or tail[-1] <= tail[0]:
        return Forecast(None, None, None)
    rate = (tail[-1] - tail[0]) / (len(tail) - 1)

    remaining = remaining_pct(usage, t.basis)
    level = severity_for(remaining, t)
    next_severity: Severity | None = None
    to_next: int | None = None
    if level < Severity.CRITICAL:
        next_severity = Severity(level + 1)
        threshold = t.warning if next_severity == Severity.WARNING else t.critical
        # Work in percentage points of the basis, the same figure the severity is judged on.
        base = usage.window if t.basis == "window" else usage.compaction_at
        gap_tokens = (remaining - threshold) / 100.0 * base
        to_next = max(1, math.ceil(gap_tokens / rate))
    to_compaction = math.ceil(max(0, usage.compaction_at - usage.tokens) / rate)
    return Forecast(rate, to_next, to_compaction, next_severity)


def on_tool_call(
    state: PolicyState, usage: Usage, t: Thresholds, now: float
) -> tuple[PolicyState, Warning | None]:
    """Record one tool call; return the new state and the warning to give, if any.

    get-shit-done's debounce exactly: above the warning threshold nothing is said and the
    counter is left alone; below it the counter counts every call, and a warning is given when
    it is the first since the last reset, when the counter reached `t.debounce`, or at once when
    the level rose from WARNING to CRITICAL. Giving a warning resets the counter and records the
    level; a fall from CRITICAL to WARNING waits for the counter like any repeat. So with
    remaining % per call 40, 30, 30x4, 30, 20, 20x4, 20, 30 the output is none, WARNING, none x4,
    WARNING, CRITICAL, none x4, CRITICAL, none.
    """
    recent = (*state.recent, usage.tokens)[-RECENT_CALLS:]
    state = replace(state, recent=recent)
    level = severity_for(remaining_pct(usage, t.basis), t)
    if level == Severity.OK:
        return state, None
    calls = state.calls_since_warning + 1
    first = state.warned == Severity.OK
    escalated = level == Severity.CRITICAL and state.warned == Severity.WARNING
    if not (first or escalated or calls >= t.debounce):
        return replace(state, calls_since_warning=calls), None

    # Imported here: messages renders this module's types, so a top-level import would cycle.
    from ctxd.messages import warning_text

    text = warning_text(level, usage, t.basis, forecast(recent, usage, t))
    new_state = replace(state, warned=level, calls_since_warning=0, warned_at=now)
    return new_state, Warning(level, text)


def on_compaction(state: PolicyState) -> PolicyState:
    """The state after the agent compacted: as new (fresh debounce, handoff armed, no history).

    The figures before a compaction say nothing about the context after it, and a warning
    suppressed by the old debounce would hide that the new context fills up again.
    """
    del state  # nothing carries over, by design
    return PolicyState()


def on_stop(
    state: PolicyState, usage: Usage, h: HandoffSettings, basis: Basis, stop_hook_active: bool
) -> tuple[PolicyState, str | None]:
    """Return the handoff request to make when the agent stops, if any.

    Asked when used_pct(usage, basis) >= h.at, at most once until the next compaction; never
    when disabled, and never while `stop_hook_active` (the agent is already continuing because
    a Stop hook blocked: asking again would loop).
    """
    if not h.enabled or stop_hook_active or state.handoff_asked:
        return state, None
    if used_pct(usage, basis) < h.at:
        return state, None

    from ctxd.messages import handoff_text  # see on_tool_call

    return replace(state, handoff_asked=True), handoff_text(usage, basis)
