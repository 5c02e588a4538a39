"""Text for people: replay timelines, as lines (the CLI prints them), in the status text's words
(`ctxd.daemon.outputs.status_text`, re-exported here)."""

from __future__ import annotations

import time

from ctxd.daemon.outputs.status_text import (
    GUESSED,
    WIDTH,
    figure_marks,
    pct_text,
    plural,
    session_lines,
    short_ids,
    status_lines,
    tokens_text,
    watching_lines,
    window_from_text,
    window_size_text,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from ctxd.cli.replay import Row
    from ctxd.core.session import SessionState

__all__ = [
    "REPLAY_HEADER",
    "WIDTH",
    "pct_text",
    "replay_final_json",
    "replay_final_line",
    "replay_row_json",
    "replay_row_line",
    "session_lines",
    "short_ids",
    "status_lines",
    "watching_lines",
]


REPLAY_HEADER = (
    f"{'TURN':>5}  {'TIME':<8}  {'TOKENS':>11}  {'USED':>6}  {'WINDOW':>11}  "
    f"{'TO COMPACTION':>13}  STATE"
)


def _replay_line(turn: str, at: float | None, fig: Any, marks: list[str]) -> str:
    when = time.strftime("%H:%M:%S", time.localtime(at)) if at else "--:--:--"
    line = (
        f"{turn:>5}  {when:<8}  {tokens_text(fig.tokens):>11}  {pct_text(fig.used_pct):>6}  "
        f"{window_size_text(fig.window.size, fig.window.source):>11}  "
        f"{tokens_text(fig.tokens_to_compaction):>13}  "
        f"{fig.severity.label}"
    )
    return line + (f"  ({', '.join(marks)})" if marks else "")


def replay_row_line(row: Row) -> str:
    """One turn, under REPLAY_HEADER."""
    fig = row.figures
    marks = ["compaction"] if row.compaction else []
    marks += figure_marks(fig.auto_compaction, fig.estimated, fig.over_window)
    return _replay_line(str(row.turn), row.at, fig, marks)


def replay_final_line(state: SessionState, last: Row) -> str:
    """The last turn's figures again, under REPLAY_HEADER, with the totals after them."""
    from ctxd.agents import spec

    fig = last.figures
    totals = [
        spec(state.agent).title,
        plural(state.turns, "turn"),
        plural(state.compactions, "compaction"),
        f"window {window_from_text(fig.window.source, state.model, hint=False)}"
        if fig.window.source == GUESSED
        else f"window: {fig.window.source}",
        *figure_marks(fig.auto_compaction, fig.estimated, fig.over_window),
    ]
    return _replay_line("final", last.at, fig, totals)


def replay_row_json(row: Row) -> dict[str, Any]:
    from ctxd.core.session import figures_row

    return {
        "turn": row.turn,
        "at": row.at,
        **figures_row(row.figures),
        "compaction": row.compaction,
    }


def replay_final_json(state: SessionState, last: Row | None, window: int | None) -> dict[str, Any]:
    """The replay's last line: the final figures (`window`: the --window given, if any)."""
    from ctxd.core.window import DEFAULT_WINDOW

    doc: dict[str, Any] = {
        "final": True,
        "agent": state.agent,
        "model": state.model,
        "agent_version": state.agent_version,
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
