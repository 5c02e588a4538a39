"""Where Cline CLI compacts, and the settings that move it.

Its rule (3.0.65, @cline/core 0.0.86, the compaction step it runs before every model request):
the usable input is the model's `maxInputTokens` (capped by its window) or, for a model without
one, 0.9 x its window (128,000 when nothing is known); Cline compacts when the request reaches
0.9 of that. It compares its own estimate of the request, scaled up by how far its estimate of
the previous request fell short of the tokens that request really took (at most 4 times): so in
effect it compacts once the last answer's `inputTokens` (ctxd's figure) reach 0.9 x usable
input. Measured with the real CLI and a usable input of 40,000: 32,000 was left alone, 38,000
compacted before the next request. The agentic strategy (the default) keeps the last 20,000
tokens of messages and summarises the rest; `basic` drops old messages.

Cline compares its estimate of the next request, not the last figure: the last answer's input plus
its output, a tool's result and the user's next words. So it may compact a little below the point
(a real session on Cline's own provider compacted after an answer of 178,902 on a model whose
point is 180,000); `LEAD` lets ctxd still read the window from such a compaction.

Cline's catalog gives nearly every model a `maxInputTokens`, the window itself for most
(`models.py` lists those below it): so ctxd takes the usable input to be the provider settings'
`contextWindow` (`cline auth`'s, in providers.json for the provider last used: Cline makes it
the model's window and `maxInputTokens` both), else the catalog's figure, else the window.
global-settings.json `compactionEnabled: false` turns compaction off (`--compaction off` does
too, for one run, which no file shows).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from ctxd.agents.cline.models import max_input
from ctxd.core.compaction import AgentOverrides, at_least_one, check_window

__all__ = [
    "DEFAULT_WINDOW",
    "ENABLED_KEY",
    "LEAD",
    "MAX_INPUT_KEY",
    "compaction_point",
    "configured_window",
    "settings_config",
]

#: Cline's usable input for a model it knows nothing of (ctxd's own guess of the window is
#: used instead: the model may be one Cline's catalog knows).
DEFAULT_WINDOW = 128_000
#: How far below its point Cline may compact, as a fraction of the point
#: (`AgentSpec.compaction_lead`): what a tool's result or a file read adds to the next request.
LEAD = 0.1
#: The flat configuration's keys.
MAX_INPUT_KEY = "maxInputTokens"
ENABLED_KEY = "compactionEnabled"
MODEL_KEY = "model"
PROVIDER_KEY = "provider"
_THRESHOLD = 0.9


def settings_config(doc: Mapping[str, Any]) -> dict[str, str]:
    """What the rule reads of providers.json or global-settings.json, flattened."""
    out: dict[str, str] = {}
    if doc.get(ENABLED_KEY) is False:
        out[ENABLED_KEY] = "false"
    providers = doc.get("providers")
    last = doc.get("lastUsedProvider")
    if isinstance(providers, Mapping) and isinstance(last, str):
        out[PROVIDER_KEY] = last
        entry = providers.get(last)
        settings = entry.get("settings") if isinstance(entry, Mapping) else None
        if isinstance(settings, Mapping):
            window = settings.get("contextWindow")
            if type(window) is int and window > 0:
                out[MAX_INPUT_KEY] = str(window)
            model = settings.get("model")
            if isinstance(model, str) and model:
                out[MODEL_KEY] = model
    return out


def _configured(config: Mapping[str, str]) -> int | None:
    text = config.get(MAX_INPUT_KEY)
    return int(text) if text is not None and text.isdigit() and int(text) > 0 else None


def configured_window(model: str | None, config: Mapping[str, str]) -> int | None:
    """The window the provider's settings give the model they name (None: they give none)."""
    named = config.get(MODEL_KEY)
    if model is not None and named is not None and model != named:
        return None
    return _configured(config)


def compaction_point(
    window: int, model: str | None, overrides: AgentOverrides, config: Mapping[str, str]
) -> int | None:
    check_window(window)
    if config.get(ENABLED_KEY) == "false":
        return None
    configured = configured_window(model, config)
    if configured is None:
        configured = max_input(config.get(PROVIDER_KEY), model)
    usable = min(configured, window) if configured is not None else window
    # `request >= trigger` compacts: the first whole token at or above it. The nudge keeps a
    # product like 36,000.000000000004 from rounding one token up.
    return at_least_one(math.ceil(usable * _THRESHOLD - 1e-6))
