"""One agent session's state, and how it moves: pure functions, values in, values out.

A session learns its usage from two places — the transcript (`apply_usage`) and the agent's own
report (`apply_statusline`, authoritative: Claude Code's statusline) — and answers hook events
(`on_hook`) with a `Reply` for the agent. Nothing here touches files, sockets or clocks: `now` is
passed in, and the agent's compaction rule is passed in as a function.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

from ctxd.core import messages, policy
from ctxd.core.compaction import (
    AGENT_VERSION,
    COMPACTED_FROM,
    REPORTED_COMPACT_WINDOW,
    CompactionRule,
    CompactWindow,
    CompactWindowRule,
    IdleCompactionRule,
    ResumeCompactionRule,
    tokens_to_compaction,
)
from ctxd.core.events import HookEvent, PromptCache, Reply, StatuslineReport, UsageUpdate
from ctxd.core.measure import Forecast, Severity, Usage, remaining_pct, used_pct
from ctxd.core.policy import PolicyState
from ctxd.core.settings import Settings
from ctxd.core.window import Window, infer_window, model_key, resolve_window

__all__ = [
    "Figures",
    "Grounds",
    "SessionState",
    "apply_statusline",
    "apply_usage",
    "compacts_at_resume",
    "figures",
    "figures_row",
    "learned_window",
    "new_session",
    "on_hook",
    "proved_window",
    "session_key",
    "with_agent_config",
]

#: The agent configuration passed to a compaction rule when a session reported none.
NO_CONFIG: Mapping[str, str] = MappingProxyType({})
NO_LEARNED: Mapping[str, int] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class SessionState:
    key: str  # the transcript path when known, else "<agent>:<session_id>"
    agent: str
    session_id: str
    transcript_path: str | None = None
    cwd: str | None = None
    parent: str | None = None  # a subagent's parent session key
    model: str | None = None
    tokens: int | None = None
    usage_at: float | None = None
    agent_window: int | None = None  # the window the transcript itself reports (Codex)
    #: The window the agent's model catalog gives the session's model (`UsageUpdate`'s).
    catalog_window: int | None = None
    statusline_window: int | None = None
    statusline_used_pct: float | None = None  # cleared by newer transcript usage
    #: The window the agent's auto-compaction counts against, as its statusline revealed it.
    statusline_compact_window: int | None = None
    compactions: int = 0
    #: Compactions ctxd expects the agent to make before its next message, counted when they
    #: became due (a resume after the prompt cache expired): the continuity note goes with it.
    expected_compactions: int = 0
    #: Counted towards compaction on top of `tokens` (`UsageUpdate.pending`).
    pending: int = 0
    #: `tokens` is ctxd's estimate (`UsageUpdate.estimated`), until the next real figure.
    estimated: bool = False
    #: The size of the last automatic compaction, when its record said (`infer_window`).
    compacted_from: int | None = None
    #: The most context (prompt and output) the session's model was seen to hold by a real
    #: figure: its window is at least that. Kept across compactions, which shrink `tokens`
    #: but not what the model proved; cleared when the model changes.
    proved_tokens: int | None = None
    #: The agent's configuration as its hook reported it (the environment variables its
    #: compaction rule reads), as sorted (name, value) pairs.
    agent_config: tuple[tuple[str, str], ...] = ()
    #: The agent's version, as its transcript or statusline last said it.
    agent_version: str | None = None
    #: The agent's prompt cache, as its statusline last said it.
    prompt_cache: PromptCache | None = None
    turns: int = 0
    last_turn_id: str | None = None
    policy: PolicyState = PolicyState()
    started_at: float = 0.0
    updated_at: float = 0.0
    ended_at: float | None = None
    ended_reason: str | None = None
    #: When the user last sent the session a prompt (its agent's prompt hook): the session the
    #: user is at, for what must not interrupt them there (notifications).
    prompted_at: float | None = None


@dataclass(frozen=True, slots=True)
class Grounds:
    """What one session is judged with, as one value: ctxd's settings, its agent's compaction
    rule, the agent's configuration from its settings files (`config`; the hook's environment
    stored on the session is laid over it) and the windows learned from other sessions."""

    settings: Settings
    rule: CompactionRule
    config: Mapping[str, str] = field(default_factory=lambda: NO_CONFIG)
    learned: Mapping[str, int] = field(default_factory=lambda: NO_LEARNED)
    #: When the agent compacts an idle session (`AgentSpec.idle_compaction`); None: never.
    idle_rule: IdleCompactionRule | None = None
    #: The user's time zone, seconds east of UTC, for clock times in messages.
    utc_offset: int = 0
    #: (model, agent configuration) -> the window the agent's configuration gives the model
    #: (`AgentSpec.configured_window`); None: its configuration never does.
    configured_window: Callable[[str | None, Mapping[str, str]], int | None] | None = None
    #: Model key -> the most context its sessions were seen to hold (`proved_window`).
    proved: Mapping[str, int] = field(default_factory=lambda: NO_LEARNED)
    #: The window the agent's automatic compaction counts against, and who decided it
    #: (`AgentSpec.compact_window`); None: the agent has no such notion.
    compact_window: CompactWindowRule | None = None
    #: Whether the agent compacts a session resumed after its prompt cache expired
    #: (`AgentSpec.resume_compaction`); None: it never does.
    resume_rule: ResumeCompactionRule | None = None
    #: The agent reads no answer at a stop: the handoff is asked with a tool call's context
    #: instead (`Dialect.handoff_on_tool_call`).
    handoff_on_tool_call: bool = False
    #: Model -> the windows its owner states it with (`AgentSpec.window_sizes`): what usage
    #: beyond the table's window raises it to; None: the common windows only.
    window_sizes: Callable[[str | None], tuple[int, ...]] | None = None
    #: How far below its point the agent may compact, as a fraction of it
    #: (`AgentSpec.compaction_lead`): what a window is read from a compaction with.
    compaction_lead: float = 0.0


@dataclass(frozen=True, slots=True)
class Figures:
    """What a session's numbers mean right now, under the given settings."""

    tokens: int | None
    window: Window
    #: Where the agent compacts; the window itself when it never auto-compacts.
    compaction_at: int
    tokens_to_compaction: int | None
    used_pct: float | None  # of the whole window
    basis_used_pct: float | None  # on the configured basis
    severity: Severity
    forecast: Forecast | None
    #: False when the agent will not compact on its own (the rule said so).
    auto_compaction: bool = True
    #: `tokens` is an estimate (see `SessionState.estimated`).
    estimated: bool = False
    #: The usage is above the window: the window assumed is almost certainly wrong.
    over_window: bool = False
    #: When the agent compacts the session if it stays idle (epoch seconds); None: it will not.
    idle_compaction_at: float | None = None
    #: Which of the user's limits sets `severity` (`policy.limit_passed`): its `[thresholds]`
    #: key and value; None at OK.
    limit_passed: tuple[str, float] | None = None
    #: The window the agent's automatic compaction counts against and its source, when the
    #: agent has such a window (Claude Code's auto-compact window).
    compact_window: CompactWindow | None = None


def session_key(agent: str, session_id: str, transcript_path: str | None) -> str:
    """The transcript path when known; until then "<agent>:<session_id>"."""
    return transcript_path or f"{agent}:{session_id}"


def new_session(
    agent: str,
    session_id: str,
    transcript_path: str | None,
    now: float,
    *,
    cwd: str | None = None,
    parent: str | None = None,
) -> SessionState:
    return SessionState(
        key=session_key(agent, session_id, transcript_path),
        agent=agent,
        session_id=session_id,
        transcript_path=transcript_path,
        cwd=cwd,
        parent=parent,
        started_at=now,
        updated_at=now,
    )


def apply_usage(state: SessionState, update: UsageUpdate, now: float) -> SessionState:
    """Fold one transcript usage update into the session."""
    same_turn = update.turn_id is not None and update.turn_id == state.last_turn_id
    new_turn = not update.compaction and not same_turn
    policy_state = policy.on_compaction(state.policy) if update.compaction else state.policy
    return replace(
        state,
        tokens=update.tokens,
        proved_tokens=_proved(state, update),
        usage_at=update.at if update.at is not None else now,
        model=update.model or state.model,
        agent_window=update.reported_window or state.agent_window,
        # Stamped on every update of a reader that knows a catalog: None is its answer too.
        catalog_window=update.catalog_window,
        statusline_used_pct=None,
        compactions=state.compactions + (1 if update.compaction else 0),
        pending=update.pending,
        estimated=update.estimated,
        compacted_from=update.compacted_from
        if update.compacted_from is not None
        else state.compacted_from,
        agent_version=update.agent_version or state.agent_version,
        turns=state.turns + (1 if new_turn else 0),
        last_turn_id=update.turn_id if update.turn_id is not None else state.last_turn_id,
        policy=policy_state,
        updated_at=now,
        ended_at=None,
        ended_reason=None,
    )


def _proved(state: SessionState, update: UsageUpdate) -> int | None:
    """What the session's model is proved to hold after `update`: a real figure is a request
    the model took (its prompt and output fit its window); an estimate proves nothing."""
    known = state.proved_tokens
    if update.model and state.model and model_key(update.model) != model_key(state.model):
        known = None  # another model: what the last one held says nothing about this one
    if update.estimated or update.compaction:
        return known
    held = update.tokens + update.pending
    return held if known is None or held > known else known


def apply_statusline(state: SessionState, report: StatuslineReport, now: float) -> SessionState:
    """Take Claude Code's own figures; they outrank anything derived from the transcript."""
    return replace(
        state,
        model=report.model_id or state.model,
        tokens=report.tokens if report.tokens is not None else state.tokens,
        estimated=state.estimated and report.tokens is None,
        statusline_window=report.window or state.statusline_window,
        statusline_used_pct=report.used_pct,
        statusline_compact_window=report.compact_window or state.statusline_compact_window,
        cwd=report.cwd or state.cwd,
        agent_version=report.agent_version or state.agent_version,
        prompt_cache=report.prompt_cache or state.prompt_cache,
        updated_at=now,
    )


def with_agent_config(state: SessionState, config: Mapping[str, str]) -> SessionState:
    """The session with the configuration its agent's hook just reported (unchanged: itself)."""
    pairs = tuple(sorted(config.items()))
    return state if pairs == state.agent_config else replace(state, agent_config=pairs)


def _config(state: SessionState, files: Mapping[str, str]) -> Mapping[str, str]:
    # The hook's environment over the agent's settings files: the names never collide (variables
    # are upper-case, settings keys JSON paths), so the order only matters for a user's oddity.
    # The agent's version, what its statusline revealed of its compaction and the size of its
    # last automatic compaction, when known, each under its own key.
    known = (
        (AGENT_VERSION, state.agent_version),
        (REPORTED_COMPACT_WINDOW, state.statusline_compact_window),
        (COMPACTED_FROM, state.compacted_from),
    )
    if not state.agent_config and all(value is None for _, value in known):
        return files
    config = {**files, **dict(state.agent_config)}
    for key, value in known:
        if value is not None:
            config[key] = str(value)
    return config


def learned_window(state: SessionState) -> tuple[str, int] | None:
    """The (model key, window) this session teaches the daemon, from an authoritative report."""
    window = state.statusline_window or state.agent_window
    if state.model and window:
        return model_key(state.model), window
    return None


def proved_window(state: SessionState) -> tuple[str, int] | None:
    """The (model key, context held) this session proved of its model's window: a fact about
    the model, which other sessions of it are judged with (`Grounds.proved`)."""
    if state.model and state.proved_tokens:
        return model_key(state.model), state.proved_tokens
    return None


def figures(
    state: SessionState,
    grounds: Grounds,
    recent: bool = True,
    window_override: Window | None = None,
) -> Figures:
    """What the session's numbers mean now: its window (and the source that said so), where
    its agent compacts by the rule under its configuration, the severity on the configured
    basis and the forecast."""
    settings = grounds.settings
    tokens = state.tokens
    window, point, agent_config = _window_and_point(state, grounds, window_override)
    auto = point is not None
    # Without auto-compaction the window is the only limit: the basis falls back to it.
    point = window.size if point is None else point
    compact = (
        None
        if grounds.compact_window is None
        else grounds.compact_window(window.size, state.model, agent_config)
    )
    if tokens is None:
        return Figures(
            None, window, point, None, None, None, Severity.OK, None, auto, compact_window=compact
        )
    usage = _usage(state, window, point)
    basis = settings.thresholds.basis
    idle_at = idle_compaction_at(state, grounds, agent_config)
    fc = policy.forecast(state.policy.recent, usage, settings.thresholds) if recent else None
    return Figures(
        tokens=tokens,
        window=window,
        compaction_at=point,
        tokens_to_compaction=tokens_to_compaction(tokens + state.pending, point),
        used_pct=used_pct(usage, "window"),
        basis_used_pct=used_pct(usage, basis),
        severity=policy.severity_for(remaining_pct(usage, basis), settings.thresholds, tokens),
        forecast=None if fc is None else replace(fc, idle_compaction_at=idle_at),
        auto_compaction=auto,
        estimated=state.estimated,
        over_window=tokens > window.size,
        idle_compaction_at=idle_at,
        limit_passed=policy.limit_passed(usage, settings.thresholds),
        compact_window=compact,
    )


def _window_and_point(
    state: SessionState, grounds: Grounds, window_override: Window | None = None
) -> tuple[Window, int | None, Mapping[str, str]]:
    """The session's window, where its agent compacts it (None: it never will) and the agent
    configuration both were read with: all a hook is judged on (`figures` adds what `status`
    shows; a hook, on every tool call, pays for none of it)."""
    settings, rule = grounds.settings, grounds.rule
    agent_config = _config(state, grounds.config)
    model, overrides, compacted_from = state.model, settings.compaction, state.compacted_from

    def point_for(size: int) -> int | None:
        return rule(size, model, overrides, agent_config)

    def inferred() -> int | None:
        # Which window's own rule explains the compaction: the rule is asked without being
        # told of that compaction (with it, every window would explain it).
        blind = {k: v for k, v in agent_config.items() if k != COMPACTED_FROM}
        return (
            None
            if compacted_from is None
            else infer_window(
                compacted_from,
                lambda size: rule(size, model, overrides, blind),
                grounds.compaction_lead,
            )
        )

    # What other sessions of the model held is no proof for a window the agent's catalog gives
    # by provider: they may have run it elsewhere (one id, 400,000 on OpenAI's API and 128,000
    # through GitHub Copilot). What this session held is.
    learned_proof = model is not None and state.catalog_window is None
    proved = max(
        state.proved_tokens or 0, grounds.proved.get(model_key(model), 0) if learned_proof else 0
    )
    window = window_override or resolve_window(
        statusline=state.statusline_window,
        agent_reported=state.agent_window,
        catalog=state.catalog_window,
        model=model,
        learned=grounds.learned,
        table=settings.agent_windows.get(state.agent, settings.windows),
        tokens=state.tokens or 0,
        default=settings.default_window,
        inferred=inferred if compacted_from is not None else None,
        configured=None
        if grounds.configured_window is None
        else grounds.configured_window(model, agent_config),
        proved=proved,
        sizes=() if grounds.window_sizes is None else grounds.window_sizes(model),
    )
    return window, point_for(window.size), agent_config


def idle_compaction_at(
    state: SessionState, grounds: Grounds, config: Mapping[str, str]
) -> float | None:
    """When the agent compacts the session if it stays idle, by its idle rule and the prompt
    cache it last reported; None without either, or when the rule says it will not."""
    if grounds.idle_rule is None or state.prompt_cache is None or state.tokens is None:
        return None
    return grounds.idle_rule(state.tokens, state.prompt_cache, config)


def compacts_at_resume(state: SessionState, grounds: Grounds, now: float) -> bool:
    """Whether the agent compacts the session, resumed at `now`, before its first message (by
    its resume rule and the prompt cache it last reported)."""
    if grounds.resume_rule is None or state.prompt_cache is None or state.tokens is None:
        return False
    config = _config(state, grounds.config)
    return grounds.resume_rule(state.tokens, state.prompt_cache, config, now)


def figures_row(fig: Figures) -> dict[str, Any]:
    """The figures as the plain values `status` and `replay` report."""
    return {
        "tokens": fig.tokens,
        "window": fig.window.size,
        "window_source": fig.window.source,
        "used_pct": None if fig.used_pct is None else round(fig.used_pct, 1),
        "basis_used_pct": None if fig.basis_used_pct is None else round(fig.basis_used_pct, 1),
        "severity": fig.severity.label,
        "compaction_at": fig.compaction_at if fig.auto_compaction else None,
        "tokens_to_compaction": fig.tokens_to_compaction if fig.auto_compaction else None,
        "auto_compaction": fig.auto_compaction,
        "estimated": fig.estimated,
        "window_too_small": fig.over_window,
        "idle_compaction_at": fig.idle_compaction_at,
        "limit_passed": None if fig.limit_passed is None else fig.limit_passed[0],
        "limit_value": None if fig.limit_passed is None else fig.limit_passed[1],
        "compact_window": None if fig.compact_window is None else fig.compact_window.size,
        "compact_window_source": None if fig.compact_window is None else fig.compact_window.source,
    }


def _usage(state: SessionState, window: Window, point: int) -> Usage:
    return Usage(
        tokens=state.tokens or 0,
        window=window.size,
        compaction_at=point,
        reported_used_pct=state.statusline_used_pct,
        pending=state.pending,
    )


def on_hook(
    state: SessionState, event: HookEvent, grounds: Grounds, now: float
) -> tuple[SessionState, Reply]:
    """Answer one hook event; the state returned carries the debounce and handoff bookkeeping."""
    if event.kind == "compaction":
        return _answered(state, event, now, policy.on_compaction(state.policy)), Reply()
    if event.kind == "session_end":
        ended = (now, event.source or "session end")
        return _answered(state, event, now, state.policy, ended=ended), Reply()
    if event.kind == "session_start":
        if event.context_tokens is not None:  # a resume or a fork states its size at once
            state = replace(state, tokens=event.context_tokens, estimated=False)
        policy_state = state.policy
        if event.source == "resume" and compacts_at_resume(state, grounds, now):
            # The warnings given on the old context say nothing of the compacted one.
            policy_state = policy.on_compaction(policy_state)
            state = replace(state, expected_compactions=state.expected_compactions + 1)
        return _answered(state, event, now, policy_state, ended=(None, None)), Reply()
    if event.kind == "model_switch":
        return _answered(state, event, now, state.policy), _switch_reply(state, event, grounds)
    if event.kind == "model_switched":
        return _answered(_switched(state, event), event, now, state.policy), Reply()
    if state.tokens is None or event.kind not in ("tool_call", "prompt", "stop"):
        return _answered(state, event, now, state.policy), Reply()
    current = state if state.model or not event.model else replace(state, model=event.model)
    window, point, agent_config = _window_and_point(current, grounds)
    usage = _usage(state, window, window.size if point is None else point)
    settings = grounds.settings
    t = settings.thresholds
    if event.kind == "stop" and grounds.handoff_on_tool_call:
        # Nothing said at a stop reaches this agent: the handoff waits for its next tool call.
        return _answered(state, event, now, state.policy), Reply()
    if event.kind == "stop":
        # A subagent's turn ends inside its parent's (an agent may report its end like any
        # session's): a handoff, or a note on idling, is for the parent's turn to ask.
        held = event.stop_hook_active or state.parent is not None
        idle_at = idle_compaction_at(current, grounds, agent_config)
        new_policy, text = policy.on_stop(
            state.policy,
            usage,
            settings.handoff,
            t.basis,
            held,
            idle_compaction=idle_at is not None,
        )
        reply = policy.handoff_reply(text, settings.handoff)
        if idle_at is not None and not held:
            idle = messages.idle_compaction_text(idle_at, grounds.utc_offset)
            said = reply.user_message
            reply = replace(reply, user_message=f"{said}\n{idle}" if said else idle)
    else:
        new_policy, reply = _call_reply(state, event, usage, grounds, now)
    return _answered(state, event, now, new_policy), reply


def _call_reply(
    state: SessionState, event: HookEvent, usage: Usage, grounds: Grounds, now: float
) -> tuple[PolicyState, Reply]:
    """A tool call's or a prompt's warning, and the handoff request with a tool call's for an
    agent that reads no answer at a stop (a subagent's is its parent's to ask)."""
    t = grounds.settings.thresholds
    react = policy.on_prompt if event.kind == "prompt" else policy.on_tool_call
    new_policy, warning = react(state.policy, usage, t, now)
    parts = [warning.text] if warning else []
    if event.kind == "tool_call" and grounds.handoff_on_tool_call and state.parent is None:
        new_policy, handoff = policy.on_tool_call_handoff(
            new_policy, usage, grounds.settings.handoff, t.basis
        )
        parts += [handoff] if handoff else []
    return new_policy, Reply(context="\n".join(parts)) if parts else Reply()


def _switched(state: SessionState, event: HookEvent) -> SessionState:
    """The session on `event.to_model`: the old model's reported window no longer holds (the
    next statusline states the new one), and the switch states the context size."""
    if not event.to_model:
        return state
    tokens = state.tokens if event.context_tokens is None else event.context_tokens
    return replace(
        state,
        model=event.to_model,
        tokens=tokens,
        estimated=state.estimated and event.context_tokens is None,
        statusline_window=None,
        statusline_used_pct=None,
        statusline_compact_window=None,
        agent_window=None,
        catalog_window=None,
        compacted_from=None,
        proved_tokens=None,
    )


def _switch_reply(state: SessionState, event: HookEvent, grounds: Grounds) -> Reply:
    """Before a model switch: when the context is already past the new model's compaction
    point (or its window), say so to the user, or refuse the switch (`[model_switch]`)."""
    target = _switched(state, event)
    if target is state or target.tokens is None:
        return Reply()
    # The new model's own window: the old model's tokens say nothing about it (resolved as
    # for an empty context, so no window is inferred from a usage above it).
    window = figures(replace(target, tokens=0), grounds, recent=False).window
    fig = figures(target, grounds, recent=False, window_override=window)
    tokens = target.tokens
    if not (fig.over_window or (fig.auto_compaction and tokens >= fig.compaction_at)):
        return Reply()
    point = fig.compaction_at if fig.auto_compaction else None
    text = messages.model_switch_text(str(event.to_model), tokens, fig.window.size, point)
    if grounds.settings.model_switch.action == "deny":
        return Reply(deny_reason=text)
    return Reply(user_message=text)


def _answered(
    state: SessionState,
    event: HookEvent,
    now: float,
    policy_state: PolicyState,
    ended: tuple[float | None, str | None] | None = None,
) -> SessionState:
    """The session after a hook event (`ended`: its new end time and reason, if they change).
    One `replace`, since it copies every field and this runs on every tool call."""
    ended_at, ended_reason = (state.ended_at, state.ended_reason) if ended is None else ended
    return replace(
        state,
        updated_at=now,
        cwd=event.cwd or state.cwd,
        model=state.model or event.model,
        policy=policy_state,
        ended_at=ended_at,
        ended_reason=ended_reason,
        prompted_at=now if event.kind == "prompt" else state.prompted_at,
    )
