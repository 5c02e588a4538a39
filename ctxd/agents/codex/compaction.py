"""Where Codex CLI compacts: at 90 % of its catalog window, while its rollout reports 95 % of
that window as `model_context_window` (258,400 for 272,000), or at `model_auto_compact_token_limit`
when the user set one. Seen with 0.171.0: a response reporting 250,100 total tokens (> 244,800)
was compacted mid-turn; one of 120,100 was not, and with the limit at 100,000 it was."""

from __future__ import annotations

from collections.abc import Mapping

from ctxd.core.compaction import CompactionRules, at_least_one, check_window, share_of

__all__ = ["compaction_point"]


def compaction_point(
    window: int, model: str | None, rules: CompactionRules, config: Mapping[str, str]
) -> int | None:
    """`window` is the window Codex reports (258,400 -> 244,800)."""
    check_window(window)
    if rules.codex_token_limit is not None:
        return at_least_one(rules.codex_token_limit)
    catalog = round(window / rules.codex_reported_share)
    return at_least_one(share_of(catalog, rules.codex_fraction))
