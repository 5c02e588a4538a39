"""Where OpenCode compacts.

Its rule (1.18.33, `SessionCompaction.isOverflow`, session/compaction.ts): compact once a step's
`tokens.total` (input + output + cache, so the answer counts) reaches the usable context,
`limit.input - reserved` for a model with an input limit (`reserved` = config
`compaction.reserved`, else min(20,000, the model's output limit)), else `limit.context -
min(limit.output, 32,000)` (OUTPUT_TOKEN_MAX); never with `compaction.auto: false` or a context
limit of 0. The limits come from its model catalogue (models.dev) or the provider's config, which
ctxd does not read: the window is ctxd's (`[windows]`), and the output reserve is taken as the
largest OpenCode uses, 32,000 (a model with a smaller output limit compacts a little later).
"""

from __future__ import annotations

from collections.abc import Mapping

from ctxd.core.compaction import AgentOverrides, at_least_one, check_window

__all__ = ["OUTPUT_TOKEN_MAX", "compaction_point"]

OUTPUT_TOKEN_MAX = 32_000


def compaction_point(
    window: int, model: str | None, overrides: AgentOverrides, config: Mapping[str, str]
) -> int:
    check_window(window)
    return at_least_one(window - min(OUTPUT_TOKEN_MAX, window))
