"""The store of every session the daemon knows: one `SessionState` per key, the ids that lead to
them, and the windows learned from the sessions' own reports and proved by their usage.

A session's key is its transcript path once known, else "<agent>:<session id>" (see
`ctxd.core.session.session_key`); one agent's session id leads to one key at a time. Nothing here
reads files or judges anything: the transcripts room feeds usage into the states, the answers
room hooks, and both store what the core returns here. `export`/`restore` give the snapshot its
plain values.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import replace

from ctxd.core import session as core
from ctxd.core.policy import PolicyState
from ctxd.core.session import SessionState

__all__ = ["MAX_SESSIONS", "Sessions"]

logger = logging.getLogger(__name__)

#: The most sessions kept at once. Every id a hook names, and every transcript in the watched
#: roots, opens one: past this many (twice the most a user was seen to run), the least recently
#: heard of are forgotten, ended ones first, so that a flood of ids cannot grow the daemon, its
#: status or its snapshot without bound.
MAX_SESSIONS = 20_000
#: What one eviction drops, as a share of MAX_SESSIONS: sorting the sessions is then paid once
#: per that many new ones, not once per session.
_EVICT_SHARE = 10
#: The most models whose windows are remembered (model names come from transcripts and hooks).
MAX_MODELS = 4096


class Sessions:
    """Every tracked session by key; see the module docstring. `dirty` says whether anything
    changed since the last snapshot (its writer clears it)."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self.clock = clock
        self._by_key: dict[str, SessionState] = {}
        self._ids: dict[tuple[str, str], str] = {}  # (agent, session_id) -> session key
        #: Model key -> the window its sessions reported (what `Grounds.learned` gets).
        self.learned: dict[str, int] = {}
        #: Model key -> the most context its sessions held (what `Grounds.proved` gets).
        self.proved: dict[str, int] = {}
        #: Compactions seen since the daemon started, per agent.
        self.compactions: Counter[str] = Counter()
        self.dirty = False
        self._dropped: list[Callable[[str], None]] = []
        self._opened_over: dict[str, str] = {}  # see `opened_over`
        self._evicted = 0  # sessions forgotten for room, since the start (said once at first)

    def on_drop(self, forget: Callable[[str], None]) -> None:
        """Have `forget(key)` called whenever a session is dropped (what others keep by key)."""
        self._dropped.append(forget)

    # ----------------------------------------------------------------- reading

    def __contains__(self, key: object) -> bool:
        return key in self._by_key

    def __getitem__(self, key: str) -> SessionState:
        return self._by_key[key]

    def __len__(self) -> int:
        return len(self._by_key)

    def __iter__(self) -> Iterator[SessionState]:
        return iter(list(self._by_key.values()))

    def get(self, key: str) -> SessionState | None:
        return self._by_key.get(key)

    def key_for(self, agent: str, session_id: str) -> str | None:
        """The key the agent's session id leads to now, if it is tracked."""
        key = self._ids.get((agent, session_id))
        return key if key in self._by_key else None

    # ----------------------------------------------------------------- changing

    def store(self, state: SessionState) -> None:
        earlier = self._by_key.get(state.key)
        if earlier is not None and state.compactions > earlier.compactions:
            self.compactions[state.agent] += state.compactions - earlier.compactions
        self._by_key[state.key] = state
        self._ids[(state.agent, state.session_id)] = state.key
        self.dirty = True

    def open(
        self,
        agent: str,
        session_id: str,
        path: str | None,
        *,
        cwd: str | None = None,
        parent: str | None = None,
        at: float | None = None,
    ) -> SessionState:
        """A new session, stored; one with a transcript takes over what a hook registered under
        the same id before the transcript existed (`adopt_registered`). `at`: when it was
        last heard from, if earlier than now (a transcript found on disk: its mtime)."""
        now = self.clock()
        at = now if at is None else min(at, now)
        state = core.new_session(agent, session_id, path, at, cwd=cwd, parent=parent)
        if path is not None:
            state = self.adopt_registered(state)
            earlier = self.key_for(agent, session_id)
            if earlier is not None and earlier != path:
                self._opened_over[path] = earlier
        if state.key not in self._by_key and len(self._by_key) >= MAX_SESSIONS:
            self._make_room()
        self.store(state)
        return state

    def _make_room(self) -> None:
        """Forget sessions down to nine tenths of MAX_SESSIONS, the least worth keeping first."""
        # Ended first, then those a hook named but no transcript backs (what a flood of ids
        # makes), then by when last heard of.
        ranked = sorted(
            self._by_key.values(),
            key=lambda s: (s.ended_at is None, s.transcript_path is not None, s.updated_at),
        )
        # Down to nine tenths of the bound, whatever the count (a snapshot restores any number).
        victims = ranked[: len(ranked) - MAX_SESSIONS + MAX_SESSIONS // _EVICT_SHARE]
        if not self._evicted:
            logger.warning(
                "tracking %d sessions, the most kept: forgetting the %d least recently heard of "
                "(and as many again each time the count comes back)",
                len(self._by_key),
                len(victims),
            )
        self._evicted += len(victims)
        for state in victims:
            self.drop(state.key)

    def opened_over(self, key: str) -> str | None:
        """The session that had `key`'s id when `key` was opened, if another one did (an
        agent that starts a new transcript on resume: the earlier one may still be live)."""
        return self._opened_over.get(key)

    def rename(self, key: str, session_id: str) -> SessionState:
        """The session at `key`, now known by `session_id` (its first hook named it)."""
        state = self.adopt_registered(replace(self._by_key[key], session_id=session_id))
        self.store(state)
        return state

    def adopt_registered(self, state: SessionState) -> SessionState:
        """`state`, merged with the session a hook registered under the same id before the
        transcript existed (Claude Code writes it lazily, and the watcher or a later hook may
        find it first): one session, whose debounce and handoff bookkeeping carry over."""
        early = self._by_key.get(core.session_key(state.agent, state.session_id, None))
        if early is None or early.transcript_path is not None:
            return state
        self.drop(early.key)
        return replace(
            state,
            policy=early.policy if state.policy == PolicyState() else state.policy,
            started_at=min(state.started_at, early.started_at),
            updated_at=max(state.updated_at, early.updated_at),
            cwd=state.cwd or early.cwd,
        )

    def learn(self, state: SessionState) -> None:
        """Remember the window `state`'s own report gave for its model, and what its usage
        proved of that window (only ever raised: a smaller figure proves nothing new)."""
        learned = core.learned_window(state)
        if learned is not None and not _room_for(self.learned, learned[0]):
            learned = None
        if learned is not None and self.learned.get(learned[0]) != learned[1]:
            self.learned[learned[0]] = learned[1]
            self.dirty = True
        proved = core.proved_window(state)
        if proved is not None and not _room_for(self.proved, proved[0]):
            proved = None
        if proved is not None and proved[1] > self.proved.get(proved[0], 0):
            self.proved[proved[0]] = proved[1]
            self.dirty = True

    def end(self, key: str, reason: str) -> None:
        state = self._by_key.get(key)
        if state is not None and state.ended_at is None:
            self.store(replace(state, ended_at=self.clock(), ended_reason=reason))

    def drop(self, key: str) -> None:
        state = self._by_key.pop(key, None)
        self._opened_over.pop(key, None)
        if state is not None and self._ids.get((state.agent, state.session_id)) == key:
            del self._ids[(state.agent, state.session_id)]
        for forget in self._dropped:
            forget(key)
        self.dirty = True

    def expire(self, idle_seconds: float, ended_keep_seconds: float) -> None:
        """End the sessions silent for longer than `idle_seconds`; drop those ended longer ago
        than `ended_keep_seconds`."""
        now = self.clock()
        for state in list(self._by_key.values()):
            if state.ended_at is None and now - state.updated_at > idle_seconds:
                self.end(state.key, "idle")
            elif state.ended_at is not None and now - state.ended_at > ended_keep_seconds:
                self.drop(state.key)

    # ----------------------------------------------------------------- snapshot

    def export(self) -> tuple[list[SessionState], dict[str, int], dict[str, int]]:
        """The sessions, the windows learned and the contexts proved, as plain values
        (`restore` takes them back)."""
        return list(self._by_key.values()), dict(self.learned), dict(self.proved)

    def restore(
        self,
        sessions: list[SessionState],
        learned: Mapping[str, int],
        proved: Mapping[str, int] | None = None,
    ) -> None:
        """Take back what `export` gave, into an empty store."""
        self.learned.update(learned)
        self.proved.update(proved or {})
        for state in sessions:
            self.store(state)


def _room_for(known: Mapping[str, int], model: str) -> bool:
    # A model already known is always updated; a new one only while there is room.
    return model in known or len(known) < MAX_MODELS
