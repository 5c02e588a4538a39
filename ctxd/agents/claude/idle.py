"""When Claude Code compacts a session that stays idle, read from the 2.1.332 bundle.

An attended (interactive) session whose main prompt cache was last written with a 1-hour TTL,
and that is still warm, is compacted while idle once it holds at least
`max(100,000, CLAUDE_CODE_IDLE_COMPACT_MIN_TOKENS or 200,000)` context tokens, at

    last activity + 0.9 * (cache expires_at - last activity)

that is 54 minutes after the last request (the cache lives 60). It does not happen with the
`idleCompaction: false` setting, nor when compaction is off altogether (DISABLE_COMPACT,
DISABLE_AUTO_COMPACT, `autoCompactEnabled: false`), nor with a 5-minute cache. The statusline
payload's `prompt_cache` carries the TTL ("1h"/"5m"), `warm` and `expires_at` (epoch seconds,
rounded up): only the interactive UI runs the statusline, so a payload means attended.
From 2.1.335 a session resumed after that cache expired (it was closed, so nothing compacted it
while idle) is compacted before its first message instead ("Compacted because the prompt cache
expired, using a summary written earlier"; a `compact_boundary` marked `precomputed`):
`compacts_at_resume` takes the same conditions as idle compaction (the bundle's checks), with
the cache's expiry past. Read from the 2.1.337 bundle, not measured (it needs an hour of idling).
Not modelled: a compaction skipped at fire time because a rate limit is near, or a timer that
fired over a minute late (the machine slept).
"""

from __future__ import annotations

from collections.abc import Mapping

from ctxd.agents.claude.compaction import (
    VERSION_KEY,
    config_from,
    is_version_at_least,
    parse_js_int,
    settings_json,
)
from ctxd.core.events import PromptCache

__all__ = [
    "IDLE_ENV",
    "IDLE_KEY",
    "ONE_HOUR",
    "compacts_at_resume",
    "idle_compaction_at",
    "idle_floor",
]

#: The statusline's `prompt_cache.ttl` values, in seconds.
ONE_HOUR = 3600
TTLS = {"1h": ONE_HOUR, "5m": 300}
#: The settings.json key that turns idle compaction off.
IDLE_KEY = "idleCompaction"
IDLE_ENV = "CLAUDE_CODE_IDLE_COMPACT_MIN_TOKENS"
#: The floor: never below FLOOR_MIN, FLOOR_DEFAULT unless the variable says otherwise.
FLOOR_MIN = 100_000
FLOOR_DEFAULT = 200_000
#: The share of the cache's remaining life after which the timer fires.
SHARE = 0.9
#: The first version that compacts a session resumed after its prompt cache expired.
RESUME_COMPACTION_FROM = (2, 1, 335)


def idle_floor(config: Mapping[str, str]) -> int:
    """The fewest context tokens an idle session is compacted at."""
    value = parse_js_int(config.get(IDLE_ENV))
    return max(FLOOR_MIN, FLOOR_DEFAULT if value is None else value)


def idle_compaction_at(tokens: int, cache: PromptCache, config: Mapping[str, str]) -> float | None:
    """When Claude Code compacts the session if it stays idle (epoch seconds), or None."""
    if cache.ttl != ONE_HOUR or not cache.warm or cache.expires_at is None:
        return None
    if settings_json(config, IDLE_KEY) is False or not config_from(config).enabled:
        return None
    if tokens < idle_floor(config):
        return None
    last = cache.expires_at - cache.ttl
    return last + SHARE * (cache.expires_at - last)


def compacts_at_resume(
    tokens: int, cache: PromptCache, config: Mapping[str, str], now: float
) -> bool:
    """Whether Claude Code compacts a session resumed at `now` before its first message."""
    if not is_version_at_least(config.get(VERSION_KEY), RESUME_COMPACTION_FROM):
        return False
    if cache.ttl != ONE_HOUR or cache.expires_at is None or now < cache.expires_at:
        return False
    if settings_json(config, IDLE_KEY) is False or not config_from(config).enabled:
        return False
    return tokens >= idle_floor(config)
