"""Every session the daemon knows, and the bookkeeping around them (the daemon's mutable state).

The registry is the thin shell around the pure core: it owns the `SessionState` values, the
`TranscriptFile` readers behind them and the windows learned per model, feeds appended bytes and
hook events through `ctxd.core.session`, and keeps the result. It does no socket I/O; the server
calls it, and it reads transcript files only through `TranscriptFile`. It sees agents only
through the agent registry (`ctxd.agents`).

No call holds the event loop for long: every catch-up has a deadline (HOOK_BUDGET inside a hook,
STEP_BUDGET elsewhere), and what it leaves unread goes to the backlog, which `drain_backlog`
reads a step at a time in the background. A session whose transcript is in the backlog is
"catching up": its hooks are recorded but not judged (figures from part of a file would be
wrong), and their answer says so.
"""

from __future__ import annotations

import logging
import os
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Container, Iterator, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import anyio

from ctxd import agents
from ctxd.core import session as core
from ctxd.core.events import HookEvent, Reply
from ctxd.core.policy import PolicyState
from ctxd.core.session import SessionState
from ctxd.core.settings import Settings
from ctxd.daemon import watcher
from ctxd.daemon.agent_settings import AgentSettings
from ctxd.daemon.config import default_settings
from ctxd.daemon.continuity import Continuity
from ctxd.daemon.files import TranscriptFile

__all__ = ["HOOK_BUDGET", "QUIET_AFTER", "STEP_BUDGET", "TOOL_CALL_WAIT", "Registry"]

logger = logging.getLogger(__name__)

# Seconds of transcript reading a hook may spend before answering (a first look at a big
# transcript would otherwise make the agent wait for all of it); the rest is read in the
# background.
HOOK_BUDGET = 0.02
# Seconds of reading per step of everything else (watcher batches, sweeps, scans, the backlog)
# before the event loop gets a turn: how long a hook may have to wait behind it.
STEP_BUDGET = 0.01
# A transcript with no new usage for this long is swept every few minutes only (see `sweep`).
QUIET_AFTER = 600.0
# How long a tool-call hook may wait for the agent to write the turn behind it.
TOOL_CALL_WAIT = 0.3
TOOL_CALL_POLL = 0.01

#: A hook's answer: the bytes to print, at once or once something was waited for.
HookAnswer = bytes | Awaitable[bytes]


class Registry:
    def __init__(
        self,
        settings: Settings | None,
        roots: Mapping[str, Path],
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.settings = settings or default_settings()
        self.config_error: str | None = None
        self.roots = dict(roots)
        self.clock = clock
        self.sessions: dict[str, SessionState] = {}
        self.files: dict[str, TranscriptFile] = {}
        self.learned: dict[str, int] = {}
        self.ids: dict[tuple[str, str], str] = {}  # (agent, session_id) -> session key
        self.dirty = False
        self.hooks_answered = 0
        #: Since start: ("hooks", agent, event), ("warnings", agent, severity), ("handoffs",
        #: agent), ("compactions", agent) -> how many (what `GET /metrics` counts).
        self.counts: Counter[tuple[str, ...]] = Counter()
        self.agent_settings = AgentSettings(os.environ)
        #: The session digest's handoff drafts and post-compaction notes (issue 14).
        self.continuity = Continuity(os.environ)
        self.skipped: dict[str, int] = {}  # per transcript: impossible records logged so far
        #: Transcripts with bytes left to read, oldest first (`drain_backlog` reads them).
        self.backlog: dict[str, None] = {}
        self._backlog_added: anyio.Event | None = None
        self._scans: list[Iterator[str]] = []  # discovery scans their deadline cut short
        self._announced: set[str] = set()  # sessions told they are catching up, this time
        #: Called with a session's key before an answer that depends on its new state leaves
        #: (a warning given, a handoff asked): the daemon makes that state durable there.
        self.persist_now: Callable[[str], None] | None = None

    # ----------------------------------------------------------------- transcripts

    def track(
        self,
        path: str,
        agent: str,
        session_id: str | None = None,
        *,
        cwd: str | None = None,
        parent: str | None = None,
        until: float | None = None,
    ) -> SessionState:
        """The session behind transcript `path`, created (and read from the start, until the
        deadline `until` at most: see `catch_up`) if new."""
        existing = self.sessions.get(path)
        if existing is not None:
            if session_id and existing.session_id != session_id:
                existing = self._adopt_registered(replace(existing, session_id=session_id))
                self._store(existing)
            return existing
        sid = session_id or agents.spec(agent).files.session_id_from_path(path) or "unknown"
        state = core.new_session(agent, sid, path, self.clock(), cwd=cwd, parent=parent)
        self._store(self._adopt_registered(state))
        self.files[path] = TranscriptFile(path, agent)
        self.catch_up(path, until)
        return self.sessions[path]

    def catch_up(self, path: str, until: float | None = None) -> bool:
        """Fold the bytes appended to `path` since the last read into its session, reading
        until the deadline `until` (`time.monotonic()`; default STEP_BUDGET from now) at most.
        True when it is caught up; otherwise the rest is left to the backlog. A deadline that
        has already passed reads nothing and leaves it all to the backlog."""
        tracked = self.files.get(path)
        state = self.sessions.get(path)
        if tracked is None or state is None:
            self.backlog.pop(path, None)
            return True
        if until is None:
            until = time.monotonic() + STEP_BUDGET
        elif time.monotonic() >= until:
            self._defer(path)
            return False
        try:
            updates = tracked.read_appended(until)
        except OSError as exc:
            if isinstance(exc, FileNotFoundError):
                self._end(path, "transcript deleted")
            else:
                logger.warning("cannot read %s: %s", path, exc)
            self.backlog.pop(path, None)  # nothing to read now; the next change or sweep retries
            self._announced.discard(path)
            return True
        if updates:
            now = self.clock()
            for update in updates:
                state = core.apply_usage(state, update, now)
            self._store(state)
            self._learn(state)
        self._log_skipped(path, tracked)
        if tracked.behind and path in self.files:
            self._defer(path)
            return False
        self.backlog.pop(path, None)
        self._announced.discard(path)
        return True

    def catching_up(self, key: str) -> dict[str, int] | None:
        """How far reading the transcript of session `key` stands while it is in the backlog
        (bytes read, file size); None when it is caught up."""
        tracked = self.files.get(key)
        if tracked is None or key not in self.backlog:
            return None
        return {"read": tracked.size - tracked.behind, "size": tracked.size}

    async def drain_backlog(self) -> None:
        """Read the backlog in the background, forever: steps of STEP_BUDGET, each transcript
        in turn (a huge one does not hold up the others), the event loop free between steps."""
        while True:
            if not self.backlog and not self._scans:
                self._backlog_added = anyio.Event()
                await self._backlog_added.wait()
                self._backlog_added = None
            until = time.monotonic() + STEP_BUDGET
            if self._scans:
                self._scan(self._scans.pop(0), until)
            while self.backlog and time.monotonic() < until:
                path = next(iter(self.backlog))
                del self.backlog[path]  # `catch_up` puts it back at the end if not done
                try:
                    self.catch_up(path, until)
                except Exception:  # one bad transcript must not stop the reading of the others
                    logger.exception("reading %s failed; left until it changes again", path)
                    self.backlog.pop(path, None)
            await anyio.sleep(0)

    def _defer(self, path: str) -> None:
        self.backlog[path] = None
        self._wake()

    def _wake(self) -> None:
        if self._backlog_added is not None:
            self._backlog_added.set()

    def on_file_changes(self, batch: list[tuple[str, bool]]) -> None:
        """A watcher batch: (path, deleted) pairs under the agents' roots."""
        until = time.monotonic() + STEP_BUDGET
        for path, deleted in batch:
            if path in self.files:
                if deleted and not os.path.exists(path):
                    self._end(path, "transcript deleted")
                else:
                    self.catch_up(path, until)
            elif not deleted and os.path.isdir(path):
                self.discover([Path(path)], until)
            elif not deleted and os.path.isfile(path):
                self._track_found(path, until)

    def _track_found(self, path: str, until: float | None = None) -> bool:
        agent = agents.transcript_owner(path, self.roots)
        if agent is None:
            return False
        self.track(path, agent, parent=agents.spec(agent).parent_transcript(path), until=until)
        return True

    def discover(self, roots: list[Path], until: float | None = None) -> int:
        """Track transcripts under `roots` that are recent and not tracked yet; how many were
        found before the deadline (default STEP_BUDGET from now). What it leaves, unread bytes
        or the rest of the scan (a directory at a time), is carried on in the background."""
        since = self.clock() - self.settings.sessions.idle_seconds
        if until is None:
            until = time.monotonic() + STEP_BUDGET
        return self._scan(watcher.find_transcripts(roots, since), until)

    def _scan(self, paths: Iterator[str], until: float) -> int:
        found = 0
        for path in paths:
            if path not in self.files and self._track_found(path, until):
                found += 1
            if time.monotonic() >= until:
                self._scans.append(paths)
                self._wake()
                break
        return found

    def sweep(self, everything: bool = True) -> None:
        """What events miss: appends and replacements of tracked files; idle and ended sessions.

        With `everything` false only transcripts heard from lately are checked: a quiet one
        costs a stat per sweep for nothing, and a thousand of them made most of an idle
        daemon's CPU.
        """
        now = self.clock()
        until = time.monotonic() + STEP_BUDGET
        for path in list(self.files):
            state = self.sessions.get(path)
            if state is None or state.ended_at is not None:
                continue
            last_heard = state.usage_at or state.updated_at  # the transcript's own clock first
            if everything or now - last_heard < QUIET_AFTER:
                self.catch_up(path, until)  # one stat when nothing changed
        keep = self.settings.sessions.ended_keep_seconds
        idle = self.settings.sessions.idle_seconds
        for key, state in list(self.sessions.items()):
            if state.ended_at is None and now - state.updated_at > idle:
                self._end(key, "idle")
            elif state.ended_at is not None and now - state.ended_at > keep:
                self._drop(key)

    def _log_skipped(self, path: str, tracked: TranscriptFile) -> None:
        # Readers are pure: one that passes over impossible records (Codex's token counts above
        # the window) counts them in `skipped`, and the shell says so.
        skipped = getattr(tracked.reader, "skipped", 0)
        if not isinstance(skipped, int) or skipped == self.skipped.get(path, 0):
            return
        if skipped > self.skipped.get(path, 0):
            count = skipped - self.skipped.get(path, 0)
            logger.debug("%s: %d record(s) with impossible figures ignored", path, count)
        self.skipped[path] = skipped

    # ----------------------------------------------------------------- hooks

    def handle_hook(
        self,
        agent: str,
        event_hint: str | None,
        payload: bytes,
        env: object = None,
    ) -> HookAnswer:
        """The answer to one hook: the exact bytes the agent's hook prints (b"" for nothing).

        The session is found or created from the payload and caught up with its transcript
        first, so the answer is never stale. An agent that writes its transcript lazily can
        run a hook for a tool call whose model turn is not on disk yet (Claude Code after a
        fast tool); answering then would judge the previous turn's figure, one call late. Such
        a hook gets an awaitable instead, which waits for the turn (at most TOOL_CALL_WAIT).
        `env` is the agent's environment as the hook client passed it (the request header's
        "env": the variables its compaction rule reads); None when the client sent none.
        Raises InvalidInput for an unknown agent or a payload that is not a hook's.
        """
        spec = agents.spec(agent)
        if event_hint == "statusline" and spec.statusline is not None:
            return self._statusline(spec, payload)
        event = agents.parse(agent, payload, event_hint)
        key = self._session_for(event, time.monotonic() + HOOK_BUDGET)
        if isinstance(env, dict):
            config = {k: v for k, v in env.items() if k in spec.config_env and isinstance(v, str)}
            state = self.sessions[key]
            updated = core.with_agent_config(state, config)
            if updated is not state:
                self._store(updated)
        if key in self.backlog:
            return self._answer_catching_up(event, key)
        if self._awaits_turn(event, key):
            return self._answer_once_written(event, key)
        return self._answer(event, key)

    def _answer(self, event: HookEvent, key: str) -> bytes:
        state = self.sessions[key]
        rule = agents.spec(state.agent).compaction
        new_state, reply = core.on_hook(
            state,
            event,
            self.settings,
            self.learned,
            rule,
            self.clock(),
            self.agent_settings.config(state),
        )
        self._store(new_state)
        self.hooks_answered += 1
        self._count(event, state.policy, new_state.policy, reply)  # the policy's own reply
        tracked = self.files.get(key)
        digest = None if tracked is None else tracked.facts
        reply = self.continuity.amend(event, state, new_state, reply, digest, self.settings)
        if self.persist_now is not None and _must_persist(state.policy, new_state.policy, reply):
            self.persist_now(key)
        return agents.render(event, reply) if reply != Reply() else b""

    def _answer_catching_up(self, event: HookEvent, key: str) -> bytes:
        """A hook of a session whose transcript is still being read: the event is recorded
        (times, cwd, a compaction's reset, a session's end) but not judged, since a warning or
        a handoff decided on part of the transcript could be wrong either way. The first such
        answer tells the user so (where the agent shows hooks' messages to the user)."""
        state = self.sessions[key]
        # Without a figure the core records an event and judges nothing: until its transcript
        # is read the session counts as not measured yet.
        recorded, _ = core.on_hook(
            replace(state, tokens=None),
            event,
            self.settings,
            self.learned,
            agents.spec(state.agent).compaction,
            self.clock(),
            self.agent_settings.config(state),
        )
        self._store(replace(recorded, tokens=state.tokens))
        self.hooks_answered += 1
        self._count(event, state.policy, state.policy, Reply())
        progress = self.catching_up(key)
        if progress is None or key in self._announced:
            return b""
        self._announced.add(key)
        text = (
            f"ctxd is still reading this session's transcript ({_mb(progress['read'])} of "
            f"{_mb(progress['size'])} MB); context warnings resume once it has caught up."
        )
        return agents.render(event, Reply(user_message=text))

    def _awaits_turn(self, event: HookEvent, key: str) -> bool:
        """Whether the model turn this hook is judged on is not on disk yet: the one that made
        the tool call (PostToolUse), or the answer that ended the turn (Stop)."""
        tracked = self.files.get(key)
        if tracked is None or event.agent_id:
            return False
        if event.kind == "tool_call" and event.tool_use_id is not None:
            return not tracked.reader.saw_tool_use(event.tool_use_id)
        if event.kind == "stop" and not event.stop_hook_active:
            return not tracked.reader.saw_answer()
        return False

    async def _answer_once_written(self, event: HookEvent, key: str) -> bytes:
        with anyio.move_on_after(TOOL_CALL_WAIT):
            while self._awaits_turn(event, key):
                await anyio.sleep(TOOL_CALL_POLL)
                self.catch_up(key)
        if key in self.backlog:
            return self._answer_catching_up(event, key)
        return self._answer(event, key)

    def _session_for(self, event: HookEvent, until: float) -> str:
        path = _usable_transcript(event.transcript_path, self.files)
        if event.agent_id and path:
            sub = agents.spec(event.agent).subagent_transcript(path, event.agent_id)
            if sub is not None:
                self.track(path, event.agent, event.session_id, cwd=event.cwd, until=until)
                self.track(sub, event.agent, parent=path, cwd=event.cwd, until=until)
                self.catch_up(sub, until)
                return sub
        if path is not None:
            known = self.ids.get((event.agent, event.session_id))
            earlier = self.sessions.get(known) if known and known != path else None
            if earlier is not None and earlier.transcript_path is not None:
                # Codex and Gemini start a new file on resume; the id moves with it.
                self._end(earlier.key, "transcript replaced")
            state = self.track(path, event.agent, event.session_id, cwd=event.cwd, until=until)
            self.catch_up(path, until)
            return state.key
        key = self.ids.get((event.agent, event.session_id))
        if key is None or key not in self.sessions:
            state = core.new_session(
                event.agent, event.session_id, None, self.clock(), cwd=event.cwd
            )
            self._store(state)
            key = state.key
        return key

    def _statusline(self, spec: agents.AgentSpec, payload: bytes) -> bytes:
        assert spec.statusline is not None
        report = spec.statusline.parse(payload)
        path = _usable_transcript(report.transcript_path, self.files)
        if path is not None:
            until = time.monotonic() + HOOK_BUDGET
            key = self.track(path, spec.name, report.session_id, cwd=report.cwd, until=until).key
            self.catch_up(path, until)
        else:
            key = self.ids.get((spec.name, report.session_id)) or ""
            if key not in self.sessions:
                state = core.new_session(spec.name, report.session_id, None, self.clock())
                self._store(state)
                key = state.key
        state = core.apply_statusline(self.sessions[key], report, self.clock())
        self._store(state)
        self._learn(state)
        config = self.agent_settings.config(state)
        fig = core.figures(state, self.settings, self.learned, spec.compaction, config=config)
        return spec.statusline.render(state.model, fig)

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
            "counters": _counters(self.counts),
        }

    def _row(self, state: SessionState, now: float) -> dict[str, Any]:
        rule = agents.spec(state.agent).compaction
        config = self.agent_settings.config(state)
        fig = core.figures(state, self.settings, self.learned, rule, config=config)
        fc = fig.forecast
        return {
            "session_id": state.session_id,
            "agent": state.agent,
            "model": state.model,
            "agent_version": state.agent_version,
            **core.figures_row(fig),
            "basis": self.settings.thresholds.basis,
            "compactions": state.compactions,
            "turns": state.turns,
            "forecast": None
            if fc is None
            else {
                "tokens_per_call": fc.tokens_per_call,
                "calls_to_next_threshold": fc.calls_to_next_threshold,
                "calls_to_compaction": fc.calls_to_compaction,
            },
            "warned": state.policy.warned.label,
            "handoff_asked": state.policy.handoff_asked,
            "transcript_path": state.transcript_path,
            "cwd": state.cwd,
            "parent": state.parent,
            "updated_at": state.updated_at,
            "usage_at": state.usage_at,
            "ended_at": state.ended_at,
            "ended_reason": state.ended_reason,
            "age_s": round(now - state.updated_at, 1),
            "catching_up": self.catching_up(state.key),
        }

    # ----------------------------------------------------------------- snapshot

    def export(self) -> dict[str, Any]:
        """What a restart needs, as plain values: the sessions, each transcript's read position,
        the windows learned. `restore` takes it back."""
        return {
            "sessions": list(self.sessions.values()),
            "files": {path: tracked.position() for path, tracked in self.files.items()},
            "learned": dict(self.learned),
        }

    def export_session(self, key: str) -> tuple[SessionState, dict[str, Any] | None]:
        """One session as `export` gives it, with its transcript's read position (if any)."""
        tracked = self.files.get(key)
        return self.sessions[key], None if tracked is None else tracked.position()

    def restore(
        self,
        sessions: list[SessionState],
        files: Mapping[str, Mapping[str, Any]],
        learned: Mapping[str, int],
    ) -> None:
        """Take back what `export` gave, into an empty registry. A transcript still the same
        file is read again up to its saved offset, in the background (the backlog), its updates
        discarded (they are already folded into the saved session), so its reader's own state
        is rebuilt; until then its session is catching up."""
        self.learned.update(learned)
        for state in sessions:
            self._store(state)
            saved = files.get(state.key)
            if saved and state.transcript_path:
                self.files[state.key] = TranscriptFile.resume(state.key, state.agent, dict(saved))
                self._defer(state.key)
        self.dirty = False

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

    def _count(
        self, event: HookEvent, before: PolicyState, after: PolicyState, reply: Reply
    ) -> None:
        known = agents.spec(event.agent).dialect.kinds
        # Event names come from payloads: only the agent's own count as themselves.
        self.counts["hooks", event.agent, event.name if event.name in known else "other"] += 1
        if reply.context and event.kind == "tool_call" and after.warned.label != "ok":
            self.counts["warnings", event.agent, after.warned.label] += 1
        if after.handoff_asked and not before.handoff_asked:
            self.counts["handoffs", event.agent] += 1

    def _store(self, state: SessionState) -> None:
        earlier = self.sessions.get(state.key)
        if earlier is not None and state.compactions > earlier.compactions:
            self.counts["compactions", state.agent] += state.compactions - earlier.compactions
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
        self.continuity.forget(key)
        self.backlog.pop(key, None)
        self._announced.discard(key)
        if state is not None and self.ids.get((state.agent, state.session_id)) == key:
            del self.ids[(state.agent, state.session_id)]
        self.dirty = True


def _usable_transcript(path: str | None, known: Container[str] = ()) -> str | None:
    """A payload's transcript path, if it names a regular file we can read (or track already)."""
    if not path or not os.path.isabs(path) or not path.endswith((".jsonl", ".json")):
        return None
    return path if path in known or os.path.isfile(path) else None


def _must_persist(before: PolicyState, after: PolicyState, reply: Reply) -> bool:
    """Whether an answer depends on state that must survive a crash: something was said (a
    restart that forgot it would say it again), or what was said so far changed (a warning
    level, a handoff asked, a compaction's reset of both)."""
    return (
        reply != Reply()
        or after.warned != before.warned
        or after.handoff_asked != before.handoff_asked
    )


def _counters(counts: Counter[tuple[str, ...]]) -> dict[str, list[list[object]]]:
    """`counts` as plain values: {kind: [[label, ..., count], ...]}."""
    out: dict[str, list[list[object]]] = {}
    for (kind, *labels), count in sorted(counts.items()):
        out.setdefault(kind, []).append([*labels, count])
    return out


def _mb(size: int) -> str:
    return f"{size / 1_000_000:,.1f}"
