"""When to warn and when to ask for a handoff: pure state transitions, `now` passed in.

The debounce is get-shit-done's rule exactly, because it is what users know (see
`on_tool_call`), with one fix users asked for: `on_compaction` starts the session afresh, so the
first warning after a compaction is given at once and the handoff may be asked for again.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from ctxd.core.events import Reply
from ctxd.core.measure import Basis, Forecast, Severity, Usage, remaining_pct, used_pct
from ctxd.core.messages import handoff_text, warning_text
from ctxd.core.settings import HandoffSettings, Thresholds

__all__ = [
    "RECENT_CALLS",
    "ContextWarning",
    "PolicyState",
    "forecast",
    "handoff_reply",
    "level_lines",
    "limit_passed",
    "on_compaction",
    "on_prompt",
    "on_stop",
    "on_tool_call",
    "severity_for",
    "tokens_severity",
]

#: How many tool calls of token history the forecast looks at.
RECENT_CALLS = 8


def severity_for(remaining: float, t: Thresholds, tokens: int | None = None) -> Severity:
    """CRITICAL if remaining <= t.critical, WARNING if remaining <= t.warning, else OK; or the
    level of the token limits `tokens` reached (`t.critical_tokens`, `t.warning_tokens`), if
    higher: whichever limit comes first."""
    by_tokens = Severity.OK if tokens is None else tokens_severity(tokens, t)
    if remaining <= t.critical:
        return Severity.CRITICAL
    if remaining <= t.warning:
        return max(Severity.WARNING, by_tokens)
    return by_tokens


def tokens_severity(tokens: int, t: Thresholds) -> Severity:
    """The level the absolute token limits alone give `tokens` (OK when none is set)."""
    if t.critical_tokens is not None and tokens >= t.critical_tokens:
        return Severity.CRITICAL
    if t.warning_tokens is not None and tokens >= t.warning_tokens:
        return Severity.WARNING
    return Severity.OK


def _token_limit(level: Severity, usage: Usage, t: Thresholds) -> int | None:
    """The token limit that set `level`, when it was one (and the percentage alone would not)."""
    by_pct = severity_for(remaining_pct(usage, t.basis), t)
    if tokens_severity(usage.tokens, t) < level or by_pct >= level:
        return None
    return t.critical_tokens if level >= Severity.CRITICAL else t.warning_tokens


def limit_passed(usage: Usage, t: Thresholds) -> tuple[str, float] | None:
    """Which of the user's limits sets the session's level now, by its `[thresholds]` key, and
    its value: ("warning_tokens", 150000) when a token limit does (and the percentage alone
    would not), ("warning", 35.0) (% left) when a percentage does; None at OK."""
    level = severity_for(remaining_pct(usage, t.basis), t, usage.tokens)
    if level == Severity.OK:
        return None
    which = "critical" if level >= Severity.CRITICAL else "warning"
    tokens = _token_limit(level, usage, t)
    if tokens is not None:
        return f"{which}_tokens", tokens
    return which, t.critical if level >= Severity.CRITICAL else t.warning


def level_lines(t: Thresholds, window: int, compaction_at: int) -> dict[str, object]:
    """Where the warning and the critical level start, in context tokens, for a chart: the
    percentage on its basis (the compaction point or the window), or the token limit when it
    comes first; each with the `[thresholds]` setting that puts it there, in words. (On the
    compaction basis a pending figure can move the real crossing slightly.)"""
    base = compaction_at if t.basis == "compaction" else window
    basis = "of the room before compaction" if t.basis == "compaction" else "of the window"
    out: dict[str, object] = {}
    for name, pct, tokens in (
        ("warning", t.warning, t.warning_tokens),
        ("critical", t.critical, t.critical_tokens),
    ):
        at = math.ceil(base * (1 - pct / 100))
        label = f"{pct:g} % left {basis}"
        if tokens is not None and tokens < at:
            at, label = tokens, f"{name}_tokens = {tokens:,}"
        out[f"{name}_at"] = at
        out[f"{name}_label"] = label
    return out


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
    #: The handoff was asked for with a block, and no stop since said the agent went on with it
    #: (`on_stop`).
    handoff_unconfirmed: bool = False


@dataclass(frozen=True, slots=True)
class ContextWarning:
    """A warning to pass to the agent's context."""

    severity: Severity
    text: str


def _growing_tail(series: tuple[int, ...]) -> tuple[int, ...]:
    # A drop (a rewind, a compaction the caller has not reported yet) makes older points
    # meaningless for the rate; only the run since the last drop counts.
    start = len(series) - 1
    while start > 0 and series[start - 1] <= series[start]:
        start -= 1
    return series[start:]


def _tokens_to(level: Severity, usage: Usage, t: Thresholds) -> float:
    """Tokens the session grows by until `severity_for` gives it `level` or higher: the nearest
    of the percentage thresholds and token limits of `level` and the levels above it (a
    critical token limit may come before the warning percentage)."""
    remaining = remaining_pct(usage, t.basis)
    # Percentage points of the basis, the same figure the severity is judged on.
    base = usage.window if t.basis == "window" else usage.compaction_at
    limits = (
        (Severity.WARNING, t.warning, t.warning_tokens),
        (Severity.CRITICAL, t.critical, t.critical_tokens),
    )
    gaps: list[float] = []
    for limit_level, pct, tokens in limits:
        if limit_level < level:
            continue
        gaps.append((remaining - pct) / 100.0 * base)
        if tokens is not None:
            gaps.append(tokens - usage.tokens)
    return min(gaps)


def forecast(recent: tuple[int, ...], usage: Usage, t: Thresholds) -> Forecast:
    """Forecast from `recent` token counts (oldest first) and the current `usage`.

    `usage.tokens` is taken as the newest point; it is appended unless `recent` already ends
    with it (as `on_tool_call` passes it). The rate is the mean growth per call since the last
    drop in tokens; with fewer than two such points or no growth nothing is forecast. The
    current level is `severity_for`'s, token limits included; the next is the one above it,
    reached at its percentage threshold or its token limit, whichever comes first (or at a
    higher level's, when that comes sooner). Calls are rounded up: "2" means the second call
    from now crosses the line.
    """
    series = recent if recent and recent[-1] == usage.tokens else (*recent, usage.tokens)
    tail = _growing_tail(series)
    if len(tail) < 2 or tail[-1] <= tail[0]:
        return Forecast(None, None, None)
    rate = (tail[-1] - tail[0]) / (len(tail) - 1)

    level = severity_for(remaining_pct(usage, t.basis), t, usage.tokens)
    next_severity: Severity | None = None
    to_next: int | None = None
    if level < Severity.CRITICAL:
        next_severity = Severity(level + 1)
        to_next = max(1, math.ceil(_tokens_to(next_severity, usage, t) / rate))
    to_compaction = math.ceil(max(0, usage.compaction_at - usage.tokens - usage.pending) / rate)
    return Forecast(rate, to_next, to_compaction, next_severity)


def on_tool_call(
    state: PolicyState, usage: Usage, t: Thresholds, now: float
) -> tuple[PolicyState, ContextWarning | None]:
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
    level = severity_for(remaining_pct(usage, t.basis), t, usage.tokens)
    if level == Severity.OK:
        return state, None
    calls = state.calls_since_warning + 1
    first = state.warned == Severity.OK
    escalated = level == Severity.CRITICAL and state.warned == Severity.WARNING
    if not (first or escalated or calls >= t.debounce):
        return replace(state, calls_since_warning=calls), None

    text = warning_text(
        level, usage, t.basis, forecast(recent, usage, t), _token_limit(level, usage, t)
    )
    new_state = replace(state, warned=level, calls_since_warning=0, warned_at=now)
    return new_state, ContextWarning(level, text)


def on_prompt(
    state: PolicyState, usage: Usage, t: Thresholds, now: float
) -> tuple[PolicyState, ContextWarning | None]:
    """A new prompt is no tool call: it speaks only when the level rose since the last warning
    (which the debounce would let through at once anyway), and then counts as one."""
    if severity_for(remaining_pct(usage, t.basis), t, usage.tokens) <= state.warned:
        return state, None
    return on_tool_call(state, usage, t, now)


def on_compaction(state: PolicyState) -> PolicyState:
    """The state after the agent compacted: as new (fresh debounce, handoff armed, no history).

    The figures before a compaction say nothing about the context after it, and a warning
    suppressed by the old debounce would hide that the new context fills up again.
    """
    del state  # nothing carries over, by design
    return PolicyState()


def on_stop(
    state: PolicyState,
    usage: Usage,
    h: HandoffSettings,
    basis: Basis,
    stop_hook_active: bool,
    idle_compaction: bool = False,
) -> tuple[PolicyState, str | None]:
    """Return the handoff request to make when the agent stops, if any.

    Asked when used_pct(usage, basis) >= h.at, or when the agent compacts the session if it
    stays idle (`idle_compaction`: that compaction comes first, at the size it has now, long
    before the size point), at most once until the next compaction; never when disabled, and
    never while `stop_hook_active` (the agent is already continuing because a Stop hook
    blocked: asking again would loop).

    A request is recorded as delivered only when the next stop says so (`handoff_unconfirmed`
    until then): an agent that honoured a block runs one more turn and stops with
    `stop_hook_active` (every agent ctxd blocks: its own hooks, or ctxd's plugin and extension
    when they sent the request on). A next stop without it means the block never reached the
    agent (its client gave up waiting for the answer, or lost it), so the request is made again
    there, once: an agent that never honours a block is not asked at every stop. This echo asks
    nothing new of the clients (each already says `stop_hook_active` when its own block made
    the agent go on), where an acknowledgement would be one more request that can be lost the
    same way; and it is honest, since a request a client did receive makes that stop say so.
    A message to the user has no echo to wait for. Whether a request goes as a block is in the
    end the agent's dialect's to say (one that shows no message makes it one): the daemon sets
    `handoff_unconfirmed` by what it sent.
    """
    if state.handoff_unconfirmed:
        if stop_hook_active or not h.enabled:
            return replace(state, handoff_unconfirmed=False), None
        return replace(state, handoff_unconfirmed=False), handoff_text(usage, basis)
    if not h.enabled or stop_hook_active or state.handoff_asked:
        return state, None
    if used_pct(usage, basis) < h.at and not idle_compaction:
        return state, None

    asked = replace(state, handoff_asked=True, handoff_unconfirmed=h.action == "block")
    return asked, handoff_text(usage, basis)


def handoff_reply(text: str | None, h: HandoffSettings) -> Reply:
    """How a handoff request reaches the agent: shown to the user ("message"), or a Stop block
    that makes the agent write the note itself ("block")."""
    if text is None:
        return Reply()
    if h.action == "block":
        return Reply(block_reason=text)
    return Reply(user_message=text)
