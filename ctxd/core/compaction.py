"""Where a context gets compacted, and how much room is left before that.

Each agent has its own rule (`ctxd.agents.<agent>.compaction`); this module holds what they
share: the signature every rule has, the user's overrides (`CompactionRules`), `for_window` —
the headroom an agent harness reserves for a window (`CompactionSettings.forWindow`, exactly),
which is the rule for an agent whose own rule is unknown — and the arithmetic on a point.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from ctxd.errors import InvalidInput

__all__ = [
    "AGENT_VERSION",
    "CompactionRule",
    "CompactionRules",
    "at_least_one",
    "check_window",
    "for_window",
    "reserve_rule",
    "share_of",
    "tokens_to_compaction",
]


@dataclass(frozen=True, slots=True)
class CompactionRules:
    """The user's overrides of the agents' compaction rules (config `[compaction]`); the
    defaults are what the real agents do (see each agent's `compaction` module)."""

    #: Gemini CLI compresses at this share of the window.
    gemini_fraction: float = 0.5
    #: Codex CLI compacts at this share of its catalog window.
    codex_fraction: float = 0.9
    #: Codex reports this share of the catalog window as model_context_window.
    codex_reported_share: float = 0.95
    #: Codex's model_auto_compact_token_limit, when the user set one.
    codex_token_limit: int | None = None
    #: Claude Code reserve override (window - reserve); None means Claude Code's own rule.
    claude_reserve: int | None = None

    def __post_init__(self) -> None:
        for name in ("gemini_fraction", "codex_fraction", "codex_reported_share"):
            value = getattr(self, name)
            if not 0 < value <= 1:
                raise InvalidInput(f"{name} must be in (0, 1], got {value}")
        if self.codex_token_limit is not None and self.codex_token_limit <= 0:
            raise InvalidInput(f"codex_token_limit must be positive, got {self.codex_token_limit}")
        if self.claude_reserve is not None and self.claude_reserve < 0:
            raise InvalidInput(f"claude_reserve must not be negative, got {self.claude_reserve}")


#: An agent's rule: (window, model, the user's overrides, the agent's own configuration as the
#: hook reported it) -> the token count at which it compacts, or None when it never
#: auto-compacts. Raises InvalidInput for a window <= 0.
CompactionRule = Callable[[int, str | None, CompactionRules, Mapping[str, str]], int | None]

#: The key under which a rule finds the agent's version in that configuration, when the
#: session's transcript or statusline said it (`SessionState.agent_version`).
AGENT_VERSION = "version"


def check_window(window: int) -> None:
    """InvalidInput for a window <= 0 (every rule starts with this)."""
    if window <= 0:
        raise InvalidInput(f"window must be positive, got {window}")


def for_window(window: int) -> int:
    """The reserve of `CompactionSettings.forWindow`, exactly (integer division throughout).

    200,000 -> 16,384; 1,000,000 -> 62,500; 2,000,000 -> 65,536; 8,192 -> 2,048.
    Raises InvalidInput for window <= 0.
    """
    check_window(window)
    w = window
    legacy_reserve = min(16384, max(1024, w // 4))
    reserve = min(65536, max(w // 16, legacy_reserve))
    if reserve >= w // 2:
        reserve = max(128, w // 4)
    return reserve


def at_least_one(point: int) -> int:
    # A point of 0 would mean "compacting before the first token": never true, and it would make
    # every percentage on the compaction basis a division by zero.
    return max(1, point)


def reserve_rule(
    window: int, model: str | None, rules: CompactionRules, config: Mapping[str, str]
) -> int | None:
    """The rule for an agent whose own rule is unknown: window - for_window(window)."""
    check_window(window)
    return at_least_one(window - for_window(window))


def share_of(tokens: float, share: float) -> int:
    """`tokens * share`, rounded down. Shares like 0.95 are not exact in binary (258,400 / 0.95
    * 0.9 must give 244,800, not 244,799); the nudge is far below one token."""
    return int(tokens * share + 1e-6)


def tokens_to_compaction(tokens: int, point: int) -> int:
    """Tokens the context may still grow before compaction is due; 0 once it is due."""
    return max(0, point - tokens)
