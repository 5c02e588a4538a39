"""Where Qwen Code compresses, and the windows it runs its models with.

Its rule (0.24.4, `computeThresholds` in core/services/chatCompressionService.ts): compress once
the prompt reaches `auto = min(pct * window, window - 20,000 - 13,000)` (the summary's output
reserve and a buffer; the ceiling only when it is positive), `pct` being settings.json
`context.autoCompactThreshold` (0 < pct <= 1), 0.85 by default. 1,000,000 -> 850,000;
262,144 -> 222,823; 200,000 -> 167,000; 131,072 -> 98,072.

The prompt it compares is the last reported `prompt_tokens` plus that answer's output tokens plus
an estimate of the message about to be sent, so it compresses a little before the reported
prompt itself reaches `auto`. Seen with 0.24.4: with a 1,000,000 window a reported prompt of
900,000 was compressed before the next request, mid-turn; 31,000 was left alone.

The agent configuration is the flat mapping `settings_config` makes of settings.json (the
user's, then the workspace's `.qwen/settings.json`, which outranks it).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import orjson

from ctxd.core.compaction import AgentOverrides, at_least_one, check_window

__all__ = ["SETTINGS_KEY", "WINDOWS", "compaction_point", "settings_config"]

#: The settings.json key of the share of the window, as `section.name`.
SETTINGS_KEY = "context.autoCompactThreshold"
DEFAULT_SHARE = 0.85
#: `SUMMARY_RESERVE` (the summary's maximum output) + `AUTOCOMPACT_BUFFER`.
_RESERVE = 20_000 + 13_000

#: Qwen Code's windows for its own models (`tokenLimit()`, core/core/tokenLimits.ts, 0.24.4);
#: every recorded answer also states the window it ran with (`contextWindowSize`), which wins.
WINDOWS: Mapping[str, int] = {
    "qwen": 262_144,
    "qwen3-coder-": 262_144,
    "qwen3-max": 262_144,
    "qwen3-coder-plus": 1_000_000,
    "qwen3-coder-flash": 1_000_000,
    "qwen3.": 1_000_000,
    "qwen-plus-latest": 1_000_000,
    "qwen-flash-latest": 1_000_000,
    "coder-model": 1_000_000,
}


def settings_config(doc: Mapping[str, Any]) -> dict[str, str]:
    """The key of a parsed settings.json the rule reads, flattened, its value as JSON text."""
    section, _, name = SETTINGS_KEY.partition(".")
    table = doc.get(section)
    if isinstance(table, Mapping) and name in table:
        return {SETTINGS_KEY: orjson.dumps(table[name]).decode()}
    return {}


def _share(config: Mapping[str, str]) -> float:
    text = config.get(SETTINGS_KEY)
    if text is None:
        return DEFAULT_SHARE
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        return DEFAULT_SHARE
    usable = isinstance(value, int | float) and not isinstance(value, bool)
    # Qwen Code ignores anything outside (0, 1] and falls back to its default.
    return float(value) if usable and math.isfinite(value) and 0 < value <= 1 else DEFAULT_SHARE


def compaction_point(
    window: int, model: str | None, overrides: AgentOverrides, config: Mapping[str, str]
) -> int:
    check_window(window)
    share = _share(config)
    # `effectiveTokens < auto` is left alone: the first whole token at or above `auto` compresses.
    # The nudge keeps a share like 0.85 (inexact in binary) from rounding one token up.
    proportional = math.ceil(window * share - 1e-6)
    ceiling = window - _RESERVE
    return at_least_one(min(proportional, ceiling) if ceiling > 0 else proportional)
