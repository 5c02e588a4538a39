"""Claude Code's statusLine command: its payload in, one line of text out.

Claude Code runs the statusLine command only in its interactive UI, at most every 300 ms, and
shows the first line it prints. Its payload is the only place where Claude Code itself states
the context figures (`context_window`), so it is parsed into a `StatuslineReport` for the core;
what the daemon knows comes back as `Figures` and is rendered by ctxd.agents.statusline.

From 2.1.336 `used_percentage` counts against the auto-compact window, not the model's window
(`context_window_size` stays the model's): the payload then reveals the auto-compact window in
force, whatever decided it (a server experiment included), as tokens * 100 / percentage, which
`compact_window_from` recovers from the rounded percentage.
"""

from __future__ import annotations

import math

from ctxd.agents.claude.compaction import (
    DEFAULT_AUTO_WINDOW,
    PCT_OF_AUTO_WINDOW_FROM,
    WINDOW_CAP_MIN,
    is_version_at_least,
)
from ctxd.agents.claude.idle import TTLS
from ctxd.agents.claude.transcript import context_tokens
from ctxd.agents.hooks import load_payload
from ctxd.agents.statusline import MAX_PAYLOAD_BYTES, percent
from ctxd.core.events import PromptCache, StatuslineReport

__all__ = ["compact_window_from", "parse_statusline"]


def parse_statusline(payload: bytes) -> StatuslineReport:
    """Parse the statusline command's stdin. Raises `InvalidInput` with a one-line reason."""
    data = load_payload(payload, "statusline payload", MAX_PAYLOAD_BYTES)
    session_id = str(data["session_id"])
    model = _object(data.get("model"))
    context = _object(data.get("context_window"))
    usage = context.get("current_usage")
    window = _count(context.get("context_window_size"))
    version = _text(data.get("version"))
    used = percent(context.get("used_percentage"))
    tokens = context_tokens(usage)
    compact_window = None
    # Without a version the payload is taken as the newest's, as current installs are.
    if is_version_at_least(version, PCT_OF_AUTO_WINDOW_FROM):
        compact_window = compact_window_from(tokens, used, window or None)
        used = None  # not a percentage of the window any more
    return StatuslineReport(
        session_id=session_id,
        transcript_path=_text(data.get("transcript_path")),
        cwd=_text(data.get("cwd")),
        model_id=_text(model.get("id")),
        model_name=_text(model.get("display_name")),
        window=window if window else None,
        used_pct=used,
        tokens=tokens,
        agent_version=version,
        prompt_cache=_prompt_cache(data.get("prompt_cache")),
        compact_window=compact_window,
    )


#: The granularities an auto-compact window is recognised at, roundest first.
_ROUND = (100_000, 50_000, 10_000, 1_000)
#: A percentage this coarse (the window's possible range this wide, relative) tells a window
#: only when one known window fits it.
_COARSE = 0.1


def compact_window_from(tokens: int | None, pct: float | None, window: int | None) -> int | None:
    """The auto-compact window a 2.1.336+ payload reveals: `tokens` are `pct` % of it, the
    percentage rounded to a whole number (75 % for 300,000 tokens: 400,000), at most the
    model's `window`. Of the windows the rounding allows, the one known window that fits
    (the model's own, the 400,000 default) is taken, else, when the percentage is fine enough
    to tell, the roundest; None when the payload says too little (no tokens, 0 %, 1 % of a
    range that holds both known windows)."""
    # 100 % is where Claude Code clamps it: the tokens may lie anywhere past the window.
    if tokens is None or pct is None or tokens <= 0 or not 0 < pct < 100:
        return None
    low = tokens * 100 / (pct + 0.5)
    high = tokens * 100 / (pct - 0.5) if pct > 0.5 else math.inf
    estimate = tokens * 100 / pct
    known = {DEFAULT_AUTO_WINDOW, *(() if window is None else (window,))}
    fits = [w for w in known if low <= w <= high]
    if len(fits) == 1:
        return int(fits[0])
    if (high - low) / estimate > _COARSE:
        return None
    for step in _ROUND:
        first = math.ceil(low / step) * step
        if first <= high:
            last = math.floor(high / step) * step
            near = min(range(first, last + 1, step), key=lambda w: abs(w - estimate))
            found = max(WINDOW_CAP_MIN, near)
            return found if window is None else min(window, found)
    return None


def _prompt_cache(value: object) -> PromptCache | None:
    cache = _object(value)
    ttl = cache.get("ttl")
    seconds = TTLS.get(ttl) if isinstance(ttl, str) else None
    if seconds is None:
        return None
    expires = cache.get("expires_at")
    usable = isinstance(expires, int | float) and not isinstance(expires, bool)
    at = float(expires) if usable else None  # type: ignore[arg-type]
    return PromptCache(
        ttl=seconds,
        expires_at=at if at is not None and math.isfinite(at) else None,
        warm=cache.get("warm") is True,
    )


def _object(value: object) -> dict[str, object]:
    return value if isinstance(value, dict) else {}


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _count(value: object) -> int | None:
    # bool is an int in Python; JSON true is not a token count.
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return None
    return value
