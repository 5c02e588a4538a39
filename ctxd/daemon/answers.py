"""The answer to a hook: the one place that knows a hook's path through the daemon.

Find the session (the transcripts room catches its transcript up first, so the answer is never
stale; the sessions room holds it), judge it (`ctxd.core.session.on_hook`, with the session's
`Grounds`), amend the reply (continuity: the handoff draft, the note after a compaction) and
render it as the agent expects (`ctxd.agents.render`). A statusline payload is answered here too.

An agent that writes its transcript lazily can run a hook for a tool call whose model turn is
not on disk yet (Claude Code after a fast tool); answering then would judge the previous turn's
figure, one call late. Such a hook gets an awaitable answer instead, which waits for the turn
(TOOL_CALL_WAIT at most). A session still catching up is recorded but not judged.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import replace

import anyio

from ctxd import agents
from ctxd.core import session as core
from ctxd.core.events import HookEvent, Reply
from ctxd.core.policy import PolicyState
from ctxd.core.session import Grounds, SessionState
from ctxd.core.settings import Settings
from ctxd.daemon.agent_settings import AgentSettings
from ctxd.daemon.continuity import Continuity
from ctxd.daemon.refused import RefusedFiles
from ctxd.daemon.sessions import Sessions
from ctxd.daemon.transcripts import HOOK_BUDGET, Transcripts
from ctxd.protocol import Answer

__all__ = ["TOOL_CALL_WAIT", "Answers"]

logger = logging.getLogger(__name__)

# How long a tool-call hook may wait for the agent to write the turn behind it.
TOOL_CALL_WAIT = 0.3
TOOL_CALL_POLL = 0.01


class Answers:
    """Hooks and statusline payloads in, the exact bytes the agent's hook prints out."""

    def __init__(
        self,
        sessions: Sessions,
        transcripts: Transcripts,
        settings: Callable[[], Settings],
        env: Mapping[str, str],
        refused: RefusedFiles | None = None,
    ) -> None:
        self.sessions = sessions
        self.transcripts = transcripts
        self._settings = settings
        self._env = env
        #: The agents' own settings files, read with the daemon's environment.
        self.agent_settings = AgentSettings(env, refused=refused)
        #: The session digest's handoff drafts and post-compaction notes.
        self.continuity = Continuity(env)
        self.hooks_answered = 0
        #: Since start: ("hooks", agent, event), ("warnings", agent, severity), ("handoffs",
        #: agent) -> how many (what `GET /metrics` counts, with the compactions).
        self.counts: Counter[tuple[str, ...]] = Counter()
        self._announced: set[str] = set()  # sessions told they are catching up, this time
        #: Session key -> the tool call whose record a hook waited for in vain: its later tool
        #: hooks are answered at once, until that record turns up after all (it was only late).
        self._unwritten: dict[str, str] = {}
        self._grounds: dict[str, Grounds] = {}  # by agent: see `grounds`
        #: Called with a session's key before an answer that depends on its new state leaves
        #: (a warning given, a handoff asked): the daemon makes that state durable there.
        self.persist_now: Callable[[str], None] | None = None
        sessions.on_drop(self._forget)

    def grounds(self, state: SessionState) -> Grounds:
        """What `state` is judged with now.

        Every hook asks, and what goes in changes rarely: the value built for an agent is kept
        while ctxd's settings, the agent's configuration from its settings files and the time
        zone's offset are still the ones it was built with.
        """
        settings = self._settings()
        config = self.agent_settings.config(state)
        utc_offset = time.localtime().tm_gmtoff
        kept = self._grounds.get(state.agent)
        if (
            kept is not None
            and kept.settings is settings
            and kept.config is config
            and kept.utc_offset == utc_offset
        ):
            return kept
        spec = agents.spec(state.agent)
        grounds = Grounds(
            settings,
            spec.compaction,
            config,
            self.sessions.learned,
            spec.idle_compaction,
            utc_offset,
            spec.configured_window,
            self.sessions.proved,
            spec.compact_window,
            spec.resume_compaction,
            spec.dialect.handoff_on_tool_call,
            agents.window_sizes(state.agent),
            spec.compaction_lead,
        )
        self._grounds[state.agent] = grounds
        return grounds

    def handle_hook(
        self,
        agent: str,
        event_hint: str | None,
        payload: bytes,
        env: object = None,
    ) -> Answer:
        """The answer to one hook: the exact bytes the agent's hook prints (b"" for nothing).

        `env` is the agent's environment as the hook client passed it (the request header's
        "env": the variables its compaction rule reads); None when the client sent none.
        Raises InvalidInput for an unknown agent or a payload that is not a hook's.
        """
        spec = agents.spec(agent)
        config = _agent_config(env, spec.config_env, agent) if isinstance(env, dict) else None
        if event_hint == "statusline" and spec.statusline is not None:
            return self._statusline(spec, payload, config)
        event = agents.parse(agent, payload, event_hint)
        key = self._session_for(event, self.transcripts.deadline(HOOK_BUDGET), config or {})
        if config is not None:
            state = self.sessions[key]
            updated = core.with_agent_config(state, config)
            if updated is not state:
                self.sessions.store(updated)
        if self.transcripts.catching_up(key) is not None:
            return self._answer_catching_up(event, key)
        if self._waits_for_turn(event, key):
            return self._answer_once_written(event, key)
        return self._answer(event, key)

    # ----------------------------------------------------------------- answering

    def _answer(self, event: HookEvent, key: str) -> bytes:
        self._announced.discard(key)
        state = self.sessions[key]
        new_state, reply = core.on_hook(state, event, self.grounds(state), self.sessions.clock())
        if new_state.policy.handoff_asked and not state.policy.handoff_asked:
            # Delivered once the agent's next stop echoes it, if it went as a block (the agent's
            # dialect may make the user's message one); anything else has no echo to wait for.
            policy = replace(new_state.policy, handoff_unconfirmed=agents.blocks(event, reply))
            new_state = replace(new_state, policy=policy)
        self.sessions.store(new_state)
        self.hooks_answered += 1
        self._count(event, state.policy, new_state.policy, reply)  # the policy's own reply
        tracked = self.transcripts.file(key)
        facts = self.transcripts.stored_digest(key) if tracked is None else tracked.facts
        reply = self.continuity.amend(event, state, new_state, reply, facts, self._settings())
        if self.persist_now is not None and _must_persist(state.policy, new_state.policy, reply):
            self.persist_now(key)
        return agents.render(event, reply) if reply != _SILENT else b""

    def _answer_catching_up(self, event: HookEvent, key: str) -> bytes:
        """A hook of a session whose transcript is still being read: the event is recorded
        (times, cwd, a compaction's reset, a session's end) but not judged, since a warning or
        a handoff decided on part of the transcript could be wrong either way. The first such
        answer tells the user so (where the agent shows hooks' messages to the user)."""
        state = self.sessions[key]
        # Without a figure the core records an event and judges nothing: until its transcript
        # is read the session counts as not measured yet.
        unmeasured = replace(state, tokens=None)
        recorded, _ = core.on_hook(unmeasured, event, self.grounds(state), self.sessions.clock())
        self.sessions.store(replace(recorded, tokens=state.tokens))
        self.hooks_answered += 1
        self._count(event, state.policy, state.policy, Reply())
        progress = self.transcripts.catching_up(key)
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
        tracked = self.transcripts.file(key)
        if event.agent_id:
            return False
        if tracked is None:
            # An agent that creates its transcript lazily (Copilot CLI, under load): a tool
            # call's hook waits for the file its layout names, and then for the turn in it.
            return (
                event.kind == "tool_call"
                and event.tool_use_id is not None
                and self._implied(event, self._agent_env(key)) is not None
            )
        if event.kind == "tool_call" and event.tool_use_id is not None:
            return not tracked.reader.saw_tool_use(event.tool_use_id)
        if event.kind == "stop" and not event.stop_hook_active:
            return not tracked.reader.saw_answer()
        return False

    def _waits_for_turn(self, event: HookEvent, key: str) -> bool:
        """`_awaits_turn`, except for a tool call of a session whose tool-call records were
        once not found in time (an events file elsewhere, a record ctxd cannot tell apart):
        waiting for them again would cost every call the whole wait."""
        if event.kind == "tool_call" and key in self._unwritten:
            tracked = self.transcripts.file(key)
            if tracked is None or not tracked.reader.saw_tool_use(self._unwritten[key]):
                return False
            del self._unwritten[key]  # it was written, late: waiting pays again
        return self._awaits_turn(event, key)

    async def _answer_once_written(self, event: HookEvent, key: str) -> bytes:
        with anyio.move_on_after(TOOL_CALL_WAIT) as waited:
            while self._awaits_turn(event, key):
                await anyio.sleep(TOOL_CALL_POLL)
                if self.transcripts.file(key) is None:
                    until = self.transcripts.deadline(HOOK_BUDGET)
                    key = self._session_for(event, until, self._agent_env(key))
                else:
                    self.transcripts.catch_up(key)
        if waited.cancelled_caught and event.kind == "tool_call" and event.tool_use_id:
            self._unwritten[key] = event.tool_use_id
            logger.warning(
                "%s session %s: the record of tool call %s was not in its transcript after "
                "%.1f s; its tool hooks no longer wait for theirs",
                event.agent,
                event.session_id,
                event.tool_use_id,
                TOOL_CALL_WAIT,
            )
        if self.transcripts.catching_up(key) is not None:
            return self._answer_catching_up(event, key)
        return self._answer(event, key)

    # ----------------------------------------------------------------- finding the session

    def _session_for(self, event: HookEvent, until: float, agent_env: Mapping[str, str]) -> str:
        transcripts = self.transcripts
        transcripts.catch_up_store(event.agent, until)
        path = transcripts.usable(
            event.transcript_path or self._implied(event, agent_env), event.agent, event.session_id
        )
        if event.agent_id and path:
            sub = agents.spec(event.agent).subagent_transcript(path, event.agent_id)
            if sub is not None:
                transcripts.track(path, event.agent, event.session_id, cwd=event.cwd, until=until)
                transcripts.track(sub, event.agent, parent=path, cwd=event.cwd, until=until)
                transcripts.catch_up(sub, until)
                return sub
        known = self.sessions.key_for(event.agent, event.session_id)
        if path is not None:
            # The watcher may have found the new file first: its session was opened over
            # the earlier one, which the hook now says it replaces.
            earlier_key = known if known and known != path else self.sessions.opened_over(path)
            earlier = self.sessions.get(earlier_key) if earlier_key else None
            if earlier is not None and earlier.transcript_path is not None:
                # Agents that start a new file on resume: the id moves with it.
                self.sessions.end(earlier.key, "transcript replaced")
            transcripts.track(path, event.agent, event.session_id, cwd=event.cwd, until=until)
            transcripts.catch_up(path, until)
            return path
        if known is None:
            known = self.sessions.open(event.agent, event.session_id, None, cwd=event.cwd).key
        return known

    def _agent_env(self, key: str) -> dict[str, str]:
        """The agent's own variables its hooks last passed for session `key`."""
        return dict(self.sessions[key].agent_config)

    def _implied(self, event: HookEvent, agent_env: Mapping[str, str]) -> str | None:
        """The transcript the agent's layout names for a hook that names none, found where the
        agent's own environment (its home-directory variable, say) puts it."""
        known = self.sessions.key_for(event.agent, event.session_id)
        if known is not None and known in self.transcripts:
            # Found before: the agent's layout is not searched again on every hook (Kimi Code's
            # means a look into each workspace folder).
            return known
        env = {**self._env, **agent_env} if agent_env else self._env
        return agents.spec(event.agent).implied_transcript(event.session_id, env)

    def _statusline(
        self, spec: agents.AgentSpec, payload: bytes, config: Mapping[str, str] | None = None
    ) -> bytes:
        """The statusline's answer; `config` is the agent's environment as the statusline
        command got it, taken like a hook's (the same process environment)."""
        assert spec.statusline is not None
        report = spec.statusline.parse(payload)
        path = self.transcripts.usable(report.transcript_path, spec.name, report.session_id)
        if path is not None:
            until = self.transcripts.deadline(HOOK_BUDGET)
            key = self.transcripts.track(
                path, spec.name, report.session_id, cwd=report.cwd, until=until
            ).key
            self.transcripts.catch_up(path, until)
        else:
            found = self.sessions.key_for(spec.name, report.session_id)
            key = found or self.sessions.open(spec.name, report.session_id, None).key
        state = core.apply_statusline(self.sessions[key], report, self.sessions.clock())
        if config is not None:
            state = core.with_agent_config(state, config)
        self.sessions.store(state)
        self.sessions.learn(state)
        return spec.statusline.render(state.model, core.figures(state, self.grounds(state)))

    # ----------------------------------------------------------------- bookkeeping

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

    def _forget(self, key: str) -> None:
        self.continuity.forget(key)
        self._announced.discard(key)
        self._unwritten.pop(key, None)


#: A reply with nothing in it, what most hooks get (built once: every answer compares with it).
_SILENT = Reply()

#: Longer than any path or setting a variable of the agent's names (PATH_MAX is 4,096).
MAX_ENV_VALUE = 4096


def _agent_config(
    env: Mapping[object, object], names: tuple[str, ...], agent: str
) -> dict[str, str]:
    """The variables of `names` in a hook's `env`, each a plain string (no NUL byte, at most
    MAX_ENV_VALUE characters): they name the agent's settings files, so a value no real
    environment could hold is refused here, where it enters, not met later as a broken path."""
    config: dict[str, str] = {}
    for name in names:
        value = env.get(name)
        if value is None:
            continue
        if isinstance(value, str) and len(value) <= MAX_ENV_VALUE and "\x00" not in value:
            config[name] = value
        else:
            logger.warning(
                "%s hook: ignoring %s from its env (%s)", agent, name, _why_refused(value)
            )
    return config


def _why_refused(value: object) -> str:
    if not isinstance(value, str):
        return f"a {type(value).__name__}, not a string"
    if "\x00" in value:
        return "it holds a NUL byte"
    return f"{len(value):,} characters long"


def _must_persist(before: PolicyState, after: PolicyState, reply: Reply) -> bool:
    """Whether an answer depends on state that must survive a crash: something was said (a
    restart that forgot it would say it again), or what was said so far changed (a warning
    level, a handoff asked, a compaction's reset of both)."""
    return (
        reply != _SILENT
        or after.warned != before.warned
        or after.handoff_asked != before.handoff_asked
        or after.handoff_unconfirmed != before.handoff_unconfirmed
    )


def _mb(size: int) -> str:
    return f"{size / 1_000_000:,.1f}"
