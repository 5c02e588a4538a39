"""Where Copilot CLI compacts, and the window it runs a model with.

Its rule (1.0.102, "infinite sessions": `InfiniteSessionConfig` in the package's
copilot-sdk/types.d.ts): a background compaction starts once the context reaches
`backgroundCompactionThreshold` of the token limit, 0.80 by default, and the session waits for
it at `bufferExhaustionThreshold`, 0.95. The token limit is the model's prompt limit, which every
usage record states (`maxPromptTokens`; 64,000 for a bring-your-own model with no catalog entry,
`COPILOT_PROVIDER_MAX_PROMPT_TOKENS` overrides it), and the context it compares is the last
prompt plus that answer's output plus what was added since (`currentTokens` of
`session.compaction_start`).

Measured with 1.0.102 against a mock (tests/e2e/test_copilot_e2e.py): with a limit of 64,000 a
reported prompt of 56,000 (+40 output) started a compaction before the next request, 20,000 did
not; the compaction was applied while the session went on (`session.compaction_complete`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from ctxd.core.compaction import AgentOverrides, at_least_one, check_window

__all__ = ["BACKGROUND_SHARE", "compaction_point"]

BACKGROUND_SHARE = 0.80


def compaction_point(
    window: int, model: str | None, overrides: AgentOverrides, config: Mapping[str, str]
) -> int:
    check_window(window)
    # The nudge keeps a share inexact in binary from rounding one token up.
    return at_least_one(math.ceil(window * BACKGROUND_SHARE - 1e-6))
