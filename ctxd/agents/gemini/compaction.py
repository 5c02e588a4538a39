"""Where Gemini CLI compresses: at a share of the window, `model.compressionThreshold` in its
settings.json (0.5 by default; older versions named it
`chatCompression.contextPercentageThreshold`).
Measured with 0.61.0: with a 1,048,576 window a prompt of 12,000 was left alone and one of
600,000 (>= 524,288) was compressed before the next request.

The agent configuration is the flat mapping `settings_config` makes of settings.json (JSON path
-> value as JSON text). A threshold set there outranks ctxd's own `fraction`
(`[compaction.gemini]`), whose default is Gemini CLI's own: what the CLI reads is what it does.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import orjson

from ctxd.core.compaction import AgentOverrides, ConfigKey, at_least_one, check_window, share_of

__all__ = ["CONFIG_KEYS", "FRACTION", "SETTINGS_KEYS", "compaction_point", "settings_config"]

#: The settings.json keys read, newest first.
SETTINGS_KEYS = ("model.compressionThreshold", "chatCompression.contextPercentageThreshold")

#: ctxd's own setting for this rule (`[compaction.gemini]`): the share of the window Gemini CLI
#: compresses at when its settings say nothing.
FRACTION = ConfigKey("fraction", float, low=0.01, high=1, default=0.5, alias="gemini_fraction")
CONFIG_KEYS = (FRACTION,)


def settings_config(doc: Mapping[str, Any]) -> dict[str, str]:
    """The keys of a parsed settings.json the rule reads, flattened, values as JSON text."""
    out: dict[str, str] = {}
    for key in SETTINGS_KEYS:
        section, _, name = key.partition(".")
        table = doc.get(section)
        if isinstance(table, Mapping) and name in table:
            out[key] = orjson.dumps(table[name]).decode()
    return out


def _threshold(config: Mapping[str, str]) -> float | None:
    for key in SETTINGS_KEYS:
        text = config.get(key)
        if text is None:
            continue
        try:
            value = orjson.loads(text)
        except orjson.JSONDecodeError:
            continue
        usable = isinstance(value, int | float) and not isinstance(value, bool)
        if usable and math.isfinite(value) and 0 < value <= 1:
            return float(value)
    return None


def compaction_point(
    window: int, model: str | None, overrides: AgentOverrides, config: Mapping[str, str]
) -> int | None:
    check_window(window)
    fraction = _threshold(config) or FRACTION.of(overrides)
    return at_least_one(share_of(window, fraction))
