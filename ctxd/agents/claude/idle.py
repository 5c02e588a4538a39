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
Not modelled: a compaction skipped at fire time because a rate limit is near, or a timer that
fired over a minute late (the machine slept).
"""

from __future__ import annotations

from collections.abc import Mapping

from ctxd.agents.claude.compaction import config_from, parse_js_int, settings_json
from ctxd.core.events import PromptCache

__all__ = ["IDLE_ENV", "IDLE_KEY", "ONE_HOUR", "idle_compaction_at", "idle_floor"]

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
