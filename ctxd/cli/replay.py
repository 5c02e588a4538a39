"""`ctxd replay`: run the core over a transcript from start to end, one row per assistant turn.

An agent that keeps its sessions in one database (`AgentSpec.store`) is replayed from a copy of
it the same way, session by session (`replay_store`): each main session followed by its
subagents', each on its own figures (a subagent's context is not its parent's), or the one
`--session` names.

The figures are the daemon's for the same session: ctxd's settings, and the configuration the
agent's compaction rule reads (its settings files and the variables of the environment it ran
in, here the command's own, as a hook would have reported them). What the daemon learns from
other sessions (a model's window seen in a statusline) and a project's own settings files
(replay does not look for the project's directory) are not used.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, replace

from ctxd import agents
from ctxd.core import session as core
from ctxd.core.events import UsageUpdate
from ctxd.core.session import Figures, SessionState
from ctxd.core.settings import Settings
from ctxd.core.window import Window
from ctxd.daemon.agent_settings import AgentSettings
from ctxd.daemon.config import default_settings
from ctxd.errors import InvalidInput, TranscriptError
from ctxd.untrusted import read_chunks, read_head, stat_regular, why

__all__ = [
    "Row",
    "StoredSession",
    "detect",
    "regular_file",
    "replay",
    "replay_store",
    "stored_sessions",
]

CHUNK = 1024 * 1024
HEAD = 64 * 1024


@dataclass(frozen=True, slots=True)
class Row:
    turn: int
    at: float | None
    figures: Figures
    compaction: bool


@dataclass(frozen=True, slots=True)
class StoredSession:
    """One session of an agent's database, as `replay_store` replays it."""

    agent: str
    session_id: str
    #: The session that started it (a subagent's parent), if any.
    parent_id: str | None
    cwd: str | None
    #: When its last step finished (seconds since the epoch), if known.
    updated_at: float | None = None


def regular_file(path: str) -> None:
    """Refuse anything but a regular file (a symlink to one is one) before it is opened: a
    FIFO would block the open, a device never end (every read after opens it as one, too:
    `ctxd.untrusted`)."""
    try:
        stat_regular(path)
    except OSError as exc:
        raise TranscriptError(f"cannot read {path}: {why(exc)}") from None


def _detected(path: str) -> str | None:
    try:
        head = read_head(path, HEAD)
    except OSError as exc:
        raise TranscriptError(f"cannot read {path}: {why(exc)}") from None
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
        for chunk in read_chunks(path, CHUNK):
            yield from reader.feed(chunk)
    except OSError as exc:
        raise TranscriptError(f"cannot read {path}: {why(exc)}") from None


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
    regular_file(path)
    agent = detect(path, agent)
    spec = agents.spec(agent)
    if window is not None and window <= 0:
        raise InvalidInput(f"--window must be a positive number of tokens, got {window}")
    override = Window(window, "option") if window is not None else None
    state = core.new_session(agent, os.path.basename(path), path, 0.0)
    config: Mapping[str, str] = {}
    if environ is not None:
        names = spec.config_env
        state = core.with_agent_config(state, {k: v for k, v in environ.items() if k in names})
        config = AgentSettings(environ).config(state)
    grounds = core.Grounds(
        settings,
        spec.compaction,
        config,
        configured_window=spec.configured_window,
        compact_window=spec.compact_window,
        window_sizes=agents.window_sizes(agent),
        compaction_lead=spec.compaction_lead,
    )
    yield from _timeline(state, _updates(path, agent), grounds, override)


def _timeline(
    state: SessionState,
    updates: Iterable[UsageUpdate],
    grounds: core.Grounds,
    override: Window | None,
) -> Iterator[Row | SessionState]:
    pending: Row | None = None
    for update in updates:
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


def _stored(path: str, agent: str) -> dict[str, tuple[StoredSession, list[UsageUpdate]]]:
    """Every session of the database with usage in it, in the order of its first step."""
    store = agents.spec(agent).store
    assert store is not None
    reader = store.open(path, None)
    try:
        found = reader.read()  # no deadline: read to the end
    except OSError as exc:
        raise TranscriptError(f"cannot read {path}: {why(exc)}") from None
    finally:
        close = getattr(reader, "close", None)
        if close is not None:
            close()
    sessions: dict[str, tuple[StoredSession, list[UsageUpdate]]] = {}
    for row in found:
        known = sessions.get(row.session_id)
        if known is None:
            info = StoredSession(agent, row.session_id, row.parent_id, row.cwd, row.update.at)
            known = sessions[row.session_id] = (info, [])
        elif row.update.at is not None:
            known = sessions[row.session_id] = (
                replace(known[0], updated_at=row.update.at),
                known[1],
            )
        known[1].append(row.update)
    return sessions


def _in_order(sessions: Mapping[str, tuple[StoredSession, list[UsageUpdate]]]) -> list[str]:
    """The session ids, each main session followed by its subagents (and theirs)."""
    children: dict[str, list[str]] = {}
    for sid, (info, _) in sessions.items():
        if info.parent_id is not None and info.parent_id in sessions:
            children.setdefault(info.parent_id, []).append(sid)
    order: list[str] = []

    def add(sid: str) -> None:
        order.append(sid)
        for child in children.get(sid, ()):
            add(child)

    for sid, (info, _) in sessions.items():
        if info.parent_id is None or info.parent_id not in sessions:
            add(sid)
    return order


def _select(
    sessions: Mapping[str, tuple[StoredSession, list[UsageUpdate]]], path: str, prefix: str | None
) -> list[str]:
    order = _in_order(sessions)
    if prefix is None:
        return order
    order = [sid for sid in order if sid.startswith(prefix)]
    if not order:
        raise InvalidInput(f"no session with usage in {path} has an id starting with {prefix!r}")
    if len(order) > 1:
        raise InvalidInput(
            f"{prefix!r} is the start of {len(order)} session ids: {', '.join(order)}"
        )
    return order


def stored_sessions(path: str, agent: str, prefix: str | None = None) -> list[StoredSession]:
    """The sessions of `agent`'s database at `path` with usage in it, each main session
    followed by its subagents, or the one whose id starts with `prefix` (InvalidInput when
    none or several do)."""
    sessions = _stored(path, agent)
    return [sessions[sid][0] for sid in _select(sessions, path, prefix)]


def replay_store(
    path: str,
    agent: str | None = None,
    window: int | None = None,
    settings: Settings | None = None,
    environ: Mapping[str, str] | None = None,
    session: str | None = None,
) -> Iterator[tuple[StoredSession, Iterator[Row | SessionState]]]:
    """`replay` for an agent's database: per session with usage in it (each main session
    followed by its subagents; or the one whose id starts with `session`), the session and
    its timeline (`Row`s, then the final `SessionState`). The configuration is read as for a
    transcript, the agent's project settings found from the session's directory."""
    settings = settings or default_settings()
    regular_file(path)
    owner = agents.store_owner(path)
    if owner is None:
        raise TranscriptError(f"{path} is not a session database of any agent ctxd knows")
    if agent is not None and agent != owner:
        agents.spec(agent)  # an unknown name is InvalidInput
        raise InvalidInput(
            f"{path} is a {agents.spec(owner).title} database, not a "
            f"{agents.spec(agent).title} one: leave out --agent, or pass --agent {owner}"
        )
    if window is not None and window <= 0:
        raise InvalidInput(f"--window must be a positive number of tokens, got {window}")
    override = Window(window, "option") if window is not None else None
    spec = agents.spec(owner)
    sessions = _stored(path, owner)
    for sid in _select(sessions, path, session):
        info, updates = sessions[sid]
        state = core.new_session(owner, info.session_id, None, 0.0, cwd=info.cwd)
        config: Mapping[str, str] = {}
        if environ is not None:
            names = spec.config_env
            state = core.with_agent_config(state, {k: v for k, v in environ.items() if k in names})
            config = AgentSettings(environ).config(state)
        grounds = core.Grounds(
            settings,
            spec.compaction,
            config,
            configured_window=spec.configured_window,
            compact_window=spec.compact_window,
            window_sizes=agents.window_sizes(owner),
            compaction_lead=spec.compaction_lead,
        )
        yield info, _timeline(state, updates, grounds, override)
