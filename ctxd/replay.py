"""`ctxd replay`: run the core over a transcript from start to end, one row per assistant turn."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass

from ctxd import session as core
from ctxd.config import Settings
from ctxd.errors import InvalidInput, TranscriptError
from ctxd.session import Figures, SessionState
from ctxd.transcript import Agent, UsageUpdate
from ctxd.transcript.detect import detect_agent, detect_agent_from_path, open_reader
from ctxd.window import Window

CHUNK = 1024 * 1024
HEAD = 64 * 1024


@dataclass(frozen=True, slots=True)
class Row:
    turn: int
    at: float | None
    figures: Figures
    compaction: bool


def detect(path: str) -> Agent:
    try:
        with open(path, "rb") as f:
            head = f.read(HEAD)
    except OSError as exc:
        raise TranscriptError(f"cannot read {path}: {exc.strerror or exc}") from None
    agent = detect_agent(head) or detect_agent_from_path(path)
    if agent is None:
        raise TranscriptError(f"{path} is not a Claude Code, Gemini CLI or Codex CLI transcript")
    return agent


def _updates(path: str, agent: Agent) -> Iterator[UsageUpdate]:
    reader = open_reader(agent, path)
    try:
        with open(path, "rb") as f:
            while chunk := f.read(CHUNK):
                yield from reader.feed(chunk)
    except OSError as exc:
        raise TranscriptError(f"cannot read {path}: {exc.strerror or exc}") from None


def replay(
    path: str,
    agent: Agent | None = None,
    window: int | None = None,
    settings: Settings | None = None,
) -> Iterator[Row | SessionState]:
    """Yield a `Row` per assistant turn (a streamed turn once, as finally reported), then the
    final `SessionState`. `window` overrides every other source of the window size."""
    settings = settings or Settings()
    agent = agent or detect(path)
    if not os.path.isfile(path):
        raise TranscriptError(f"cannot read {path}: not a regular file")
    if window is not None and window <= 0:
        raise InvalidInput(f"--window must be a positive number of tokens, got {window}")
    override = Window(window, "option") if window is not None else None
    state = core.new_session(agent, os.path.basename(path), path, 0.0)
    pending: Row | None = None
    for update in _updates(path, agent):
        same_turn = update.turn_id is not None and update.turn_id == state.last_turn_id
        state = core.apply_usage(state, update, update.at or 0.0)
        row = Row(state.turns, update.at, figures_of(state, settings, override), update.compaction)
        if pending is not None and not same_turn:
            yield pending
        pending = row
    if pending is not None:
        yield pending
    yield state


def figures_of(state: SessionState, settings: Settings, override: Window | None) -> Figures:
    return core.figures(state, settings, {}, window_override=override)
