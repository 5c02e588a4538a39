"""Where Claude Code compacts.

Until the measured rule lands (issue 10), the stand-in is `for_window`'s reserve, which errs
early; `[compaction] claude_reserve` overrides the reserve.
"""

from __future__ import annotations

from collections.abc import Mapping

from ctxd.core.compaction import CompactionRules, at_least_one, check_window, for_window

__all__ = ["compaction_point"]


def compaction_point(
    window: int, model: str | None, rules: CompactionRules, config: Mapping[str, str]
) -> int | None:
    check_window(window)
    reserve = rules.claude_reserve
    if reserve is None:
        reserve = for_window(window)
    return at_least_one(window - reserve)
