"""A one-line status for a terminal multiplexer's bar (tmux's `#(ctxd-line)`): the session of a
directory, else the worst of all live sessions, rendered from the status rows.

Pure: it reads the rows of the status document (`Status.document()["sessions"]`) and returns
text; the daemon answers the `line` op with it and a stdlib client prints it (clients/ctxd_line.py).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from ctxd.agents.statusline import StatusView, render_statusline

__all__ = ["NOTHING_LIVE", "WORST_MARK", "choose", "render_line"]

#: What the line says when no session is live: short and neutral, never an alarm.
NOTHING_LIVE = "ctxd: no live session"
#: Put before the worst session's line when no session runs in the directory asked about: the
#: figures are not this pane's.
WORST_MARK = "*"
_RANK = {"ok": 0, "warning": 1, "critical": 2}
_TMUX_STYLE = {"ok": "#[fg=green]", "warning": "#[fg=yellow]", "critical": "#[fg=red,bold]"}
_TMUX_RESET = "#[default]"
# Anything that could break the one-line contract, move the cursor, or start a tmux style or
# format (a project directory named `#[fg=red]` or `#(rm -rf ~)` is text, not a command).
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]+")


def _live(row: Mapping[str, Any]) -> bool:
    return row.get("ended_at") is None and "error" not in row


def _within(cwd: str, directory: str) -> bool:
    """`cwd` is `directory` or below it (path components, not string prefixes)."""
    directory = directory.rstrip("/") or "/"
    if cwd == directory or directory == "/":
        return True
    return cwd.startswith(directory + "/")


def _room(row: Mapping[str, Any]) -> float:
    left = row.get("tokens_to_compaction")
    if isinstance(left, int | float):
        return float(left)
    pct = row.get("used_pct")
    return 1e18 - float(pct) if isinstance(pct, int | float) else 1e18


def choose(
    rows: Sequence[Mapping[str, Any]], cwd: str | None
) -> tuple[Mapping[str, Any], bool] | None:
    """The row to show for a pane in `cwd` and whether it is that directory's own session:
    the live session whose cwd is `cwd` or its nearest ancestor, the most recently updated of
    those; else the worst live session (highest severity, then least room before compaction,
    then the most recent); None when no session is live."""
    live = [row for row in rows if _live(row)]
    if not live:
        return None
    if cwd:
        cwd = cwd.rstrip("/") or "/"
        mine = [
            r for r in live if isinstance(r.get("cwd"), str) and r["cwd"] and _within(cwd, r["cwd"])
        ]
        if mine:
            # Nearest ancestor first (the longest directory), then the latest update.
            best = max(mine, key=lambda r: (len(r["cwd"].rstrip("/")), _updated(r)))
            return best, True
    worst = max(
        live,
        key=lambda r: (_RANK.get(str(r.get("severity")), 0), -_room(r), _updated(r)),
    )
    return worst, False


def _updated(row: Mapping[str, Any]) -> float:
    value = row.get("updated_at")
    return float(value) if isinstance(value, int | float) else 0.0


def _project(row: Mapping[str, Any]) -> str:
    cwd = row.get("cwd")
    if not isinstance(cwd, str) or not cwd.strip("/"):
        return str(row.get("agent") or "")
    return cwd.rstrip("/").rpartition("/")[2]


def _view(row: Mapping[str, Any]) -> StatusView:
    tokens = row.get("tokens")
    window = row.get("window")
    return StatusView(
        model=row.get("model") if isinstance(row.get("model"), str) else None,
        tokens=tokens if isinstance(tokens, int) else None,
        window=window if isinstance(window, int) and window > 0 else 1,
        window_source=str(row.get("window_source") or "default"),
        used_pct=row.get("used_pct") if isinstance(row.get("used_pct"), int | float) else None,
        tokens_to_compaction=row.get("tokens_to_compaction")
        if row.get("auto_compaction", True) and isinstance(row.get("tokens_to_compaction"), int)
        else None,
        severity=str(row.get("severity") or "ok"),
        auto_compaction=bool(row.get("auto_compaction", True)),
        estimated=bool(row.get("estimated")),
        idle_compaction_at=None,
    )


def _clean(text: str, tmux: bool) -> str:
    text = " ".join(_CONTROL.sub(" ", text).split())
    # tmux reads `#` in a `#()` command's output as the start of a format: doubled, it is a `#`.
    return text.replace("#", "##") if tmux else text


def render_line(rows: Sequence[Mapping[str, Any]], cwd: str | None, tmux: bool = False) -> bytes:
    """One line of UTF-8 text, without a newline: `[*]project agent <statusline>`, coloured by
    severity with tmux `#[...]` styles when `tmux`."""
    chosen = choose(rows, cwd)
    if chosen is None:
        return NOTHING_LIVE.encode()
    row, own = chosen
    figures = render_statusline(_view(row)).decode().rstrip("\n")
    head = f"{'' if own else WORST_MARK}{_project(row)} {row.get('agent') or ''}"
    text = _clean(f"{head.strip()} {figures}", tmux)
    if tmux:
        text = _TMUX_STYLE.get(str(row.get("severity")), "") + text + _TMUX_RESET
    return text.encode()
