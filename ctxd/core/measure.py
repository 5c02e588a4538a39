"""How full a context is: the figures of one moment and the levels they fall into.

The vocabulary shared by the policy (which decides) and the messages (which word it): both
import this module, and neither imports the other's internals the wrong way round.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import Literal

from ctxd.errors import InvalidInput

__all__ = [
    "Basis",
    "Forecast",
    "Severity",
    "Usage",
    "parse_tokens",
    "remaining_pct",
    "used_pct",
]

#: The suffixes a number of tokens may carry, as ctxd prints them (`725k`, `1M`).
_TOKEN_UNITS = {"k": 1_000, "m": 1_000_000}


def parse_tokens(text: str) -> int:
    """A positive number of tokens as a person writes it, in any of the forms ctxd prints:
    `200000`, `200_000`, `200,000`, `200k`, `200K`, `1M`, `1m`, `1.5M`. ValueError (its text
    says what is wrong) otherwise."""
    plain = text.strip().replace("_", "").replace(",", "")
    unit = _TOKEN_UNITS.get(plain[-1:].lower(), 1) if plain else 1
    digits = plain[:-1] if unit != 1 else plain
    try:
        if unit == 1:
            value = int(digits)
        elif digits.isdigit():  # exact: 200k is 200,000, whatever a float would make of it
            value = int(digits) * unit
        else:
            value = round(float(digits) * unit)  # 1.5M
    except (ValueError, OverflowError):
        raise ValueError(f"not a number of tokens: {text!r} (e.g. 200000, 200k, 1M)") from None
    if value <= 0:
        raise ValueError(f"must be a positive number of tokens, got {text}")
    return value


Basis = Literal["compaction", "window"]


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
class Usage:
    """One moment's figures, computed by the caller. InvalidInput for tokens < 0 or a window or
    compaction point <= 0."""

    tokens: int
    window: int
    compaction_at: int
    #: The statusline's used_percentage (of the whole window), authoritative when given.
    reported_used_pct: float | None = None
    #: Tokens the agent counts towards compaction on top of `tokens` (see
    #: `UsageUpdate.pending`); on the compaction basis the count is `tokens + pending`.
    pending: int = 0

    def __post_init__(self) -> None:
        if self.tokens < 0 or self.pending < 0:
            raise InvalidInput(
                f"tokens must not be negative, got {self.tokens} (+{self.pending} pending)"
            )
        if self.window <= 0:
            raise InvalidInput(f"window must be positive, got {self.window}")
        if self.compaction_at <= 0:
            raise InvalidInput(f"compaction point must be positive, got {self.compaction_at}")


@dataclass(frozen=True, slots=True)
class Forecast:
    """What the recent growth rate predicts; None where it cannot say."""

    #: Mean growth per tool call over the recent calls (None: too few calls, or not growing).
    tokens_per_call: float | None
    #: Tool calls until the next severity level is reached, at a percentage threshold or a token
    #: limit, whichever comes first (None at CRITICAL or without a rate).
    calls_to_next_threshold: int | None
    #: Tool calls until compaction is due (0 when it already is; None without a rate).
    calls_to_compaction: int | None
    #: The level `calls_to_next_threshold` counts towards: the one above the current level,
    #: token limits included.
    next_severity: Severity | None = None
    #: When the agent compacts the session if it stays idle (epoch seconds; None: it will not),
    #: which comes first unless the size point is reached by the next call.
    idle_compaction_at: float | None = None

    @property
    def first_compaction(self) -> str | None:
        """Which compaction comes first: "idle" (the session left as it is), "size" (the next
        tool call reaches the point), or None when neither is known to come."""
        if self.calls_to_compaction is not None and self.calls_to_compaction <= 1:
            return "size"
        if self.idle_compaction_at is not None:
            return "idle"
        return "size" if self.calls_to_compaction is not None else None


def _floor(pct: float) -> float:
    # Never clamped at 100: a usage beyond the window (or the compaction point) must show as
    # such, since it means the window assumed is wrong.
    return max(0.0, pct)


def used_pct(usage: Usage, basis: Basis) -> float:
    """Percentage used, >= 0; above 100 when the usage is beyond the window (or point).

    "window": the statusline's reported_used_pct when given, else 100 * tokens / window.
    "compaction": 100 * (tokens + pending) / compaction_at, the share of the room before
    auto-compaction (what Claude Code's UI calls "context left until auto-compact"); the same
    threshold then means the same thing on every agent, whereas on an agent that compacts at
    half the window a "remaining % of the window" threshold would never fire.
    """
    if basis == "window":
        if usage.reported_used_pct is not None:
            return _floor(usage.reported_used_pct)
        return _floor(100.0 * usage.tokens / usage.window)
    return _floor(100.0 * (usage.tokens + usage.pending) / usage.compaction_at)


def remaining_pct(usage: Usage, basis: Basis) -> float:
    """100 - used_pct(usage, basis)."""
    return 100.0 - used_pct(usage, basis)
