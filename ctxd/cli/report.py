"""Text for people: status rows and replay timelines, as lines (the CLI prints them)."""

from __future__ import annotations

import os
import time
from typing import Any

from ctxd.cli.replay import Row
from ctxd.core.session import SessionState, figures_row
from ctxd.core.window import DEFAULT_WINDOW

BAR_WIDTH = 10


def bar(used_pct: float | None, width: int = BAR_WIDTH) -> str:
    if used_pct is None:
        return "·" * width
    filled = max(0, min(width, round(used_pct / 100 * width)))
    return "▓" * filled + "░" * (width - filled)


def tokens_text(tokens: int | None) -> str:
    return "-" if tokens is None else f"{tokens:,}"


def _ago(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.0f}s ago"
    if seconds < 3600:
        return f"{seconds / 60:.0f}m ago"
    return f"{seconds / 3600:.1f}h ago"


def _short_path(path: str | None) -> str:
    if not path:
        return "-"
    home = os.path.expanduser("~")
    return "~" + path[len(home) :] if path.startswith(home + os.sep) else path


def _forecast(fc: dict[str, Any] | None) -> str:
    if not fc or fc.get("tokens_per_call") is None:
        return "no growth measured yet"
    parts = [f"~{fc['tokens_per_call']:,.0f} tokens/call"]
    if fc.get("calls_to_next_threshold") is not None:
        parts.append(f"~{fc['calls_to_next_threshold']} calls to next threshold")
    if fc.get("calls_to_compaction") is not None:
        parts.append(f"~{fc['calls_to_compaction']} calls to compaction")
    return ", ".join(parts)


def _marks(auto_compaction: bool, estimated: bool, too_small: bool) -> str:
    """Short flags after a figure: no auto-compaction, an estimated figure, a window too small."""
    marks = [
        text
        for flag, text in (
            (not auto_compaction, "no auto-compaction"),
            (estimated, "estimate"),
            (too_small, "window too small?"),
        )
        if flag
    ]
    return f"  ({', '.join(marks)})" if marks else ""


def status_lines(doc: dict[str, Any], now: float | None = None) -> list[str]:
    now = time.time() if now is None else now
    sessions = doc.get("sessions", [])
    lines: list[str] = []
    daemon = doc.get("daemon") or {}
    if daemon:
        lines.append(
            f"ctxd {daemon.get('version')} (pid {daemon.get('pid')}), "
            f"{len(sessions)} session(s), {daemon.get('requests', 0)} requests served"
        )
    if doc.get("config_error"):
        lines.append(f"config error (last good config in force): {doc['config_error']}")
    if not sessions:
        lines.append("no sessions tracked yet")
    for s in sessions:
        used = s.get("used_pct")
        used_text = "   -  " if used is None else f"{used:5.1f}%"
        ended = f" ended ({s.get('ended_reason')})" if s.get("ended_at") else ""
        sub = " subagent" if s.get("parent") else ""
        lines.append(
            f"{s['agent']:<6} {s['session_id'][:12]:<12} {str(s.get('model') or '-')[:28]:<28} "
            f"{bar(used)} {used_text}  {tokens_text(s.get('tokens'))} / {s['window']:,} "
            f"({s['window_source']})  {tokens_text(s.get('tokens_to_compaction'))} to compaction  "
            f"{str(s['severity']).upper()}{sub}{ended}"
            + _marks(
                s.get("auto_compaction", True),
                bool(s.get("estimated")),
                bool(s.get("window_too_small")),
            )
        )
        lines.append(
            f"       {_short_path(s.get('cwd'))} · updated {_ago(now - s['updated_at'])} · "
            f"{s.get('compactions', 0)} compaction(s) · {_forecast(s.get('forecast'))}"
        )
    return lines


def replay_row_line(row: Row) -> str:
    fig = row.figures
    at = time.strftime("%H:%M:%S", time.localtime(row.at)) if row.at else "--:--:--"
    mark = "  (compaction)" if row.compaction else ""
    mark += _marks(fig.auto_compaction, fig.estimated, fig.over_window)
    return (
        f"{row.turn:>5}  {at}  {tokens_text(fig.tokens):>11}  "
        f"{(fig.used_pct or 0):5.1f}% of {fig.window.size:,}  "
        f"{tokens_text(fig.tokens_to_compaction):>11} to compaction  "
        f"{fig.severity.label}{mark}"
    )


def replay_row_json(row: Row) -> dict[str, Any]:
    return {
        "turn": row.turn,
        "at": row.at,
        **figures_row(row.figures),
        "compaction": row.compaction,
    }


def replay_final_json(state: SessionState, last: Row | None, window: int | None) -> dict[str, Any]:
    """The replay's last line: the final figures (`window`: the --window given, if any)."""
    doc: dict[str, Any] = {
        "final": True,
        "agent": state.agent,
        "model": state.model,
        "turns": state.turns,
        "compactions": state.compactions,
    }
    if last is not None:
        doc.update(replay_row_json(last))
        del doc["turn"], doc["at"], doc["compaction"]
    else:
        doc.update(
            tokens=None,
            window=window or DEFAULT_WINDOW,
            window_source="option" if window else "default",
            used_pct=None,
            tokens_to_compaction=None,
            severity="ok",
        )
    return doc
