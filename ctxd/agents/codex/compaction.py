"""Where Codex CLI compacts: at 90 % of its catalog window, while its rollout reports 95 % of
that window as `model_context_window` (258,400 for 272,000), or at `model_auto_compact_token_limit`
(config.toml) when that is lower. Measured with 0.171.0: a response reporting 250,100 total
tokens (> 244,800) was compacted mid-turn; one of 120,100 was not, and with the limit at 100,000
it was.

The agent configuration is the flat mapping `settings_config` makes of config.toml; a limit set
there outranks ctxd's own `token_limit` (`[compaction.codex]`), since it is what Codex itself reads.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ctxd.core.compaction import AgentOverrides, ConfigKey, at_least_one, check_window, share_of

__all__ = [
    "CONFIG_KEYS",
    "FRACTION",
    "LIMIT_KEY",
    "REPORTED_SHARE",
    "TOKEN_LIMIT",
    "compaction_point",
    "settings_config",
]

LIMIT_KEY = "model_auto_compact_token_limit"
#: Codex reports this share of its catalog window as `model_context_window`.
REPORTED_SHARE = 0.95

#: ctxd's own settings for this rule (`[compaction.codex]`): the share of the catalog window
#: Codex compacts at, and a token limit as if config.toml set one.
FRACTION = ConfigKey("fraction", float, low=0.01, high=1, default=0.9, alias="codex_fraction")
TOKEN_LIMIT = ConfigKey("token_limit", int, low=1, default=None, alias="codex_token_limit")
CONFIG_KEYS = (FRACTION, TOKEN_LIMIT)


def settings_config(doc: Mapping[str, Any]) -> dict[str, str]:
    """The keys of a parsed config.toml the rule reads, as text."""
    value = doc.get(LIMIT_KEY)
    if type(value) is int:
        return {LIMIT_KEY: str(value)}
    return {}


def _limit(config: Mapping[str, str], overrides: AgentOverrides) -> int | None:
    text = config.get(LIMIT_KEY)
    if text is not None and text.strip().isdigit() and int(text) > 0:
        return int(text)
    return TOKEN_LIMIT.of(overrides)


def compaction_point(
    window: int, model: str | None, overrides: AgentOverrides, config: Mapping[str, str]
) -> int | None:
    """`window` is the window Codex reports (258,400 -> 244,800)."""
    check_window(window)
    catalog = round(window / REPORTED_SHARE)
    point = share_of(catalog, FRACTION.of(overrides))
    limit = _limit(config, overrides)
    if limit is not None:
        point = min(point, limit)
    return at_least_one(point)
