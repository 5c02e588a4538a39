"""ctxd's own statusline, the same for every agent whose UI runs a statusLine command: the
figures the daemon knows, rendered as one line of text; and the bounds every agent's payload
parser shares (its size, a percentage's range).
"""

from __future__ import annotations

import math
import re
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the figures come from the core; only their type is needed here
    from ctxd.core.session import Figures

__all__ = ["MAX_PAYLOAD_BYTES", "StatusView", "percent", "render_figures", "render_statusline"]

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

    `Opus 4.6 ▓▓▓▓░░░░░░ 45% of window · 450k/1M · 487k to compact`

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
        # "of window": the status, the model's warning and this line each name their basis.
        shown = f"{math.floor(pct + 0.5)}% of window" if pct is not None else "?%"
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


#: The most a reported percentage may be: a context can pass its window a little, not tenfold.
_MAX_PERCENT = 1000.0


def percent(value: object) -> float | None:
    """A payload's percentage as a float: None unless a finite number of 0 to _MAX_PERCENT."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    pct = float(value)
    # Past _MAX_PERCENT it is no share of any window (1.7e308 % overflowed the bar's width).
    return pct if math.isfinite(pct) and 0.0 <= pct <= _MAX_PERCENT else None
