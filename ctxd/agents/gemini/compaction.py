"""Where Gemini CLI compresses: at a share of the window (`model.compressionThreshold`, 0.5 by
default). Seen with 0.61.0: with a 1,048,576 window a prompt of 12,000 was left alone and one of
600,000 (>= 524,288) was compressed before the next request."""

from __future__ import annotations

from collections.abc import Mapping

from ctxd.core.compaction import CompactionRules, at_least_one, check_window, share_of

__all__ = ["WINDOWS", "compaction_point"]

#: Gemini models ship 1,048,576-token windows.
WINDOWS: Mapping[str, int] = {"gemini-": 1_048_576}


def compaction_point(
    window: int, model: str | None, rules: CompactionRules, config: Mapping[str, str]
) -> int | None:
    check_window(window)
    return at_least_one(share_of(window, rules.gemini_fraction))
