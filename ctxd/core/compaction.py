"""Where a context gets compacted, and how much room is left before that.

Each agent has its own rule (`ctxd.agents.<agent>.compaction`); this module holds what they
share: the signature every rule has, the user's overrides (`CompactionOverrides`, keyed by agent,
each agent's keys declared as `ConfigKey`s in its own package), `for_window` —
the headroom an agent harness reserves for a window (`CompactionSettings.forWindow`, exactly),
which is the rule for an agent whose own rule is unknown — and the arithmetic on a point.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Generic, TypeVar

from ctxd.core.events import PromptCache
from ctxd.errors import InvalidInput

__all__ = [
    "AGENT_VERSION",
    "COMPACTED_FROM",
    "REPORTED_COMPACT_WINDOW",
    "AgentOverrides",
    "AgentRule",
    "CompactWindow",
    "CompactWindowRule",
    "CompactionOverrides",
    "CompactionRule",
    "ConfigKey",
    "IdleCompactionRule",
    "ResumeCompactionRule",
    "at_least_one",
    "check_window",
    "for_agent",
    "for_window",
    "reserve_rule",
    "share_of",
    "tokens_to_compaction",
]


N = TypeVar("N", int, float)
D = TypeVar("D")


@dataclass(frozen=True, slots=True)
class ConfigKey(Generic[N, D]):
    """One key of ctxd's own settings for an agent's rule: `name` under `[compaction.<agent>]`
    in ctxd's config, a number of type `kind` from `low` to `high` (None: no upper bound).

    An agent declares its keys (`AgentSpec.config_keys`), `ctxd.daemon.config` checks the user's
    values against them, and the agent's rule reads them back with `of`, which gives `default`
    when the user set none (None for a key that means nothing unless set).
    """

    name: str
    kind: type[N]
    low: N
    default: D
    high: N | None = None
    #: The key's older spelling directly under `[compaction]`, still read.
    alias: str | None = None

    def accepts(self, value: object) -> bool:
        """`value`, as TOML gave it, is one this key takes."""
        if isinstance(value, bool) or not isinstance(value, int | float):
            return False
        if self.kind is int and not isinstance(value, int):
            return False
        return self.low <= value and (self.high is None or value <= self.high)

    @property
    def expected(self) -> str:
        """What `accepts` takes, for an error message ("a number from 0.01 to 1")."""
        whole = self.kind is int
        kind, show = ("a whole number", str) if whole else ("a number", "{:g}".format)
        if self.high is None:
            return f"{kind} of at least {show(self.low)}"
        return f"{kind} from {show(self.low)} to {show(self.high)}"

    def of(self, overrides: AgentOverrides) -> N | D:
        """The user's value in one agent's overrides, else `default`."""
        value = overrides.get(self.name)
        return self.default if value is None else self.kind(value)


#: One agent's overrides (`[compaction.<agent>]`): key -> value, each taken by its `ConfigKey`;
#: a key left out means its default.
AgentOverrides = Mapping[str, float | int]
#: The user's overrides of the agents' compaction rules, by agent name (an agent left out: all
#: its defaults, which are what the real agents do).
CompactionOverrides = Mapping[str, AgentOverrides]

#: An agent's rule: (window, model, the user's overrides, the agent's own configuration as the
#: hook reported it) -> the token count at which it compacts, or None when it never
#: auto-compacts. Raises InvalidInput for a window <= 0.
CompactionRule = Callable[[int, str | None, CompactionOverrides, Mapping[str, str]], int | None]
#: A second kind of compaction, while the session is idle: (context tokens, the prompt cache as
#: the agent reported it, the agent's configuration) -> when the agent compacts the session if
#: it stays idle (epoch seconds), or None when it will not.
IdleCompactionRule = Callable[[int, PromptCache, Mapping[str, str]], float | None]
#: A third kind, when an idle session is resumed: (context tokens, the prompt cache as the agent
#: last reported it, the agent's configuration, now) -> whether the agent compacts the session
#: before its first message (its cache expired while it was closed).
ResumeCompactionRule = Callable[[int, PromptCache, Mapping[str, str], float], bool]
#: (window, model, the agent's configuration) -> the window the agent's automatic compaction
#: counts against (its "auto-compact window", at most the model's window) and the source that
#: decided it; None when the agent has no such notion.
CompactWindowRule = Callable[[int, str | None, Mapping[str, str]], "CompactWindow | None"]
#: The same, given only that agent's own overrides (see `for_agent`).
AgentRule = Callable[[int, str | None, AgentOverrides, Mapping[str, str]], int | None]

_NONE: AgentOverrides = MappingProxyType({})


def for_agent(agent: str, rule: AgentRule) -> CompactionRule:
    """`rule` as a `CompactionRule` that reads the overrides of `agent` and no other's."""

    def rule_of_agent(
        window: int, model: str | None, overrides: CompactionOverrides, config: Mapping[str, str]
    ) -> int | None:
        return rule(window, model, overrides.get(agent, _NONE), config)

    return rule_of_agent


#: The key under which a rule finds the agent's version in that configuration, when the
#: session's transcript or statusline said it (`SessionState.agent_version`).
AGENT_VERSION = "version"
#: The key under which a rule finds the auto-compact window the agent itself reported for the
#: session (`StatuslineReport.compact_window`), as decimal text.
REPORTED_COMPACT_WINDOW = "reported_compact_window"
#: The key under which a rule finds the size the session's last automatic compaction happened
#: at (`SessionState.compacted_from`), as decimal text.
COMPACTED_FROM = "compacted_from"


@dataclass(frozen=True, slots=True)
class CompactWindow:
    """The window an agent's automatic compaction counts against (`size`, > 0) and which source
    decided it (the agent's own names: "statusline", "env", "settings", "default", ...)."""

    size: int
    source: str


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
    window: int, model: str | None, overrides: CompactionOverrides, config: Mapping[str, str]
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
