"""Where OpenCode compacts.

Its rule (1.18.33, `isOverflow` in session/compaction.ts, read from the shipped bundle): compact
once a step's `tokens.total` (input + output + cache, so the answer counts) reaches the usable
context; never with config `compaction.auto: false` or a context limit of 0. The usable context
is `limit.input - reserved` for a model with an input limit (`reserved` = config
`compaction.reserved`, else min(20,000, its output reserve)), else `limit.context - its output
reserve`, the output reserve being min(`limit.output`, 32,000) (OUTPUT_TOKEN_MAX). Checked with
the real CLI at the token on either side of the point, for the output reserve, an input limit
and `compaction.reserved` (tests/e2e/test_opencode_limits_e2e.py).

Kilo CLI (7.7.7, read from its bundle) compacts after a step by the same rule (its count adds
`reasoning`; its `KILO_DISABLE_AUTOCOMPACT`, which the plugin does not pass, is not followed). Its
`compaction.threshold_percent` (none by default) adds a check before a turn's first request:
compact when the last step's count, plus an estimate of what was added since, reaches
min(usable context, floor(`limit.context` × percent / 100)). ctxd takes that lower figure as
Kilo's point (`threshold_point`): the one a session reaches first at a user's turn (within a
turn's tool loop Kilo goes on to the usable context).

The limits come from OpenCode's model catalogue (models.dev), which ctxd does not read, or from
its config (`ctxd.agents.opencode_family.config`: `provider.<id>.models.<id>.limit`), which it does:
the window is the config's `limit.context` when it sets one (`config.configured_window`), else
ctxd's (`[windows]`); without the config's `limit.output` the output reserve is taken as the
largest OpenCode uses, 32,000 (a model with a smaller output limit compacts a little later).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from ctxd.agents.opencode_family.config import limit, setting
from ctxd.core.compaction import AgentOverrides, at_least_one, check_window

__all__ = ["COMPACTION_BUFFER", "OUTPUT_TOKEN_MAX", "compaction_point", "threshold_point"]

OUTPUT_TOKEN_MAX = 32_000
#: The reserve below an input limit when the config sets none (`COMPACTION_BUFFER`).
COMPACTION_BUFFER = 20_000


def threshold_point(
    window: int, model: str | None, overrides: AgentOverrides, config: Mapping[str, str]
) -> int | None:
    """Kilo's rule: OpenCode's point, lowered to floor(context × `compaction.threshold_percent`
    / 100) when the config sets that percentage (see the module docstring)."""
    point = compaction_point(window, model, overrides, config)
    percent = setting(config, "threshold_percent")
    if point is None or type(percent) not in (int, float) or not percent >= 0:
        return point
    context = limit(config, "context", model) or window
    return at_least_one(min(point, math.floor(context * (percent / 100))))


def compaction_point(
    window: int, model: str | None, overrides: AgentOverrides, config: Mapping[str, str]
) -> int | None:
    check_window(window)
    if setting(config, "auto") is False or limit(config, "context", model) == 0:
        return None
    output = limit(config, "output", model)
    reserve = min(output, OUTPUT_TOKEN_MAX) if output else OUTPUT_TOKEN_MAX
    input_limit = limit(config, "input", model)
    if input_limit:
        reserved = setting(config, "reserved")
        if type(reserved) is not int or reserved < 0:
            reserved = min(COMPACTION_BUFFER, reserve)
        return at_least_one(input_limit - reserved)
    return at_least_one(window - min(reserve, window))
