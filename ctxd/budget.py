"""How many tokens a session may still grow before its agent compacts.

Two pure pieces: `for_window`, the compaction headroom scaled to a window (an agent harness's
`CompactionSettings.forWindow`, reproduced exactly), and `compaction_point`, the token count at
which each agent actually compacts. What the real agents were seen to do (captures under
harness/*/samples):

- Claude Code 2.1.332 auto-compacted between about 965,100 and 970,100 tokens of a 1M window.
  Its exact rule is not published; `window - for_window(window).reserve` (937,500 of 1M) is used
  as a stand-in that errs slightly early, which is the safe side for a warning.
  `CompactionRules.claude_reserve` overrides the reserve.
- Gemini CLI 0.61.0 compresses when the reported prompt reaches half the model's window: with a
  1,048,576 window a prompt of 12,000 was left alone and one of 600,000 (>= 524,288) was
  compressed before the next request.
- Codex CLI 0.171.0 compacts at 90 % of its catalog window, while its transcript reports 95 % of
  that window as `model_context_window` (258,400 for 272,000). A response reporting 250,100
  total tokens (> 244,800) was compacted mid-turn; one of 120,100 was not. With
  `model_auto_compact_token_limit = 100000` the same 120,100 was compacted.
"""

from __future__ import annotations

from dataclasses import dataclass

from ctxd.errors import InvalidInput


@dataclass(frozen=True, slots=True)
class Budget:
    """The headroom for a window: compaction is due when tokens > window - reserve."""

    window: int
    reserve: int
    keep: int


def _check_window(window: int) -> None:
    if window <= 0:
        raise InvalidInput(f"window must be positive, got {window}")


def for_window(window: int) -> Budget:
    """`CompactionSettings.forWindow` exactly (integer division throughout).

    200,000 -> reserve 16,384, keep 25,000; 1,000,000 -> 62,500, 125,000;
    2,000,000 -> 65,536, 131,072; 8,192 -> 2,048, 4,096. Raises InvalidInput for window <= 0.
    """
    _check_window(window)
    w = window
    legacy_reserve = min(16384, max(1024, w // 4))
    legacy_keep = min(20000, max(2048, w // 2))
    reserve = min(65536, max(w // 16, legacy_reserve))
    keep = min(131072, max(w // 8, legacy_keep))
    if reserve >= w // 2:
        reserve = max(128, w // 4)
    if keep >= w:
        keep = max(256, w // 2)
    return Budget(window=w, reserve=reserve, keep=keep)


@dataclass(frozen=True, slots=True)
class CompactionRules:
    """Per-agent compaction rules; the defaults are what the real agents do (module docstring)."""

    #: Gemini CLI compresses at this share of the window.
    gemini_fraction: float = 0.5
    #: Codex CLI compacts at this share of its catalog window.
    codex_fraction: float = 0.9
    #: Codex reports this share of the catalog window as model_context_window.
    codex_reported_share: float = 0.95
    #: Codex's model_auto_compact_token_limit, when the user set one.
    codex_token_limit: int | None = None
    #: Claude Code reserve override; None means for_window(window).reserve.
    claude_reserve: int | None = None

    def __post_init__(self) -> None:
        for name in ("gemini_fraction", "codex_fraction", "codex_reported_share"):
            value = getattr(self, name)
            if not 0 < value <= 1:
                raise InvalidInput(f"{name} must be in (0, 1], got {value}")
        if self.codex_token_limit is not None and self.codex_token_limit <= 0:
            raise InvalidInput(f"codex_token_limit must be positive, got {self.codex_token_limit}")
        if self.claude_reserve is not None and self.claude_reserve < 0:
            raise InvalidInput(f"claude_reserve must not be negative, got {self.claude_reserve}")


def _floor(x: float) -> int:
    # Shares like 0.95 are not exact in binary; 258_400 / 0.95 * 0.9 must give 244_800, not
    # 244_799. The nudge is far below one token for any real window.
    return int(x + 1e-6)


def compaction_point(agent: str, window: int, rules: CompactionRules = CompactionRules()) -> int:
    """The token count at which `agent` compacts a context of `window` tokens (always >= 1).

    - "gemini": int(window * gemini_fraction) (1,048,576 -> 524,288);
    - "codex": codex_token_limit when set, else window / codex_reported_share * codex_fraction,
      where `window` is the window Codex reports (258,400 -> 244,800);
    - "claude" and any other agent: window - reserve (for_window, or claude_reserve).

    Raises InvalidInput for window <= 0.
    """
    _check_window(window)
    if agent == "gemini":
        point = _floor(window * rules.gemini_fraction)
    elif agent == "codex":
        if rules.codex_token_limit is not None:
            point = rules.codex_token_limit
        else:
            catalog = round(window / rules.codex_reported_share)
            point = _floor(catalog * rules.codex_fraction)
    else:
        reserve = rules.claude_reserve
        if reserve is None:
            reserve = for_window(window).reserve
        point = window - reserve
    # A point of 0 would mean "compacting before the first token": never true, and it would
    # make every percentage on the compaction basis a division by zero.
    return max(1, point)


def tokens_to_compaction(tokens: int, point: int) -> int:
    """Tokens the context may still grow before compaction is due; 0 once it is due."""
    return max(0, point - tokens)
