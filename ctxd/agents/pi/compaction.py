"""Where pi compacts.

Its rule (0.73.1, docs/compaction.md and `shouldCompact` in dist/core/compaction/compaction.js):
after an agent loop ends, and before a prompt is sent, it compacts when the last answer's
`totalTokens` (input + output + cacheRead + cacheWrite) is over `contextWindow - reserveTokens`,
`reserveTokens` being settings.json `compaction.reserveTokens` (16,384 by default;
`~/.pi/agent/settings.json`, then `<cwd>/.pi/settings.json`, which outranks it), and never with
`compaction.enabled: false`. The first count that compacts is `window - reserve + 1`:
200,000 -> 183,617. Its reader reports the prompt as `tokens` and the output as `pending`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from ctxd.core.compaction import AgentOverrides, at_least_one, check_window

__all__ = ["DEFAULT_RESERVE", "ENABLED_KEY", "RESERVE_KEY", "compaction_point", "settings_config"]

RESERVE_KEY = "compaction.reserveTokens"
ENABLED_KEY = "compaction.enabled"
DEFAULT_RESERVE = 16_384


def settings_config(doc: Mapping[str, Any]) -> dict[str, str]:
    """The keys of a parsed settings.json the rule reads, flattened, values as JSON text."""
    table = doc.get("compaction")
    if not isinstance(table, Mapping):
        return {}
    return {
        f"compaction.{name}": orjson.dumps(table[name]).decode()
        for name in ("reserveTokens", "enabled")
        if name in table
    }


def _reserve(config: Mapping[str, str]) -> int:
    text = config.get(RESERVE_KEY)
    try:
        value = orjson.loads(text) if text is not None else DEFAULT_RESERVE
    except orjson.JSONDecodeError:
        return DEFAULT_RESERVE
    if isinstance(value, bool) or not isinstance(value, int | float):
        return DEFAULT_RESERVE
    return int(value)


def compaction_point(
    window: int, model: str | None, overrides: AgentOverrides, config: Mapping[str, str]
) -> int | None:
    check_window(window)
    if config.get(ENABLED_KEY) == "false":
        return None
    return at_least_one(window - _reserve(config) + 1)
