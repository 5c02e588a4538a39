"""Claude Code's statusLine command: its payload in, one line of text out.

Claude Code runs the statusLine command only in its interactive UI, at most every 300 ms, and
shows the first line it prints. Its payload is the only place where Claude Code itself states
the context figures (`context_window`), so it is parsed into a `StatuslineReport` for the core;
what the daemon knows comes back as `Figures` and is rendered by `render_statusline`.

From 2.1.336 `used_percentage` counts against the auto-compact window, not the model's window
(`context_window_size` stays the model's): the payload then reveals the auto-compact window in
force, whatever decided it (a server experiment included), as tokens * 100 / percentage, which
`compact_window_from` recovers from the rounded percentage.
"""

from __future__ import annotations

import math
import re
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ctxd.agents.claude.compaction import (
    DEFAULT_AUTO_WINDOW,
    PCT_OF_AUTO_WINDOW_FROM,
    WINDOW_CAP_MIN,
    is_version_at_least,
)
from ctxd.agents.claude.idle import TTLS
from ctxd.agents.claude.transcript import context_tokens
from ctxd.agents.hooks import load_payload
from ctxd.core.events import PromptCache, StatuslineReport

if TYPE_CHECKING:  # the figures come from the core; only their type is needed here
    from ctxd.core.session import Figures

__all__ = [
    "StatusView",
    "compact_window_from",
    "parse_statusline",
    "percent",
    "render_figures",
    "render_statusline",
]

#: Statusline payloads are a few KB; anything far bigger is not one.
MAX_PAYLOAD_BYTES = 1024 * 1024

# Anything that could break the one-line contract or move the cursor.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]+")
_MAX_MODEL_CHARS = 40

_FULL = "▓"
_EMPTY = "░"
_SEP = " · "
# Plain ASCII markers read the same with or without colour, in any font and in logs.
_MARKERS = {"ok": "", "warning": "! ", "critical": "!! "}


@dataclass(frozen=True, slots=True)
class StatusView:
    """What the daemon knows about a session, ready to render."""

    model: str | None
    tokens: int | None
    window: int
    #: Where `window` came from ("statusline", "transcript", "table", "default", ...); a
    #: "default" window (no source said anything: ctxd's guess) is shown as "~1M".
    window_source: str
    used_pct: float | None
    #: Tokens left before the agent compacts; 0 or less means compaction is due.
    tokens_to_compaction: int | None
    #: "ok" | "warning" | "critical"; anything else renders as "ok".
    severity: str
    #: The agent never compacts on its own: the line says so instead of a distance.
    auto_compaction: bool = True
    #: `tokens` is an estimate (after a compaction whose record gave no size): shown with "~".
    estimated: bool = False
    #: When Claude Code compacts the session if it stays idle (epoch seconds): shown as a
    #: local clock time.
    idle_compaction_at: float | None = None


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


def render_figures(model: str | None, fig: Figures) -> bytes:
    """The statusline for a session's current figures."""
    return render_statusline(
        StatusView(
            model=model,
            tokens=fig.tokens,
            window=fig.window.size,
            window_source=fig.window.source,
            used_pct=fig.used_pct,
            tokens_to_compaction=fig.tokens_to_compaction if fig.auto_compaction else None,
            severity=fig.severity.label,
            auto_compaction=fig.auto_compaction,
            estimated=fig.estimated,
            idle_compaction_at=fig.idle_compaction_at,
        )
    )


def render_statusline(view: StatusView, width: int = 10) -> bytes:
    """One line of UTF-8 text ending in a newline, e.g.

    `Opus 4.6 ▓▓▓▓░░░░░░ 45% · 450k/1M · 487k to compact`

    prefixed with "! " on warning and "!! " on critical. With `tokens` None the line says
    "no usage yet" and shows the window.
    """
    width = max(1, width)
    parts: list[str] = []
    model = _one_line(view.model)
    window = ("~" if view.window_source == "default" else "") + _human(view.window)
    if view.tokens is None:
        head = f"{model} " if model else ""
        parts.append(f"{head}{_EMPTY * width} no usage yet")
        parts.append(f"window {window}")
    else:
        pct = _used_pct(view)
        bar = _bar(pct, width)
        # Half up, as Claude Code's own used_percentage (92.5 % shows as 93).
        shown = f"{math.floor(pct + 0.5)}%" if pct is not None else "?%"
        parts.append(f"{model} {bar} {shown}" if model else f"{bar} {shown}")
        approx = "~" if view.estimated else ""
        parts.append(f"{approx}{_human(view.tokens)}/{window}")
        if view.tokens > view.window:
            parts.append("window too small?")
        if view.tokens_to_compaction is not None:
            left = view.tokens_to_compaction
            parts.append("compaction due" if left <= 0 else f"{_human(left)} to compact")
        elif not view.auto_compaction:
            parts.append("no auto-compaction")
        if view.idle_compaction_at is not None:
            at = time.strftime("%H:%M", time.localtime(view.idle_compaction_at))
            parts.append(f"idle compact {at}")
    line = _MARKERS.get(view.severity, "") + _SEP.join(parts)
    return line.encode() + b"\n"


def _used_pct(view: StatusView) -> float | None:
    if view.used_pct is not None:
        return view.used_pct
    if view.tokens is None or view.window <= 0:
        return None
    return 100.0 * view.tokens / view.window


def _bar(pct: float | None, width: int) -> str:
    if pct is None:
        return _EMPTY * width
    # Rounded down: the bar is full only when the window is.
    filled = min(width, max(0, math.floor(min(pct, 100.0) * width / 100)))
    return _FULL * filled + _EMPTY * (width - filled)


def _human(n: int) -> str:
    """Compact token count: 950, 1.5k, 450k, 1M, 1.2M."""
    if n < 0:
        return "-" + _human(-n)
    if n < 1000:
        return str(n)
    if n < 1_000_000:
        k = n / 1000
        if k < 10:
            return f"{k:.1f}".rstrip("0").rstrip(".") + "k"
        return f"{math.floor(k)}k"
    m = n / 1_000_000
    return f"{m:.1f}".rstrip("0").rstrip(".") + "M"


def _one_line(text: str | None) -> str:
    if not text:
        return ""
    flat = " ".join(_CONTROL.sub(" ", text).split())
    return flat if len(flat) <= _MAX_MODEL_CHARS else flat[: _MAX_MODEL_CHARS - 1] + "…"


def _object(value: object) -> dict[str, object]:
    return value if isinstance(value, dict) else {}


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _count(value: object) -> int | None:
    # bool is an int in Python; JSON true is not a token count.
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return None
    return value


#: The most a reported percentage may be: a context can pass its window a little, not tenfold.
_MAX_PERCENT = 1000.0


def percent(value: object) -> float | None:
    """A payload's percentage as a float: None unless a finite number of 0 to _MAX_PERCENT."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    pct = float(value)
    # Past _MAX_PERCENT it is no share of any window (1.7e308 % overflowed the bar's width).
    return pct if math.isfinite(pct) and 0.0 <= pct <= _MAX_PERCENT else None
