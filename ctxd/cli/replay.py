"""`ctxd replay`: run the core over a transcript from start to end, one row per assistant turn.

The figures are the daemon's for the same session: ctxd's settings, and the configuration the
agent's compaction rule reads (its settings files and the variables of the environment it ran
in, here the command's own, as a hook would have reported them). What the daemon learns from
other sessions (a model's window seen in a statusline) and a project's own settings files
(replay does not look for the project's directory) are not used.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from ctxd import agents
from ctxd.core import session as core
from ctxd.core.events import UsageUpdate
from ctxd.core.session import Figures, SessionState
from ctxd.core.settings import Settings
from ctxd.core.window import Window
from ctxd.daemon.agent_settings import AgentSettings
from ctxd.daemon.config import default_settings
from ctxd.errors import InvalidInput, TranscriptError

__all__ = ["Row", "detect", "replay"]

CHUNK = 1024 * 1024
HEAD = 64 * 1024


@dataclass(frozen=True, slots=True)
class Row:
    turn: int
    at: float | None
    figures: Figures
    compaction: bool


def _detected(path: str) -> str | None:
    try:
        with open(path, "rb") as f:
            head = f.read(HEAD)
    except OSError as exc:
        raise TranscriptError(f"cannot read {path}: {exc.strerror or exc}") from None
    return agents.detect_agent(head) or agents.detect_agent_from_path(path)


def detect(path: str, claimed: str | None = None) -> str:
    """The agent whose transcript `path` is. `claimed` (`--agent`) is taken for a file that
    cannot be told, and refused for one that is plainly another agent's."""
    agent = _detected(path)
    if claimed is not None:
        agents.spec(claimed)  # an unknown name is InvalidInput
        if agent is not None and agent != claimed:
            raise InvalidInput(
                f"{path} is a {agents.spec(agent).title} transcript, not a "
                f"{agents.spec(claimed).title} one: leave out --agent, or pass --agent {agent}"
            )
        return claimed
    if agent is None:
        known = ", ".join(agents.spec(name).title for name in agents.AGENTS)
        raise TranscriptError(f"{path} is not a transcript of any agent ctxd knows ({known})")
    return agent


def _updates(path: str, agent: str) -> Iterator[UsageUpdate]:
    reader = agents.spec(agent).open_reader(path)  # usage alone: no facts listener
    try:
        with open(path, "rb") as f:
            while chunk := f.read(CHUNK):
                yield from reader.feed(chunk)
    except OSError as exc:
        raise TranscriptError(f"cannot read {path}: {exc.strerror or exc}") from None


def replay(
    path: str,
    agent: str | None = None,
    window: int | None = None,
    settings: Settings | None = None,
    environ: Mapping[str, str] | None = None,
) -> Iterator[Row | SessionState]:
    """Yield a `Row` per assistant turn (a streamed turn once, as finally reported), then the
    final `SessionState`. `window` overrides every other source of the window size. `environ`
    is the environment the agent ran in: the variables its compaction rule reads and where its
    settings files are, read as the daemon reads them (None: neither, the agent's defaults)."""
    settings = settings or default_settings()
    agent = detect(path, agent)
    rule = agents.spec(agent).compaction
    if not os.path.isfile(path):
        raise TranscriptError(f"cannot read {path}: not a regular file")
    if window is not None and window <= 0:
        raise InvalidInput(f"--window must be a positive number of tokens, got {window}")
    override = Window(window, "option") if window is not None else None
    state = core.new_session(agent, os.path.basename(path), path, 0.0)
    config: Mapping[str, str] = {}
    if environ is not None:
        names = agents.spec(agent).config_env
        state = core.with_agent_config(state, {k: v for k, v in environ.items() if k in names})
        config = AgentSettings(environ).config(state)
    grounds = core.Grounds(settings, rule, config)
    pending: Row | None = None
    for update in _updates(path, agent):
        same_turn = update.turn_id is not None and update.turn_id == state.last_turn_id
        state = core.apply_usage(state, update, update.at or 0.0)
        fig = core.figures(state, grounds, window_override=override)
        # A compaction's first figure can come in two updates of one turn (an estimate, then
        # the agent's own figure): the row keeps the compaction mark.
        compaction = update.compaction or (same_turn and pending is not None and pending.compaction)
        row = Row(state.turns, update.at, fig, compaction)
        if pending is not None and not same_turn:
            yield pending
        pending = row
    if pending is not None:
        yield pending
    yield state
