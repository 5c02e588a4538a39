"""The texts the agent (and through it the user) reads. Pure formatting, no decisions.

Advisory by design: imperative wording ("STOP, save state NOW") made agents override their
users' own instructions, so every text suggests and says that it does not override them.
"""

from __future__ import annotations

from ctxd.core.compaction import tokens_to_compaction
from ctxd.core.measure import Basis, Forecast, Severity, Usage, used_pct

__all__ = ["clock", "handoff_text", "idle_compaction_text", "model_switch_text", "warning_text"]

_BASIS_PHRASE: dict[Basis, str] = {
    "compaction": "of the room before auto-compaction",
    "window": "of the context window",
}

_ADVICE = (
    "This is advisory and does not override the user's instructions: consider finishing "
    "the current step and keeping notes (goal, state, next steps, files) for a handoff."
)


def _percentages(usage: Usage, basis: Basis) -> tuple[int, int]:
    # Round `used` once and derive `left` from it, so the two always add up to 100.
    used = round(used_pct(usage, basis))
    return used, 100 - used


def _approx(x: float) -> str:
    """Two significant figures with thousands separators: 12,345 -> "12,000"."""
    if x < 100:
        return f"{max(1, round(x)):,}"
    scale = 10 ** (len(str(int(x))) - 2)
    return f"{round(x / scale) * scale:,}"


def _calls(n: int) -> str:
    return f"{n} tool call" if n == 1 else f"{n} tool calls"


def _figures(usage: Usage, basis: Basis) -> str:
    used, left = _percentages(usage, basis)
    room = tokens_to_compaction(usage.tokens + usage.pending, usage.compaction_at)
    due = f"about {room:,} tokens before compaction is due" if room else "compaction is due"
    return (
        f"{used}% {_BASIS_PHRASE[basis]} is used, {left}% left "
        f"({usage.tokens:,} of {usage.window:,} tokens; {due})."
    )


def _forecast_sentence(fc: Forecast) -> str:
    if fc.tokens_per_call is None:
        return ""
    parts: list[str] = []
    if fc.calls_to_next_threshold is not None and fc.next_severity is not None:
        parts.append(
            f"about {_calls(fc.calls_to_next_threshold)} until {fc.next_severity.label.upper()}"
        )
    if fc.calls_to_compaction:
        if parts:
            parts.append(f"about {fc.calls_to_compaction} until compaction")
        else:
            parts.append(f"about {_calls(fc.calls_to_compaction)} until compaction")
    if not parts:
        return ""
    return (
        f" At the recent rate of ~{_approx(fc.tokens_per_call)} tokens per tool call: "
        f"{', '.join(parts)}."
    )


def warning_text(
    severity: Severity, usage: Usage, basis: Basis, fc: Forecast, token_limit: int | None = None
) -> str:
    """The warning for `severity` (WARNING or CRITICAL), two or three sentences.

    Begins with "CONTEXT WARNING:" or "CONTEXT CRITICAL:"; states used and remaining % and on
    which basis, tokens of the window, tokens before compaction is due, the forecast parts that
    are known, and advisory advice.
    """
    head = "CONTEXT CRITICAL:" if severity >= Severity.CRITICAL else "CONTEXT WARNING:"
    if token_limit is not None:
        which = "critical" if severity >= Severity.CRITICAL else "warning"
        head += f" past the user's {which} limit of {token_limit:,} tokens."
    return f"{head} {_figures(usage, basis)}{_forecast_sentence(fc)} {_ADVICE}"


def handoff_text(usage: Usage, basis: Basis) -> str:
    """The request for a handoff note, advisory, with the figures that prompted it."""
    used, _ = _percentages(usage, basis)
    return (
        f"CONTEXT HANDOFF: {used}% {_BASIS_PHRASE[basis]} is used "
        f"({usage.tokens:,} of {usage.window:,} tokens). "
        "Please consider writing a brief handoff note (the goal, the current state, the next "
        "steps and the files involved) so that a fresh session can continue this work. "
        "This is a suggestion and does not override the user's instructions."
    )


def clock(at: float, utc_offset: int = 0) -> str:
    """A moment as a clock time, "23:41", `utc_offset` seconds east of UTC ("23:41 UTC" at 0:
    the core knows no time zone, the daemon passes the local one)."""
    minutes = int((at + utc_offset) // 60) % (24 * 60)
    text = f"{minutes // 60:02d}:{minutes % 60:02d}"
    return f"{text} UTC" if utc_offset == 0 else text


def idle_compaction_text(at: float, utc_offset: int = 0) -> str:
    """What the user reads when a session stops that the agent compacts if it stays idle."""
    return (
        f"ctxd: left idle, this session is compacted at {clock(at, utc_offset)} (before its "
        "prompt cache "
        "expires); send a message before then to keep the full context."
    )


def model_switch_text(model: str, tokens: int, window: int, compaction_at: int | None) -> str:
    """What the user reads before a switch to `model` that lands past its limit."""
    if tokens > window:
        where = f"more than its {window:,}-token window"
    else:
        where = f"past its compaction point ({compaction_at:,} of {window:,} tokens)"
    return (
        f"ctxd: this session holds {tokens:,} tokens, {where} on {model}: it would be "
        "compacted at once (or fail). Compact first (/compact) or keep the current model."
    )
