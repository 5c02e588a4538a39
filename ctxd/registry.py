"""Every session the daemon knows, and the bookkeeping around them (the daemon's mutable state).

The registry is the thin shell around the pure core: it owns the `SessionState` values, the
`TranscriptFile` readers behind them and the windows learned per model, feeds appended bytes and
hook events through `ctxd.session`, and keeps the result. It does no socket I/O; the server calls
it, and it reads transcript files only through `TranscriptFile`.
"""

from __future__ import annotations

import logging
import os
import re
import time
from collections.abc import Callable, Container, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from ctxd import session as core
from ctxd import tracker
from ctxd.agents import HookEvent, Reply, parse_hook, render_reply
from ctxd.agents.statusline import parse_statusline, render_statusline
from ctxd.config import Settings
from ctxd.errors import InvalidInput
from ctxd.policy import PolicyState
from ctxd.session import SessionState
from ctxd.tracker import TranscriptFile, agent_of
from ctxd.transcript import AGENTS, Agent
from ctxd.transcript.claude import ClaudeReader

logger = logging.getLogger(__name__)

# Catching up more than this inside a hook would make the agent wait; the rest is read in the
# background by the sweep.
HOOK_CATCH_UP_LIMIT = 64 * 1024 * 1024
# A transcript with no new usage for this long is swept every few minutes only (see `sweep`).
QUIET_AFTER = 600.0
_PLAIN_ID = re.compile(r"[A-Za-z0-9._-]{1,128}")
_CODEX_ID = re.compile(r"([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})\.jsonl$")


class Registry:
    def __init__(
        self,
        settings: Settings,
        roots: Mapping[str, Path],
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.settings = settings
        self.config_error: str | None = None
        self.roots = dict(roots)
        self.clock = clock
        self.sessions: dict[str, SessionState] = {}
        self.files: dict[str, TranscriptFile] = {}
        self.learned: dict[str, int] = {}
        self.ids: dict[tuple[str, str], str] = {}  # (agent, session_id) -> session key
        self.dirty = False
        self.hooks_answered = 0

    # ----------------------------------------------------------------- transcripts

    def track(
        self,
        path: str,
        agent: Agent,
        session_id: str | None = None,
        *,
        cwd: str | None = None,
        parent: str | None = None,
    ) -> SessionState:
        """The session behind transcript `path`, created (and read from the start) if new."""
        existing = self.sessions.get(path)
        if existing is not None:
            if session_id and existing.session_id != session_id:
                existing = self._adopt_registered(replace(existing, session_id=session_id))
                self._store(existing)
            return existing
        sid = session_id or _session_id_from_path(path, agent)
        state = core.new_session(agent, sid, path, self.clock(), cwd=cwd, parent=parent)
        self._store(self._adopt_registered(state))
        self.files[path] = TranscriptFile(path, agent)
        self.catch_up(path)
        return self.sessions[path]

    def catch_up(self, path: str, limit: int | None = None) -> None:
        """Fold the bytes appended to `path` since the last read into its session."""
        tracked = self.files.get(path)
        state = self.sessions.get(path)
        if tracked is None or state is None:
            return
        try:
            updates = tracked.read_appended(limit)
        except FileNotFoundError:
            self._end(path, "transcript deleted")
            return
        except OSError as exc:
            logger.warning("cannot read %s: %s", path, exc)
            return
        if not updates:
            return
        now = self.clock()
        for update in updates:
            state = core.apply_usage(state, update, now)
        self._store(state)
        self._learn(state)

    def on_file_changes(self, batch: list[tuple[str, bool]]) -> None:
        """A watcher batch: (path, deleted) pairs under the agents' roots."""
        for path, deleted in batch:
            if path in self.files:
                if deleted and not os.path.exists(path):
                    self._end(path, "transcript deleted")
                else:
                    self.catch_up(path)
            elif not deleted and os.path.isdir(path):
                self.discover([Path(path)])
            elif not deleted and os.path.isfile(path):
                self._track_found(path)

    def _track_found(self, path: str) -> bool:
        agent = agent_of(path, self.roots)
        if agent is None:
            return False
        self.track(path, agent, parent=_claude_parent(path) if agent == "claude" else None)
        return True

    def discover(self, roots: list[Path]) -> int:
        """Track transcripts under `roots` that are recent and not tracked yet; how many."""
        since = self.clock() - self.settings.sessions.idle_seconds
        found = 0
        for path in tracker.find_transcripts(roots, since):
            if path not in self.files and self._track_found(path):
                found += 1
        return found

    def sweep(self, everything: bool = True) -> None:
        """What events miss: appends and replacements of tracked files; idle and ended sessions.

        With `everything` false only transcripts heard from lately are checked: a quiet one
        costs a stat per sweep for nothing, and a thousand of them made most of an idle
        daemon's CPU.
        """
        now = self.clock()
        for path in list(self.files):
            state = self.sessions.get(path)
            if state is None or state.ended_at is not None:
                continue
            last_heard = state.usage_at or state.updated_at  # the transcript's own clock first
            if everything or now - last_heard < QUIET_AFTER:
                self.catch_up(path)  # one stat when nothing changed
        keep = self.settings.sessions.ended_keep_seconds
        idle = self.settings.sessions.idle_seconds
        for key, state in list(self.sessions.items()):
            if state.ended_at is None and now - state.updated_at > idle:
                self._end(key, "idle")
            elif state.ended_at is not None and now - state.ended_at > keep:
                self._drop(key)

    # ----------------------------------------------------------------- hooks

    def parse(self, agent: str, event_hint: str | None, payload: bytes) -> HookEvent:
        if agent not in AGENTS:
            raise InvalidInput(f"unknown agent {agent!r}")
        return parse_hook(agent, payload, event_hint)

    def session_for(self, event: HookEvent) -> str:
        """The key of the session `event` belongs to, registered and caught up with its
        transcript, so that the answer is never stale."""
        return self._session_for(event)

    def answer(self, event: HookEvent, key: str) -> bytes:
        """Answer `event` for session `key` (from `session_for`)."""
        state = self.sessions[key]
        new_state, reply = core.on_hook(state, event, self.settings, self.learned, self.clock())
        self._store(new_state)
        self.hooks_answered += 1
        return render_reply(event, reply) if reply != Reply() else b""

    def awaits_tool_call(self, event: HookEvent, key: str) -> bool:
        """Whether `event` must wait for the message behind its tool call to be on disk.

        Claude Code writes its transcript lazily: after a fast tool, PostToolUse can fire
        before the assistant message that made the call (and carries its usage) is written.
        Answering then would judge the previous call's figure, one call late. The reader
        remembers the tool calls it parsed, so the check is a lookup; a waiting caller
        `catch_up(key)`s between checks.
        """
        if event.agent != "claude" or event.kind != "tool_call" or event.agent_id:
            return False
        tracked = self.files.get(key)
        if event.tool_use_id is None or tracked is None:
            return False
        reader = tracked.reader
        return isinstance(reader, ClaudeReader) and not reader.saw_tool_use(event.tool_use_id)

    def _session_for(self, event: HookEvent) -> str:
        path = _usable_transcript(event.transcript_path, self.files)
        if event.agent_id and path and event.agent == "claude":
            sub = _claude_subagent_path(path, event.agent_id)
            if sub is not None:
                self.track(path, "claude", event.session_id, cwd=event.cwd)
                self.track(sub, "claude", parent=path, cwd=event.cwd)
                self.catch_up(sub, HOOK_CATCH_UP_LIMIT)
                return sub
        if path is not None:
            known = self.ids.get((event.agent, event.session_id))
            earlier = self.sessions.get(known) if known and known != path else None
            if earlier is not None and earlier.transcript_path is not None:
                # Codex and Gemini start a new file on resume; the id moves with it.
                self._end(earlier.key, "transcript replaced")
            state = self.track(path, event.agent, event.session_id, cwd=event.cwd)
            self.catch_up(path, HOOK_CATCH_UP_LIMIT)
            return state.key
        key = self.ids.get((event.agent, event.session_id))
        if key is None or key not in self.sessions:
            state = core.new_session(
                event.agent, event.session_id, None, self.clock(), cwd=event.cwd
            )
            self._store(state)
            key = state.key
        return key

    def handle_statusline(self, agent: str, payload: bytes) -> bytes:
        if agent != "claude":
            raise InvalidInput("only Claude Code has a statusline")
        report = parse_statusline(payload)
        path = _usable_transcript(report.transcript_path, self.files)
        if path is not None:
            key = self.track(path, "claude", report.session_id, cwd=report.cwd).key
            self.catch_up(path, HOOK_CATCH_UP_LIMIT)
        else:
            key = self.ids.get(("claude", report.session_id)) or ""
            if key not in self.sessions:
                state = core.new_session("claude", report.session_id, None, self.clock())
                self._store(state)
                key = state.key
        state = core.apply_statusline(self.sessions[key], report, self.clock())
        self._store(state)
        self._learn(state)
        fig = core.figures(state, self.settings, self.learned)
        return render_statusline(core.status_view(state, fig))

    # ----------------------------------------------------------------- status

    def status(self, session: str | None = None) -> dict[str, Any]:
        now = self.clock()
        rows = [
            self._row(state, now)
            for state in sorted(self.sessions.values(), key=lambda s: -s.updated_at)
            if session is None or session in (state.session_id, state.key)
        ]
        return {
            "sessions": rows,
            "learned_windows": dict(self.learned),
            "config_error": self.config_error,
            "hooks_answered": self.hooks_answered,
        }

    def _row(self, state: SessionState, now: float) -> dict[str, Any]:
        fig = core.figures(state, self.settings, self.learned)
        fc = fig.forecast
        return {
            "session_id": state.session_id,
            "agent": state.agent,
            "model": state.model,
            "window": fig.window.size,
            "window_source": fig.window.source,
            "tokens": fig.tokens,
            "used_pct": None if fig.used_pct is None else round(fig.used_pct, 1),
            "basis": self.settings.thresholds.basis,
            "basis_used_pct": None if fig.basis_used_pct is None else round(fig.basis_used_pct, 1),
            "severity": fig.severity.name.lower(),
            "compaction_at": fig.compaction_at,
            "tokens_to_compaction": fig.tokens_to_compaction,
            "compactions": state.compactions,
            "turns": state.turns,
            "forecast": None
            if fc is None
            else {
                "tokens_per_call": fc.tokens_per_call,
                "calls_to_next_threshold": fc.calls_to_next_threshold,
                "calls_to_compaction": fc.calls_to_compaction,
            },
            "warned": state.policy.warned.name.lower(),
            "handoff_asked": state.policy.handoff_asked,
            "transcript_path": state.transcript_path,
            "cwd": state.cwd,
            "parent": state.parent,
            "updated_at": state.updated_at,
            "usage_at": state.usage_at,
            "ended_at": state.ended_at,
            "ended_reason": state.ended_reason,
            "age_s": round(now - state.updated_at, 1),
        }

    # ----------------------------------------------------------------- internals

    def _adopt_registered(self, state: SessionState) -> SessionState:
        """`state`, merged with the session a hook registered under the same id before the
        transcript existed (Claude Code writes it lazily, and the watcher or a later hook may
        find it first): one session, whose debounce and handoff bookkeeping carry over."""
        early = self.sessions.get(core.session_key(state.agent, state.session_id, None))
        if early is None or early.transcript_path is not None:
            return state
        self._drop(early.key)
        return replace(
            state,
            policy=early.policy if state.policy == PolicyState() else state.policy,
            started_at=min(state.started_at, early.started_at),
            cwd=state.cwd or early.cwd,
        )

    def _store(self, state: SessionState) -> None:
        self.sessions[state.key] = state
        self.ids[(state.agent, state.session_id)] = state.key
        self.dirty = True

    def _learn(self, state: SessionState) -> None:
        learned = core.learned_window(state)
        if learned is not None and self.learned.get(learned[0]) != learned[1]:
            self.learned[learned[0]] = learned[1]
            self.dirty = True

    def _end(self, key: str, reason: str) -> None:
        state = self.sessions.get(key)
        if state is not None and state.ended_at is None:
            self._store(replace(state, ended_at=self.clock(), ended_reason=reason))

    def _drop(self, key: str) -> None:
        state = self.sessions.pop(key, None)
        self.files.pop(key, None)
        if state is not None and self.ids.get((state.agent, state.session_id)) == key:
            del self.ids[(state.agent, state.session_id)]
        self.dirty = True


def _usable_transcript(path: str | None, known: Container[str] = ()) -> str | None:
    """A payload's transcript path, if it names a regular file we can read (or track already)."""
    if not path or not os.path.isabs(path) or not path.endswith(".jsonl"):
        return None
    return path if path in known or os.path.isfile(path) else None


def _session_id_from_path(path: str, agent: str) -> str:
    name = os.path.basename(path)
    if agent == "codex":
        match = _CODEX_ID.search(name)
        if match:
            return match.group(1)
    stem = name.removesuffix(".jsonl")
    return stem if _PLAIN_ID.fullmatch(stem) else "unknown"


def _claude_subagent_path(parent: str, agent_id: str) -> str | None:
    """`<project>/<session>/subagents/agent-<id>.jsonl`, if the id is plain and the file exists."""
    if not _PLAIN_ID.fullmatch(agent_id):
        return None
    base = parent.removesuffix(".jsonl")
    name = agent_id if agent_id.startswith("agent-") else f"agent-{agent_id}"
    path = os.path.join(base, "subagents", f"{name}.jsonl")
    return path if os.path.isfile(path) else None


def _claude_parent(path: str) -> str | None:
    """The parent transcript of a Claude subagent transcript, else None."""
    parts = Path(path).parts
    if len(parts) >= 3 and parts[-2] == "subagents":
        return str(Path(*parts[:-2])) + ".jsonl"
    return None
