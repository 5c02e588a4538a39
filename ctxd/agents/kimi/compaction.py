"""Where Kimi Code compacts, and the window it runs a model with.

Its rule (2.1.0, agent-core-v2 `DefaultCompactionStrategy`): compact once the context reaches
`ratio × window` or leaves less than `reserved` of it, that is at
`min(ceil(ratio × window), window − reserved)`, the ceiling only when `0 < reserved < window`.
`ratio` is config.toml `[loop_control] compaction_trigger_ratio` (0.5 to 0.99, 0.85 by default),
`reserved` is `[loop_control] reserved_context_size` (50,000 by default). 262,144 -> 212,144;
200,000 -> 150,000; 1,000,000 -> 850,000. The window is the model's input limit, else its
`max_context_size` (`[models.<alias>]` in config.toml; `KIMI_MODEL_MAX_CONTEXT_SIZE` for the
model `KIMI_MODEL_NAME` names, 262,144 when unset).

The context it compares is its last measured count (the last request's input and output, as
the provider reported them) plus an estimate of what was added since, checked before each step:
the step after the one whose answer crossed the point compacts first. Seen with 2.1.0 against a
mock (tests/e2e/test_kimi_e2e.py).

The agent configuration is the flat mapping `settings_config` makes of config.toml, with the
environment's `KIMI_MODEL_NAME` and `KIMI_MODEL_MAX_CONTEXT_SIZE` over it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from ctxd.core.compaction import AgentOverrides, at_least_one, check_window

__all__ = [
    "ENV_MODEL",
    "ENV_WINDOW",
    "WINDOWS",
    "compaction_point",
    "configured_window",
    "settings_config",
]

RATIO_KEY = "loop_control.compaction_trigger_ratio"
RESERVED_KEY = "loop_control.reserved_context_size"
#: `window.<model>`: a window config.toml gives a model, by its alias and by its provider name.
WINDOW_PREFIX = "window."
ENV_MODEL = "KIMI_MODEL_NAME"
ENV_WINDOW = "KIMI_MODEL_MAX_CONTEXT_SIZE"
#: The alias Kimi gives the model `KIMI_MODEL_NAME` names (SessionStart's `model`).
ENV_ALIAS = "__kimi_env_model__"
DEFAULT_RATIO = 0.85
RATIO_RANGE = (0.5, 0.99)
DEFAULT_RESERVED = 50_000
#: The window of the model `KIMI_MODEL_NAME` names when `KIMI_MODEL_MAX_CONTEXT_SIZE` is unset.
DEFAULT_ENV_WINDOW = 262_144

#: Moonshot's models' windows (`limit.context` in the catalog 2.1.0 ships, provider moonshotai).
WINDOWS: Mapping[str, int] = {
    "kimi-k2": 262_144,
    "kimi-k3": 1_048_576,
}


def settings_config(doc: Mapping[str, Any]) -> dict[str, str]:
    """The keys of a parsed config.toml the rule and the window read, as text."""
    out: dict[str, str] = {}
    loop = doc.get("loop_control")
    if isinstance(loop, Mapping):
        for key in (RATIO_KEY, RESERVED_KEY):
            value = loop.get(key.partition(".")[2])
            if _number(value) is not None:
                out[key] = str(value)
    models = doc.get("models")
    if isinstance(models, Mapping):
        for alias, entry in models.items():
            if not isinstance(entry, Mapping):
                continue
            size = entry.get("max_input_size") or entry.get("max_context_size")
            if type(size) is int and size > 0:
                out[WINDOW_PREFIX + str(alias)] = str(size)
                name = entry.get("model")
                if isinstance(name, str) and name:
                    out.setdefault(WINDOW_PREFIX + name, str(size))
    return out


def configured_window(model: str | None, config: Mapping[str, str]) -> int | None:
    """The window Kimi's configuration gives `model` (its alias or its provider name)."""
    if model is None:
        return None
    env_model = config.get(ENV_MODEL)
    if env_model and model in (env_model, ENV_ALIAS):
        return _positive(config.get(ENV_WINDOW)) or DEFAULT_ENV_WINDOW
    return _positive(config.get(WINDOW_PREFIX + model))


def compaction_point(
    window: int, model: str | None, overrides: AgentOverrides, config: Mapping[str, str]
) -> int:
    check_window(window)
    ratio = _number(config.get(RATIO_KEY))
    if ratio is None or not RATIO_RANGE[0] <= ratio <= RATIO_RANGE[1]:
        ratio = DEFAULT_RATIO  # Kimi refuses a value outside its range and keeps its default
    reserved = _number(config.get(RESERVED_KEY))
    reserved_tokens = int(reserved) if reserved is not None else DEFAULT_RESERVED
    # The nudge keeps a ratio like 0.85 (inexact in binary) from rounding one token up.
    point = math.ceil(window * ratio - 1e-6)
    if 0 < reserved_tokens < window:
        point = min(point, window - reserved_tokens)
    return at_least_one(point)


def _number(value: object) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value) if math.isfinite(value) and value >= 0 else None
    if isinstance(value, str):
        try:
            parsed = float(value)
        except ValueError:
            return None
        return parsed if math.isfinite(parsed) and parsed >= 0 else None
    return None


def _positive(text: str | None) -> int | None:
    if text is None or not text.strip().isdigit():
        return None
    value = int(text)
    return value if value > 0 else None
